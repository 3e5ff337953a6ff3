"""Prometheus scrapes the API on a port of its own, answered by a thread: a
busy or blocked event loop must not blank the API's panels."""

import time

import httpx

from tests.lab import HTTP, RedisServer, new_run, post_tasks, start_api, wait_settled, wait_until

BLOCK_S = 3


def test_the_metrics_port_answers_while_the_event_loop_is_blocked():
    redis = RedisServer().start()
    # io/sync tasks of the background queue run on the API's own loop and block
    # it (on purpose, see Tasks): IO_LATENCY_MS makes each block for BLOCK_S.
    api = start_api(redis.url, name="api-metrics-thread", IO_LATENCY_MS=str(BLOCK_S * 1000))
    try:
        run = new_run("metrics-thread")
        assert [r.status_code for r in post_tasks(api.url, run, "background", "io/simple", 5)] == [202] * 5
        # Its 202 comes first; then the task blocks the loop, which the API's
        # own port shows by not answering.
        assert [r.status_code for r in post_tasks(api.url, run, "background", "io/sync", 1)] == [202]
        wait_until(lambda: not answers(api.url), BLOCK_S, "the blocking task to block the event loop", interval=0)
        started = time.monotonic()
        scrape = HTTP.get(api.metrics_url, timeout=BLOCK_S - 1)
        answered_in = time.monotonic() - started
        assert scrape.status_code == 200, scrape.text
        assert 'lab_enqueued_total{kind="io",queue="background",variant="simple"} 5.0' in scrape.text
        assert "http_requests_total" in scrape.text and "lab_cpu_seconds_total" in scrape.text
        assert answered_in < BLOCK_S - 1, f"the scrape waited for the blocked loop ({answered_in:.1f}s)"
        wait_settled(api.url, run, 6)
    finally:
        api.stop()
        redis.stop()


def answers(api_url: str) -> bool:
    """The API's own port answers /healthz within a tenth of a second: its event loop runs."""
    try:
        return HTTP.get(f"{api_url}/healthz", timeout=0.1).status_code == 200
    except httpx.TimeoutException:
        return False
