"""The published experiment's results, for `make compare` to show beside the
lab's when its setting is the article's: another machine's figures, never
mixed into the lab's own. The figures are data (data/published_article.toml,
with their source and the load they came from), checked by the models below as
they load.

Source: KTS, «Фоновые асинхронные задачи в FastAPI и их мониторинг»,
habr.com, https://habr.com/ru/companies/kts/articles/816757/ (mirror:
https://forpes.ru/post/175887).

RESULTS holds the enqueue tables as the article prints them, keyed by the
lab's limit text (`0.2cpu/200M`) and the lab's queue name; the article gives
no "all tasks done" or error figure for those rows (None). BACKGROUND holds
its BackgroundTasks table (the tasks run in the API itself, 0.2 CPU / 200M),
one row per endpoint with the users and iterations it used. A row is
{"rps", "median_ms", "p95_ms", "all_done_s", "errors_pct"}, plus "note" where
the article marks the figure.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer

from labctl.records.base import AsRead, Figure, Strict

DATA = Path(__file__).with_name("data") / "published_article.toml"
FIELDS = ("rps", "median_ms", "p95_ms", "all_done_s", "errors_pct")


class Source(Strict):
    title: str
    publisher: str
    url: str
    mirror: str


class Load(Strict):
    endpoint: str
    users: int
    iterations: int
    queues: list[str]
    concurrency: dict[str, int]


class Row(Strict):
    rps: Figure
    median_ms: Figure
    p95_ms: Figure
    all_done_s: Figure | None = None
    errors_pct: Figure | None = None
    note: str | None = None

    @model_serializer(mode="wrap")
    def _note_where_marked(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The row as the article prints it: a note only where it marks the figure."""
        row: dict[str, Any] = handler(self)
        if not self.note:
            row.pop("note", None)
        return row


class BackgroundRow(Row):
    users: int
    iterations: int


class Background(Strict):
    setting: str
    rows: dict[str, BackgroundRow]


class Article(Strict):
    source: Source
    load: Load
    results: dict[str, dict[str, Row]]
    background: Background


class Published(AsRead):
    """The article's rows beside a comparison run at one of its settings (beside())."""

    source: Source
    setting: str
    rows: dict[str, Row]


ARTICLE = Article.model_validate(tomllib.loads(DATA.read_text()))
ENDPOINT, USERS = ARTICLE.load.endpoint, ARTICLE.load.users
SETTINGS = tuple(ARTICLE.results)
QUEUES = tuple(ARTICLE.load.queues)
CONCURRENCY = dict(ARTICLE.load.concurrency)
RESULTS = ARTICLE.results
BACKGROUND_SETTING = ARTICLE.background.setting
BACKGROUND: dict[str, BackgroundRow] = ARTICLE.background.rows


def rows_for(
    setting: str, endpoint: str, users: int, results: Mapping[str, Mapping[str, Row]] = RESULTS
) -> dict[str, Row]:
    """Every published row at a setting for an endpoint and user count: the enqueue table's
    queues, and `background` from the BackgroundTasks table where it has that endpoint and users."""
    rows: dict[str, Row] = {}
    background = BACKGROUND.get(endpoint)
    if setting == BACKGROUND_SETTING and background and background.users == users:
        rows["background"] = Row.model_validate(background.model_dump(include=set(FIELDS)))
    if endpoint == ENDPOINT and users == USERS:
        rows.update(results.get(setting) or {})
    return rows


def beside(
    setting: str, endpoint: str, users: int, results: Mapping[str, Mapping[str, Row]] = RESULTS
) -> Published | None:
    """The article's rows for a comparison's setting (its workers' and API's
    limit text, endpoint and users), or None when the article has none for it."""
    rows = rows_for(setting, endpoint, users, results)
    return Published(source=ARTICLE.source, setting=setting, rows=rows) if rows else None
