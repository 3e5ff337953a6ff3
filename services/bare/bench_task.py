"""What every bare task is: its name, and the counter it adds its value to."""

TASK = "bench_task"


def done_key(queue: str) -> str:
    """The counter every bare task INCRBYs: the tasks executed so far."""
    return f"bench:done:{queue}"
