"""`make load`: one load run (labctl/load_run/steps.py says its steps)."""

from __future__ import annotations

from labctl.errors import EXIT_FAILED, EXIT_OK
from labctl.load_run.options import LoadOptions
from labctl.load_run.steps import run_load


def load(options: LoadOptions) -> int:
    """0 when the run's tasks settled or are still being worked through, 1 when some are not coming."""
    record = run_load(options)
    return EXIT_FAILED if record.unsettled() else EXIT_OK
