"""The machine-speed probe of a load run (labctl/platform/machine_speed.py): a real
thread timing its unit of work between start and stop, read as the median over a
window (records.run.MachineSpeed)."""

import statistics
import time

from labctl.platform.machine_speed import UNIT, SpeedProbe
from labctl.polling import wait_until
from labctl.records.run import MachineSpeed


def test_the_probe_times_its_unit_from_start_to_stop_and_no_longer():
    began = time.time()
    probe = SpeedProbe(every_s=0.02).start()
    try:
        assert wait_until(lambda: len(probe.rows) >= 5, timeout_s=30, every_s=0.05)
    finally:
        rows = probe.stop()
    ended, count = time.time(), len(rows)
    time.sleep(0.1)
    assert len(probe.rows) == count  # stopped: nothing timed after stop()
    ats = [at for at, _ in rows]
    assert ats == sorted(ats) and began - 0.01 <= ats[0] and ats[-1] <= ended
    assert all(ms > 0 for _, ms in rows)
    speed = MachineSpeed(unit=UNIT, rows=rows)
    assert speed.units_per_s(began - 1, ended) == round(1000 / statistics.median(ms for _, ms in rows), 1)
    assert speed.units_per_s(ended + 1, ended + 2) is None  # no timing there
