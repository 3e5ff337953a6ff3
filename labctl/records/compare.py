"""make compare's record (results/compare-<time>.json, beside its .md table and
.html report): every queue under the same limits and load. `schema` "compare/1".
Its runs' rows: records/compare_run.py; the figures derived from them:
records/compare_figures.py; two comparisons side by side: records/compare_agreement.py."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from labctl import stats
from labctl.records.base import AsRead, Figure, Record
from labctl.records.bench import BenchRatios
from labctl.records.capacity import QueueCapacity
from labctl.records.compare_figures import Place, off_speed, ranking, summarise
from labctl.records.compare_run import CompareRun, tasks_per_s
from labctl.records.published import Published
from labctl.records.run import Limits

SCHEMA = "compare/2"
# compare/1: the summary held the mean, min and max over two fixed reps; such a record's
# summary is derived again from its runs when it is read.
OLD_SCHEMAS = ("compare/1",)


# Why a queue's rounds stopped (experiments/compare/rounds.py): its RPS interval got
# within the target, it reached max_rounds, or the next round would pass the budget.
WITHIN, AT_CAP, OUT_OF_TIME = "within", "max_rounds", "budget"


class RoundsRecord(AsRead):
    """How the comparison's rounds went (experiments/compare/rounds.py): the seed, every
    round's order, why each queue stopped. Empty in a record from before the rounds."""

    seed: int | None = None
    rounds: int | None = None
    max_rounds: int | None = None
    target_pct: Figure = 5
    budget_s: Figure | None = None
    orders: list[list[str]] = []
    stopped: dict[str, str] = {}  # queue -> WITHIN, AT_CAP or OUT_OF_TIME

    @property
    def recorded(self) -> bool:
        return bool(self.model_fields_set)

    def not_within(self) -> dict[str, str]:
        """The queues whose RPS interval did not get within the target, and why they stopped."""
        return {q: why for q, why in self.stopped.items() if why != WITHIN}


class ChaosBeside(AsRead):
    """A queue's latest fault run of one fault (experiments/compare/setting.latest_chaos)."""

    queue: str
    fault: str | None = None
    lost: int | None = None
    duplicates: int | None = None
    recovered_s: Figure | None = None  # when work resumed after the fault
    limits: str = ""  # API / workers
    run: str = ""


class CapacityBeside(AsRead, QueueCapacity):
    """A queue's result in its latest `make capacity`, with what it ran under."""

    limits: str = ""  # API / worker
    max_wait_s: Figure | None = None
    record: str = ""


class Setting(AsRead):
    """Where a comparison ran (experiments/compare/setting.setting_of)."""

    limits: Limits = Limits()
    knobs: dict[str, dict[str, str]] = {}  # service -> its settings that change a result
    versions: dict[str, str] = {}  # library -> the version uv.lock pins
    machine: dict[str, str] = {}  # what the Docker engine's host is


class CompareParams(AsRead):
    """What a comparison ran (experiments/compare/comparison.Comparison.record)."""

    workers: list[str] = []
    requests: int | None = None  # a run's requests, where runs did not last a time
    reps: int | None = None  # runs per queue, in a record from before the rounds
    users: int = 0
    quick: bool = False
    rounds: int | None = None
    max_rounds: int | None = None
    target_pct: Figure | None = None
    budget_min: Figure | None = None
    seed: int | None = None
    warmup_run: bool = True
    duration_s: Figure | None = None
    warmup_s: Figure | None = None
    drain_watch_s: Figure | None = None
    setting: str | None = None
    spawn: float | None = None
    endpoint: str = ""
    locust_workers: int | None = None


class Series(AsRead):
    """One run's samples over time, [t from its first request, value] (experiments/compare/series.run_series)."""

    queue: str
    rep: int
    run: str
    requests: list[list[Figure]] = []  # none in a record from before they were read
    throughput: list[list[Figure]] = []
    backlog: list[list[Figure]] = []
    done_pct: list[list[Figure]] = []


class CompareRecord(Record):
    """One comparison: every queue's runs under one setting. A record written before
    runs lasted a time (`params.requests`, no `params.duration_s`) reads as it was."""

    schema_version: str = Field(SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""  # the make line that repeats it
    wall_s: float | None = None
    params: CompareParams = CompareParams()
    # Derived from `runs` (_derived): queue -> field -> {median, low, high, n} over its runs
    # (stats.Estimate); RPS and tasks/s with the queues ranked, ties shared (ranking()); the
    # runs whose machine speed was over SPEED_OFF_PCT % off the median (off_speed()).
    summary: dict[str, dict[str, Any]] = {}
    ranking: dict[str, list[Place]] = {}
    off_speed: list[str] = []
    rounds: RoundsRecord = RoundsRecord()
    runs: list[CompareRun] = []  # one row per load run, in the order they ran
    series: list[Series] = []  # per run, in the order they ran
    series_step_s: float | None = None
    setting: Setting = Setting()
    bench: dict[str, BenchRatios] = {}  # each queue's latest make bench ratios
    chaos: list[ChaosBeside] = []  # each queue's latest make chaos per fault
    capacity: dict[str, CapacityBeside] = {}  # each queue's latest make capacity result
    published: Published | None = None  # the published experiment's rows for this setting
    published_note: str = ""
    notes: list[str] = []
    report: str | None = None  # the .html report's path

    @model_validator(mode="after")
    def _derived(self) -> CompareRecord:
        """The summary, the ranking and the runs off the machine's speed, derived from the
        runs whenever a record is made or read (an older record's too, by today's rules):
        the runs are the figures' one owner, the rest is kept in the JSON for its readers."""
        for row in self.runs:
            if "tasks_per_s" not in row.model_fields_set:
                row.tasks_per_s = tasks_per_s(row.enqueued, row.all_done_s)
        queues = list(dict.fromkeys(r.queue for r in self.runs))
        self.summary = summarise(self.runs, queues)
        self.ranking = ranking(self.runs, queues)
        self.off_speed = off_speed(self.runs)
        self.schema_version = SCHEMA
        return self

    @property
    def queues(self) -> list[str]:
        return list(self.summary)

    def figure(self, queue: str, key: str) -> stats.Estimate:
        return stats.from_json(self.summary.get(queue, {}).get(key))

    def projected(self, queue: str, key: str) -> bool:
        """Whether summarise() marked the queue's figure a projection."""
        return bool((self.summary.get(queue, {}).get(key) or {}).get("projected"))


ARTICLE_SCHEMA = "compare-article/1"


class ArticleRecord(Record):
    """`make compare setting=article`: a comparison at each of the published experiment's
    settings (records/published.py), whole, one after the other."""

    schema_version: str = Field(ARTICLE_SCHEMA, alias="schema")
    run: str
    time: str = ""
    command: str = ""
    wall_s: float | None = None
    parts: list[CompareRecord] = []  # a comparison per setting
    report: str | None = None
