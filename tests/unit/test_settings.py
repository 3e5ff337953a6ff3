"""The knobs (lab/settings.py) and the queue table (lab/queues.py): overrides,
refusals, their documentation, an adapter for every row."""

from pathlib import Path

import pytest

from lab.queues import BROKERS
from lab.settings import Settings
from tests.lab import ROOT


def test_concurrency_knob_and_overrides(monkeypatch):
    monkeypatch.setenv("CONCURRENCY", "5")
    for broker in BROKERS:
        monkeypatch.delenv(broker.concurrency_knob, raising=False)
    monkeypatch.setenv("SAQ_CONCURRENCY", "7")
    s = Settings(_env_file=None)
    assert {b.name: s.concurrency_for(b.name) for b in BROKERS} == {
        b.name: 7 if b.concurrency_knob == "SAQ_CONCURRENCY" else 5 for b in BROKERS
    }


def test_bad_knob_is_refused(monkeypatch):
    monkeypatch.setenv("ENQUEUE_MODE", "sometimes")
    with pytest.raises(ValueError):
        Settings(_env_file=None)


@pytest.mark.parametrize(("reclaim_s", "poll_ms"), [(60, 5000), (24, 2000), (5, 1000), (0.5, 1000), (600, 5000)])
def test_faststream_reclaimer_looks_every_twelfth_of_the_reclaim_delay_within_1_to_5_s(reclaim_s, poll_ms):
    from workers.faststream_queue import reclaim_poll_ms

    assert reclaim_poll_ms(Settings(_env_file=None, faststream_reclaim_s=reclaim_s)) == poll_ms


def test_every_setting_is_documented_in_env_example():
    text = (Path(__file__).resolve().parents[2] / ".env.example").read_text()
    missing = [name.upper() for name in Settings.model_fields if f"{name.upper()}=" not in text]
    assert missing == []


def test_queue_and_delivery_tables_have_a_row_for_every_queue():
    """A queue added to lab/queues.py must be described where users read
    about the queues: its row in docs/queues.md's queue table and in its
    delivery table (tests/unit/test_docs.py checks every other list of queues)."""
    from lab.queues import BROKER_NAMES

    readme = (Path(__file__).resolve().parents[2] / "docs" / "queues.md").read_text()

    def first_cells(header: str) -> set[str]:
        table = readme[readme.index(header) :].split("\n\n")[0].splitlines()[2:]
        return {row.split("|")[1].strip().strip("`") for row in table}

    assert first_cells("| queue | how tasks travel |") == {"background", *BROKER_NAMES}
    assert first_cells("| queue | a task is taken back when |") == {"background", *BROKER_NAMES}


def test_every_adapter_in_workers_has_its_row_in_the_queue_table():
    """lab/queues.py against what exists: an adapter module without its row
    would be a queue the API, the monitor and the tests silently leave out."""
    adapters = {p.name.removesuffix("_queue.py") for p in (ROOT / "workers").glob("*_queue.py")}
    assert adapters == {b.name.replace("-", "_") for b in BROKERS}
    assert all(b.module == f"workers.{b.name.replace('-', '_')}_queue" for b in BROKERS)
