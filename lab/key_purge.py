"""Deleting keys by name or SCAN pattern, in batches: a queue's for `make purge`
(each adapter's `purge(redis)` names its library's, exact names and the
patterns of the keys a library keeps per job) and a run's ledger for `make
reset`. Never FLUSHALL: the ledger, the other queues and the runs' work
counters share this Redis."""


async def delete_keys(redis, names: tuple[str, ...]) -> int:
    """Delete every key named in `names` (a name with `*` is a SCAN pattern);
    the number of keys deleted."""
    deleted = 0
    for name in names:
        if "*" not in name:
            deleted += await redis.delete(name)
            continue
        batch = []
        async for key in redis.scan_iter(match=name, count=1000):
            batch.append(key)
            if len(batch) == 500:
                deleted += await redis.delete(*batch)
                batch = []
        if batch:
            deleted += await redis.delete(*batch)
    return deleted
