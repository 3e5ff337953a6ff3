"""The published experiment's results, for `make compare` to show beside the
lab's when its setting is the article's: another machine's figures, never
mixed into the lab's own.

Source: Иван (KTS), «Фоновые асинхронные задачи в FastAPI и их мониторинг»,
habr.com, https://habr.com/ru/companies/kts/articles/816757/ (mirror:
https://forpes.ru/post/175887). FastAPI with BackgroundTasks, ARQ, SAQ,
FastStream and Celery on Redis, each worker limited to 0.2 CPU / 200 MB and to
0.5 CPU / 500 MB, Locust with 100 users on the enqueue route (the lab's
`io/simple`). Its table per setting: RPS, median and p95 response time (ms),
time until every task had run (s), errors.

RESULTS holds those tables as the article prints them, keyed by the lab's
limit text (`0.2cpu/200M`) and the lab's queue name. It is empty: the stored
copies of the article that could be read here end before its results tables,
and no figure is written here that was not read from it. A row is
{"rps": .., "median_ms": .., "p95_ms": .., "all_done_s": .., "errors_pct": ..},
any of them None where the article gives none.
"""

from __future__ import annotations

from collections.abc import Mapping

SOURCE = {
    "title": "Фоновые асинхронные задачи в FastAPI и их мониторинг",
    "publisher": "KTS, habr.com",
    "url": "https://habr.com/ru/companies/kts/articles/816757/",
    "mirror": "https://forpes.ru/post/175887",
}
# The article's load: 100 Locust users on the route that enqueues one small I/O task.
ENDPOINT = "io/simple"
USERS = 100
SETTINGS = ("0.2cpu/200M", "0.5cpu/500M")
FIELDS = ("rps", "median_ms", "p95_ms", "all_done_s", "errors_pct")
RESULTS: dict[str, dict[str, dict[str, float | None]]] = {setting: {} for setting in SETTINGS}


def beside(setting: str, endpoint: str, users: int, results: Mapping = RESULTS) -> dict | None:
    """The article's rows for a comparison's setting (its workers' and API's
    limit text, endpoint and users), or None when the setting is not the
    article's or the article's table for it is not transcribed."""
    if endpoint != ENDPOINT or users != USERS or not results.get(setting):
        return None
    return {"source": SOURCE, "setting": setting, "rows": {q: dict(row) for q, row in results[setting].items()}}
