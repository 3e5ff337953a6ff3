"""The API stops cleanly after publishing to every queue: each producer was
connected by whichever request came first, and is closed at shutdown by the
server's own task."""

from tests.lab import ON_REDIS, RedisServer, new_run, post_tasks, start_api


def test_api_stops_cleanly_after_using_every_producer():
    redis = RedisServer().start()
    api = start_api(redis.url, name="api-stop")
    offset = api.log_path.stat().st_size
    try:
        run = new_run("api-stop")
        for queue in ON_REDIS:
            assert [r.status_code for r in post_tasks(api.url, run, queue, "io/simple", 5)] == [202] * 5, queue
    finally:
        api.stop()  # fails the test unless the API exits within its grace
        redis.stop()
    with open(api.log_path, "rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    assert "Traceback" not in text and "closing a producer" not in text, text[-3000:]
