"""The bare baseline of `make bench`: what each library costs on its own.

`api.py` is a minimal FastAPI app whose one route makes the library's plain
documented call; `worker.py` runs the library's own worker, with the lab's
settings, on a task that only does INCRBY; `loadgen.py` is the HTTP client
that drives both APIs with the same requests. None of it touches the ledger
or the lab's metrics: it is what the lab's numbers are measured against.
"""
