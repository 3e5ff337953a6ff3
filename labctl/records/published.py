"""The published experiment's results, for `make compare` to show beside the
lab's when its setting is the article's: another machine's figures, never
mixed into the lab's own.

Source: KTS, «Фоновые асинхронные задачи в FastAPI и их мониторинг»,
habr.com, https://habr.com/ru/companies/kts/articles/816757/ (mirror:
https://forpes.ru/post/175887). FastAPI with BackgroundTasks, ARQ, SAQ,
FastStream and Celery on Redis, the API and each worker limited to 0.2 CPU /
200 MB and to 0.5 CPU / 500 MB, Locust with 100 users on the enqueue route
(the lab's `io/simple`), 50,000 iterations a run; ARQ, SAQ and Celery at
concurrency 1 "so as not to disadvantage FastStream". Its machine is not
named. RPS and times are Locust's.

RESULTS holds the enqueue tables as the article prints them, keyed by the
lab's limit text (`0.2cpu/200M`) and the lab's queue name; the article gives
no "all tasks done" or error figure for those rows (None). BACKGROUND holds
its BackgroundTasks table (the tasks run in the API itself, 0.2 CPU / 200M),
one row per endpoint with the users and iterations it used. A row is
{"rps", "median_ms", "p95_ms", "all_done_s", "errors_pct"}, plus "note" where
the article marks the figure.
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
ITERATIONS = 50_000
SETTINGS = ("0.2cpu/200M", "0.5cpu/500M")
# The queues the article compared, in its order, and the concurrency it gave the
# workers it could set (FastStream's subscriber took one message at a time).
QUEUES = ("arq", "saq", "faststream", "celery")
CONCURRENCY = {"arq": 1, "saq": 1, "celery": 1}
FIELDS = ("rps", "median_ms", "p95_ms", "all_done_s", "errors_pct")


def _row(rps: float, median_ms: float, p95_ms: float, note: str | None = None) -> dict:
    row: dict = {"rps": rps, "median_ms": median_ms, "p95_ms": p95_ms, "all_done_s": None, "errors_pct": None}
    if note:
        row["note"] = note
    return row


RESULTS: dict[str, dict[str, dict]] = {
    "0.2cpu/200M": {
        "arq": _row(227, 380, 590),
        "saq": _row(
            162,
            290,
            500,
            "passed only with a longer wait between requests; the API hung for 5-20 s at a time without it",
        ),
        "faststream": _row(262, 300, 490),
        "celery": _row(151, 590, 880),
    },
    "0.5cpu/500M": {
        "arq": _row(1114, 18, 34),
        "saq": _row(1079, 19, 37),
        "faststream": _row(1178, 15, 31),
        "celery": _row(871, 30, 59),
    },
}

# FastAPI BackgroundTasks in the API itself, 0.2 CPU / 200M.
BACKGROUND_SETTING = "0.2cpu/200M"
BACKGROUND: dict[str, dict] = {
    "io/simple": {
        "users": 100,
        "iterations": 50_000,
        "rps": 319,
        "median_ms": 200,
        "p95_ms": 390,
        "all_done_s": 160,
        "errors_pct": 0.0,
    },
    "io/sync": {
        "users": 100,
        "iterations": 50_000,
        "rps": 290,
        "median_ms": 280,
        "p95_ms": 410,
        "all_done_s": 180,
        "errors_pct": 0.0,
    },
    "io/thread": {
        "users": 100,
        "iterations": 50_000,
        "rps": 209,
        "median_ms": 400,
        "p95_ms": 600,
        "all_done_s": 245,
        "errors_pct": 0.0,
    },
    "cpu/simple": {
        "users": 3,
        "iterations": 100,
        "rps": 0.4,
        "median_ms": 7300,
        "p95_ms": 9600,
        "all_done_s": 245,
        "errors_pct": 0.0,
    },
    "cpu/process": {
        "users": 3,
        "iterations": 1000,
        "rps": 16,
        "median_ms": 190,
        "p95_ms": 400,
        "all_done_s": 2460,
        "errors_pct": 0.0,
    },
}


def rows_for(setting: str, endpoint: str, users: int, results: Mapping = RESULTS) -> dict[str, dict]:
    """Every published row at a setting for an endpoint and user count: the enqueue table's
    queues, and `background` from the BackgroundTasks table where it has that endpoint and users."""
    rows: dict[str, dict] = {}
    background = BACKGROUND.get(endpoint)
    if setting == BACKGROUND_SETTING and background and background["users"] == users:
        rows["background"] = {k: background[k] for k in FIELDS}
    if endpoint == ENDPOINT and users == USERS:
        rows.update({q: dict(row) for q, row in (results.get(setting) or {}).items()})
    return rows


def beside(setting: str, endpoint: str, users: int, results: Mapping = RESULTS) -> dict | None:
    """The article's rows for a comparison's setting (its workers' and API's
    limit text, endpoint and users), or None when the article has none for it."""
    rows = rows_for(setting, endpoint, users, results)
    if not rows:
        return None
    return {"source": SOURCE, "setting": setting, "rows": rows}
