"""The queue authors' published benchmarks, as they print them, and the claims
`make claims` decides: the figures are another machine's (mostly Apple laptops),
so the claims are read on the ratios between queues, never on the seconds. They
are data (data/claims_published.toml, with each benchmark's source), checked by
the models below as they load.

BENCHES: per benchmark, its source (repository, commit, files, licence), what it
measured, its N and worker processes as published (streaq's: per column), the
queue rows and their figures as published. The row keys are the lab's labels of
what ran (`rq-simple` is RQ's SimpleWorker, `celery-threads` Celery with
`-P threads`, ...). Figures in seconds unless the name says a rate (`rate`:
tasks per second).

CLAIMS: each claim with the ratio it rests on (a figure of one row over the same
figure of another, in the same benchmark and setup, repetition by repetition)
and the rule that decides it (records/claims.py, `decide`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, model_validator

from labctl.records.base import Strict

DATA = Path(__file__).with_name("data") / "claims_published.toml"
FAILED = "☠️"  # streaq's tables print it where a run failed: no figure


def _printed(value: Any) -> Any:
    return None if value == FAILED else value


Figure = Annotated[float | None, BeforeValidator(_printed)]
Rule = Literal["magnitude", "parity", "slightly", "much", "event", "absolute"]


class Source(Strict):
    repo: str  # or, for a post, its address
    commit: str  # or, for a post, its date
    files: list[str]
    licence: str
    versions: str


def own_times(row: dict[str, Figure], timer_never_reset: bool) -> dict[str, Figure]:
    """SAQ's script's phases on their own: as printed where the timer is reset per phase; where it
    never is (RQ's), the noop less the enqueue, and the sleep less what came before it and a second
    enqueue as long as the first."""
    enqueue, noop, sleep = (row.get(phase) for phase in ("enqueue_s", "noop_s", "sleep_s"))
    if not timer_never_reset:
        return {"noop_own_s": noop, "sleep_own_s": sleep}
    if enqueue is None or noop is None or sleep is None:
        raise ValueError(f"a row whose timer is never reset needs its three printed phases: {row}")
    return {"noop_own_s": noop - enqueue, "sleep_own_s": sleep - noop - enqueue}


class Bench(Strict):
    title: str
    source: Source
    setup: str
    n: int
    workers: int | None = None  # None: per column (streaq's), or the lab's own
    columns: tuple[int, ...] = ()  # streaq's tables: the process counts, one column each (w1, w10, ...)
    concurrency: int | None = None  # tasks at once per worker process, where every row ran the same
    figures: tuple[str, ...]
    timer_never_reset: tuple[str, ...] = ()  # the rows whose printed times count from the start
    quirks: tuple[str, ...] = ()  # what the lab's setup changes against the author's, and what weighs on a figure
    published: dict[str, dict[str, Figure]]

    @model_validator(mode="after")
    def _rows(self) -> Bench:
        """Each row holds the benchmark's figures or its columns alone; the phases' own times are
        derived from the printed ones."""
        known = {*self.figures, *(f"w{c}" for c in self.columns)}
        for queue, row in self.published.items():
            if "noop_own_s" in self.figures:
                row.update(own_times(row, queue in self.timer_never_reset))
            if unknown := set(row) - known:
                raise ValueError(f"{queue}: {sorted(unknown)} is no figure or column of {self.title}")
        return self

    def figure(self, queue: str, key: str) -> float | None:
        return self.published.get(queue, {}).get(key)


class Claim(Strict):
    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    source: str
    bench: str
    num: str  # the row whose figure is divided
    den: str  # by this row's
    figure: str  # the figure (a time: num/den = how many times slower num is; a rate: how many times faster)
    published: float | None = None  # the published ratio: its table's unless stated; None for a claim in words
    rule: Rule
    setup: str = "unlimited"
    column: str = ""  # streaq: the published process-count column (w1, w10, ...)
    note: str = ""  # what the ratio rests on, and what moves it between machines


def table_ratio(bench: Bench, claim: Claim) -> float | None:
    """num's published figure over den's (a streaq column's seconds stand for its timed figure)."""
    key = claim.column or claim.figure
    a, b = bench.figure(claim.num, key), bench.figure(claim.den, key)
    return round(a / b, 3) if a and b else None


class Published(Strict):
    benches: dict[str, Bench]
    claims: tuple[Claim, ...]

    @model_validator(mode="after")
    def _claims(self) -> Published:
        """Each claim reads a figure its benchmark records; one that states no ratio takes its table's."""
        self.claims = tuple(self._checked(claim) for claim in self.claims)
        return self

    def _checked(self, claim: Claim) -> Claim:
        bench = self.benches.get(claim.bench)
        if bench is None or claim.figure not in bench.figures:
            raise ValueError(f"{claim.id}: {claim.bench} records no {claim.figure}")
        if claim.column and int(claim.column.removeprefix("w")) not in bench.columns:
            raise ValueError(f"{claim.id}: {claim.bench} has no column {claim.column}")
        if "published" in claim.model_fields_set:
            return claim
        return claim.model_copy(update={"published": table_ratio(bench, claim)})


def _concurrency(*benches: Bench) -> int:
    """The one concurrency the tables all state: the lab's configurations of them run it."""
    stated = {b.concurrency for b in benches if b.concurrency is not None}
    if len(stated) != 1 or any(b.concurrency is None for b in benches):
        raise ValueError(f"{DATA.name}: {', '.join(b.title for b in benches)} state no one concurrency")
    return stated.pop()


PUBLISHED = Published.model_validate(tomllib.loads(DATA.read_text()))
BENCHES = PUBLISHED.benches
CLAIMS = PUBLISHED.claims
# streaq's tables: the lab's streaq configurations run their concurrency and the sleep table's process counts.
STREAQ_CONCURRENCY = _concurrency(BENCHES["streaq_noop"], BENCHES["streaq_sleep"])
STREAQ_SLEEP_WORKERS = BENCHES["streaq_sleep"].columns
