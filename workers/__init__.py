"""One adapter per queue library: how the API enqueues a task and how the worker runs it."""
