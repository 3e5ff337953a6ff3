"""The enqueue route's Prometheus series, one pair per queue/kind/variant,
looked up once and counted in plain Python (lab/metrics.py: Observe, Count)."""

from lab.metrics import ENQUEUE_SECONDS, ENQUEUED, Count, Observe
from lab.protocol import TaskMessage

_SERIES: dict[tuple, tuple[Observe, Count]] = {}


def enqueue_series(msg: TaskMessage) -> tuple[Observe, Count]:
    """The `lab_enqueue_seconds` and `lab_enqueued_total` series of a task's queue/kind/variant."""
    key = (msg.queue, msg.kind, msg.variant)
    series = _SERIES.get(key)
    if series is None:
        series = _SERIES[key] = (Observe(ENQUEUE_SECONDS.labels(msg.queue)), Count(ENQUEUED.labels(*key)))
    return series
