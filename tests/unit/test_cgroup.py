"""The cgroup readers (lab/cgroup.py) on written cgroup v1 and v2 trees."""

from pathlib import Path

from lab.cgroup import read_cgroup


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_cgroup_v2_with_limits(tmp_path):
    root = write(
        tmp_path,
        {
            "cgroup.controllers": "cpu memory",
            "cpu.stat": "usage_usec 2500000\nuser_usec 2000000\nnr_periods 40\nnr_throttled 4\nthrottled_usec 750000\n",
            "cpu.max": "20000 100000",
            "memory.current": "104857600",
            "memory.stat": "anon 73400320\nfile 31457280\nactive_file 10485760\ninactive_file 20971520\n",
            "memory.max": "209715200",
            "memory.events": "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n",
        },
    )
    s = read_cgroup(root)
    assert (s.cpu_seconds, s.throttled_seconds, s.cpu_limit_cores) == (2.5, 0.75, 0.2)
    assert (s.periods, s.throttled_periods) == (40, 4)  # a share of periods, never above 1
    # the working set leaves out inactive page cache; the raw usage keeps it
    assert (s.memory_bytes, s.memory_usage_bytes) == (104857600 - 20971520, 104857600)
    assert (s.memory_limit_bytes, s.oom_kills) == (209715200, 2)


def test_cgroup_v2_without_limits_reports_the_host(tmp_path):
    root = write(
        tmp_path,
        {
            "cgroup.controllers": "",
            "cpu.stat": "usage_usec 1\n",
            "cpu.max": "max 100000",
            "memory.current": "1",
            "memory.max": "max",
        },
    )
    s = read_cgroup(root)
    assert s.cpu_limit_cores >= 1 and s.memory_limit_bytes > 1024**2


def test_cgroup_v1_with_limits(tmp_path):
    root = write(
        tmp_path,
        {
            "cpuacct/cpuacct.usage": "3000000000",
            "cpu/cpu.stat": "nr_periods 10\nnr_throttled 2\nthrottled_time 500000000\n",
            "cpu/cpu.cfs_quota_us": "50000",
            "cpu/cpu.cfs_period_us": "100000",
            "memory/memory.usage_in_bytes": "1048576",
            "memory/memory.stat": "cache 524288\ninactive_file 4096\ntotal_inactive_file 262144\n",
            "memory/memory.limit_in_bytes": "524288000",
            "memory/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        },
    )
    s = read_cgroup(root)
    assert (s.cpu_seconds, s.throttled_seconds, s.cpu_limit_cores) == (3.0, 0.5, 0.5)
    assert (s.periods, s.throttled_periods) == (10, 2)
    assert (s.memory_bytes, s.memory_usage_bytes) == (1048576 - 262144, 1048576)
    assert (s.memory_limit_bytes, s.oom_kills) == (524288000, 3)


def test_cgroup_v1_unlimited_memory_is_the_host(tmp_path):
    root = write(
        tmp_path,
        {
            "cpu/cpu.cfs_quota_us": "-1",
            "cpu/cpu.cfs_period_us": "100000",
            "memory/memory.limit_in_bytes": "9223372036854771712",
        },
    )
    s = read_cgroup(root)
    assert s.memory_limit_bytes < 9223372036854771712 and s.cpu_limit_cores >= 1
