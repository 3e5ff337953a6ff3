"""The API fuzzed from its own OpenAPI schema: whatever arrives, no 5xx other
than the documented 502/503, no traceback, and every error a JSON body."""

import json

import pytest

from tests.lab import start_api

SKIPPED = {"/api/v1/clients"}  # builds up to 50 000 objects per call; its limits are tested in test_experiments


@pytest.fixture(scope="module")
def fuzzed_api(redis_server):
    # No upstream service runs: the upstream routes must answer 502, not fail.
    proc = start_api(redis_server.url, name="api-fuzz", UPSTREAM_URL="http://127.0.0.1:9/")
    yield proc
    proc.stop()


def check(case) -> None:
    response = case.call(timeout=30)
    status = response.status_code
    where = f"{case.method} {case.formatted_path}"
    assert status < 500 or status in (502, 503), f"{where}: {status} {response.text[:300]}"
    assert "Traceback" not in response.text, where
    if status >= 400:
        body = json.loads(response.text)
        assert "error" in body, f"{where}: {body}"


def test_fuzzed_requests_get_clean_answers(fuzzed_api):
    # Imported here: schemathesis and hypothesis take seconds of CPU to import,
    # which every pytest process (each xdist worker) paid at collection, fuzzing
    # or not. Their pytest plugins are off (pyproject.toml): nothing uses them.
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(f"{fuzzed_api.url}/openapi.json")
    fuzzed = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in SKIPPED:
            continue
        # Data that fits the schema, then data that does not.
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)
            run = settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))(
                given(strategy)(check)
            )
            try:
                run()
            except Unsatisfiable:
                # Nothing to get wrong: the route takes no parameter and no body.
                assert mode == GenerationMode.NEGATIVE, operation.path
                continue
            fuzzed.append(f"{mode} {operation.method.upper()} {operation.path}")
    # every route but the skipped one, with valid data; the ones with input, with invalid data too
    assert sum(f.startswith("positive") for f in fuzzed) >= 10, fuzzed
    assert "negative POST /api/v1/incr/{kind}/{variant}/{queue}" in fuzzed, fuzzed
    assert "negative GET /api/v1/payload" in fuzzed, fuzzed
