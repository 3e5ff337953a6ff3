"""Prometheus scrapes the API on a port of its own, answered by a thread: a
busy or blocked event loop must not blank the API's panels."""

import redis as sync_redis

from lab.ledger import work_key
from lab.protocol import Kind, Queue, TaskMessage, Variant
from tests.lab import HTTP, Metrics, RedisServer, new_run, post_tasks, start_api, wait_settled, wait_until

BLOCK_S = 3


def test_the_metrics_port_answers_while_the_event_loop_is_blocked():
    redis = RedisServer().start()
    # io/sync tasks of the background queue run on the API's own loop and block
    # it (on purpose, see Tasks): IO_LATENCY_MS makes each block for BLOCK_S.
    api = start_api(redis.url, name="api-metrics-thread", IO_LATENCY_MS=str(BLOCK_S * 1000))
    client = sync_redis.Redis.from_url(redis.url)
    try:
        run = new_run("metrics-thread")
        assert [r.status_code for r in post_tasks(api.url, run, "background", "io/simple", 5)] == [202] * 5
        # Its 202 comes first; then the task blocks the loop: from the moment it
        # is counted in progress to its body's INCRBY the loop never turns.
        assert [r.status_code for r in post_tasks(api.url, run, "background", "io/sync", 1)] == [202]
        blocking_incr = work_key(TaskMessage.new(run, Queue.background, Kind.io, Variant.sync, 1))

        def in_progress() -> float:
            scraped = Metrics(HTTP.get(api.metrics_url, timeout=30).text)
            return scraped.value("lab_tasks_in_progress", queue="background", kind="io", variant="sync")

        wait_until(lambda: in_progress() == 1, 60, "the blocking task to start", interval=0.05)
        scrape = HTTP.get(api.metrics_url, timeout=30)
        # Read after the scrape's answer: the body's INCRBY not made yet, so the loop was blocked throughout.
        assert client.get(blocking_incr) is None, "the task had ended: the scrape proves nothing"
        assert scrape.status_code == 200, scrape.text
        assert 'lab_enqueued_total{kind="io",queue="background",variant="simple"} 5.0' in scrape.text
        assert "http_requests_total" in scrape.text and "lab_cpu_seconds_total" in scrape.text
        wait_settled(api.url, run, 6)
        assert int(client.get(blocking_incr)) == 1
    finally:
        client.close()
        api.stop()
        redis.stop()
