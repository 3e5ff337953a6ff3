"""A comparison's figures as every table and page of it prints them: a figure with
its interval (in markdown and as an HTML cell), a queue's runs, the setting as one
line, the legend, and the rows of the published experiment and of each queue's
capacity, which the markdown and the report page both show. Pure functions, no I/O.
"""

from __future__ import annotations

from labctl import stats
from labctl.records.compare import CompareParams, CompareRecord
from labctl.records.compare_figures import ARTICLE_FIELDS
from labctl.records.published import Published
from labctl.render.capacity_page import bracket_text
from labctl.render.plain_page import esc

num = stats.num
MARK_WIDE = "†"  # a queue whose RPS interval did not get within the comparison's target


# -- Figures as the tables print them --------------------------------------------------------
def figure(record: CompareRecord, queue: str, key: str, show_n: bool = False) -> str:
    """`412 [398–430]`, `~` before a projected time; `-` for none."""
    est = record.figure(queue, key)
    text = stats.text(est, show_n)
    return f"~{text} projected" if record.projected(queue, key) and est.median is not None else text


def runs_of(record: CompareRecord, queue: str) -> int:
    return sum(1 for r in record.runs if r.queue == queue)


# -- The setting, as one line --------------------------------------------------------------
def limits_line(record: CompareRecord) -> str:
    limits = record.setting.limits
    return f"API {limits.api_text}, workers {limits.workers_text}"


def run_length(p: CompareParams) -> str:
    if p.duration_s:
        return f"{p.duration_s:g} s of load per run (RPS over all but its first {p.warmup_s or 0:g} s)"
    return f"{p.requests} requests per run"


def rounds_line(record: CompareRecord) -> str:
    r = record.rounds
    if not r.recorded:
        return f"{record.params.reps or '?'} rep(s) per queue, in a fixed order"
    counts = sorted({runs_of(record, q) for q in record.queues})
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return (
        f"{len(r.orders)} round(s) in a random order (seed {r.seed}), {n} runs per queue: "
        f"at least {r.rounds}, then more for a queue whose RPS interval was wider than "
        f"+-{r.target_pct:g} % (at most {r.max_rounds})"
    )


def heading(record: CompareRecord) -> str:
    p = record.params
    quick = "; quick: a first look, its intervals as wide as its few runs make them" if p.quick else ""
    return f"{p.endpoint}, {p.users} users, {run_length(p)}; {rounds_line(record)}; {limits_line(record)}{quick}"


# -- What the markdown and the report page both show --------------------------------------------
LEGEND = (
    "Each figure: the median of the queue's runs [its 95 % confidence interval] (n runs). "
    "Rank: 1 + the number of queues shown faster, where shown means the 95 % interval of the ratio of "
    "the two queues' figures lies wholly above 1; queues that share a rank were not told apart. "
    "tasks/s: the run's tasks over the time from its first enqueue to its last completion."
)


CAPACITY_HEADER = (
    "queue",
    "sustained tasks/s",
    "bracket",
    "limited by",
    "tasks/s per CPU",
    "max wait s",
    "limits",
    "record",
)


def capacity_rows(record: CompareRecord) -> list[list[str]]:
    """Each queue's latest make capacity: the rate sustained [95 % CI] (n), the search's bracket, what limited it."""
    return [
        [
            q,
            stats.text(stats.from_json(c.sustained_rate)),
            bracket_text(c.bracket),
            c.limited_by or "-",
            num(c.tasks_per_cpu),
            num(c.max_wait_s),
            c.limits,
            c.record,
        ]
        for q, c in record.capacity.items()
    ]


def published_rows(published: Published) -> list[list[str]]:
    """The published experiment's figures at its setting, a row per queue."""
    return [[q, *(num(getattr(pub, key)) for _, key in ARTICLE_FIELDS)] for q, pub in published.rows.items()]


# -- A figure as the report pages' cell ---------------------------------------------------------
def stat_cell(record: CompareRecord, queue: str, key: str) -> str:
    """A figure's cell: the median, its interval below it, and the numbers as data attributes."""
    est = record.figure(queue, key)
    attrs = f' data-queue="{esc(queue)}" data-field="{key}"'
    attrs += "".join(f' data-{k}="{v}"' for k, v in est.as_json().items() if v is not None)
    text = esc(num(est.median))
    if est.low is not None and est.high is not None:
        text += f"<span class=ci>[{esc(num(est.low))}–{esc(num(est.high))}]</span>"
    if record.projected(queue, key) and est.median is not None:
        attrs += ' data-projected="1"'
        text = f"~{text}<span class=ci>projected</span>"
    return f"<td class=n{attrs}>{text}</td>"
