"""A lab process freezes what it holds once started, so that Python's full
collections skip it (`gc.freeze`).

A full (generation-2) collection walks every object the collector tracks. The
lab's API imports a queue's library when the queue is first used (and freezes
again then), and each worker the lab's runner beside its library: tens of
thousands of objects that live as long as the process and that every full
collection would walk again, under a small CPU
limit a large part of what the lab's API costs beyond a plain app's
(docs/hot-path.md). Frozen, they are never walked again; what the process
makes later is collected as before, and reference counting frees frozen
objects as usual.
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
