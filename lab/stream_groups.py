"""Redis stream consumer groups, as the stream-based queues use them (FastStream,
taskiq, streaq, docket): created at the start of the stream, and their backlog."""

from redis.exceptions import ResponseError


async def ensure_group(redis, stream: str, group: str) -> None:
    """Create the consumer group at the start of the stream ("0"). A group the
    libraries create starts at "$" (new entries only): whatever the API
    published before the first worker started would never be delivered."""
    try:
        await redis.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def find_group(groups: list[dict], group: str) -> dict | None:
    """The group named `group` among XINFO GROUPS' answer, if it is there."""
    return next((g for g in groups if g["name"] in (group, group.encode())), None)


async def group_lag(redis, stream: str, group: str) -> int | float:
    """Entries the group has not been handed yet (XINFO GROUPS `lag`); the
    stream's length before any group exists; NaN when Redis cannot tell."""
    try:
        found = find_group(await redis.xinfo_groups(stream), group)
    except ResponseError:  # no stream yet
        return 0
    if found is not None:
        return found["lag"] if found.get("lag") is not None else float("nan")
    return await redis.xlen(stream)


async def unread_entries(redis, stream: str, group: str) -> int:
    """Entries no worker has read yet, in a stream whose entries are deleted once
    their task is done (streaq, docket): the stream holds the backlog plus what
    is read and not yet done, the group's pending list."""
    length = await redis.xlen(stream)
    if not length:
        return 0
    try:
        pending = (await redis.xpending(stream, group))["pending"]
    except ResponseError:  # no group yet: nothing was read
        pending = 0
    return max(0, length - pending)
