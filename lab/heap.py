"""A lab process freezes what it holds once started, so that Python's full
collections skip it (`gc.freeze`).

A full (generation-2) collection walks every object the collector tracks. The
lab's API imports all seven queue libraries, and each worker the lab's runner
beside its library: 60,000-150,000 objects that live as long as the process
and that every full collection walked again. Under 0.2 CPU one walk took
72-86 ms of the API's quota, about once every 1,000-2,000 requests: 35-85 µs
a request on a request of 350 µs, the largest part of what the lab's API cost
beyond a plain app's, and the part that moved most from one round to the next.
Frozen, they are never walked again; what the process makes later is collected
as before, and reference counting frees frozen objects as usual.
"""

import gc


def freeze_startup_heap(collect: bool = True) -> None:
    """Freeze every object tracked now. `collect` first, so that start-up's
    garbage is not frozen with it. A forked child skips that: what it would
    walk is mostly its parent's, on pages the two share until written, and a
    walk writes to every object it visits."""
    if collect:
        gc.collect()
    gc.freeze()
