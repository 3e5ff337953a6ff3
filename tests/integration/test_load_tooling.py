"""The load tooling without Docker: the parameters the locustfile and the driver
share (lab/load_params.py), the result record and table (labctl/records/run.py,
labctl/records/run_build.py, labctl/render/run_table.py),
and the locustfile itself run by real Locust processes (a master and two workers)
against a small HTTP server: exactly `iterations` requests, each counted once.

Locust is never imported here: it monkey-patches the whole process with gevent.
It runs as subprocesses instead (`uv sync --all-groups` installs it on the host).
"""

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.main import get_command

from lab import load_params
from lab.protocol import RUN_PATTERN
from labctl import config
from labctl.app import app as labctl_app
from labctl.app import dotenv_defaults
from labctl.clients.grafana import RUN_DASHBOARDS, annotation, grafana_link
from labctl.errors import ParamError
from labctl.load_run import follow, locust
from labctl.load_run.options import LoadOptions
from labctl.platform import containers as C
from labctl.records.bench import BenchRecord
from labctl.records.run import RunRecord, limit_text, workers_limit_text
from labctl.records.run_build import RunInputs, build_run_record, generator_check
from labctl.render import run_table
from labctl.render.bench_table import rows_cells as bench_cells


def bench_rows(record: dict) -> list[str]:
    """The bench table's rows as markdown lines: one per queue (arq twice), of a
    record as its JSON holds it, read as the store reads it."""
    return ["| " + " | ".join(cells) + " |" for cells in bench_cells(BenchRecord.model_validate(record))]


ROOT = Path(__file__).resolve().parents[2]
P = load_params


# -- Parameters ---------------------------------------------------------------------
def test_queue_defaults_are_the_published_users_for_a_minute():
    p = P.parse_params({"worker": "arq"}, now=0)
    assert (p.scenario, p.users, p.spawn_rate, p.iterations, p.duration_s) == ("queue", 100, 100.0, None, 60.0)
    assert (p.workers, p.endpoints, p.user_class) == (("arq",), ("io/simple",), "QueueUser")
    assert [(c.method, c.path, c.body, c.expect_status) for c in p.calls] == [
        ("POST", "/api/v1/incr/io/simple/arq", {"value": 1}, 202)
    ]
    assert p.run == "arq-io-simple-100u-19700101T000000"


def test_all_mixes_every_worker_and_endpoint_and_lists_keep_a_fixed_order():
    p = P.parse_params({"worker": "all", "endpoint": "all"})
    assert len(p.calls) == len(P.QUEUES) * 5 and len({c.path for c in p.calls}) == len(P.QUEUES) * 5
    assert (p.worker_label, p.endpoint_label) == ("all", "all")
    q = P.parse_params({"worker": "celery, arq", "endpoint": "cpu/process,io/simple"})
    assert q.workers == ("arq", "celery") and q.endpoints == ("io/simple", "cpu/process")
    assert q.worker_label == "arq,celery" and re.fullmatch(RUN_PATTERN, q.run), q.run
    assert {c.path for c in q.calls} == {
        f"/api/v1/incr/{e}/{w}" for w in ("arq", "celery") for e in ("io/simple", "cpu/process")
    }


def test_event_loop_scenarios():
    up = P.parse_params({"scenario": "upstream", "variant": "sync-def", "users": "50"})
    assert (up.user_class, up.iterations, up.users, up.endpoint_label) == ("UpstreamUser", 100, 50, "upstream/sync-def")
    assert [(c.method, c.path, c.expect_status) for c in up.calls] == [("POST", "/api/v1/upstream/sync-def", 200)]
    clients = P.parse_params({"scenario": "clients", "mode": "prejson", "count": "40000"})
    assert [c.path for c in clients.calls] == ["/api/v1/clients?count=40000&mode=prejson"]
    assert P.parse_params({"scenario": "clients"}).calls[0].path == "/api/v1/clients?count=1000&mode=model"
    payload = P.parse_params({"scenario": "payload", "size": "220000", "duration": "1m"})
    assert (payload.duration_s, payload.iterations) == (60.0, None)
    assert [(c.method, c.path, c.expect_length) for c in payload.calls] == [
        ("GET", "/api/v1/payload?size=220000", 220000)
    ]
    assert P.parse_params({"scenario": "payload", "size": "0"}).calls[0].expect_length == 0


@pytest.mark.parametrize(
    "raw, names",
    [
        ({}, "worker="),
        ({"worker": "kafka"}, "worker='kafka'"),
        ({"worker": "arq", "endpoint": "io/fast"}, "endpoint="),
        ({"worker": "arq", "iterations": "10", "duration": "10s"}, "not both"),
        ({"worker": "arq", "iterations": "0"}, "iterations=0"),
        ({"worker": "arq", "iterations": "1e3"}, "iterations="),
        ({"worker": "arq", "users": "0"}, "users=0"),
        ({"worker": "arq", "spawn_rate": "0"}, "spawn="),
        ({"worker": "arq", "spawn_rate": "nan"}, "spawn="),
        ({"worker": "arq", "variant": "sync-def"}, "variant"),
        ({"worker": "arq", "run": "a:b"}, "run="),
        ({"worker": "arq", "run": "x" * 65}, "run="),
        ({"scenario": "upstream"}, "variant="),
        ({"scenario": "upstream", "variant": "async-native", "worker": "arq"}, "worker"),
        ({"scenario": "clients", "count": "50001"}, "count=50001"),
        ({"scenario": "clients", "mode": "orjson"}, "mode="),
        ({"scenario": "payload", "size": str(10 * 1024 * 1024 + 1)}, "size="),
        ({"scenario": "websocket"}, "scenario="),
        ({"worker": "arq", "rate": "0"}, "rate='0': must be more than 0"),
        ({"worker": "arq", "rate": "-5"}, "rate='-5': must be more than 0"),
        ({"worker": "arq", "rate": "fast"}, "rate='fast': not a number"),
        ({"worker": "arq", "rate": "inf"}, "rate='inf'"),
        ({"worker": "arq", "rate": "50", "iterations": "100"}, "give duration=, not iterations="),
        ({"scenario": "payload", "rate": "50"}, "rate= needs duration= for scenario=payload"),
    ],
)
def test_bad_parameters_are_refused_naming_the_parameter(raw, names):
    with pytest.raises(P.ParamError) as err:
        P.parse_params(raw)
    assert names in str(err.value)


@pytest.mark.parametrize(
    "text, seconds", [("90", 90), ("90s", 90), ("2m", 120), ("1h30m", 5400), ("1.5m", 90), ("60.0", 60)]
)
def test_durations(text, seconds):
    assert P.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "10x", "m", "1m 5s", "-5"])
def test_bad_durations(text):
    with pytest.raises(P.ParamError):
        P.parse_duration(text)


def test_a_rate_run_sends_for_a_duration_with_users_enough_for_its_schedule():
    p = P.parse_params({"worker": "arq", "rate": "150"}, now=0)
    # Each user sends every RATE_USER_INTERVAL_S: 300 users; the queue's default minute.
    assert (p.rate, p.users, p.iterations, p.duration_s) == (150.0, 300, None, 60.0)
    # No more users than that at a low rate: each connection stays busy enough that the
    # API's keep-alive never closes it under a send.
    assert P.parse_params({"worker": "arq", "rate": "10"}).users == 20
    assert P.parse_params({"worker": "arq", "rate": "0.2"}).users == 1
    assert P.parse_params({"worker": "arq", "rate": "10", "users": "4"}).users == 4
    assert P.parse_params({"worker": "arq", "rate": "1e6"}).users == P.MAX_RATE_USERS
    assert P.parse_params({"scenario": "payload", "rate": "5", "duration": "10s"}).rate == 5.0
    assert P.parse_params({"worker": "arq"}).rate is None  # closed loop, as without rate=
    # The driver refuses, before anything starts, a rate above what its Locust processes are asked to send.
    with pytest.raises(ParamError, match="rate=2500: more than 2 Locust worker"):
        LoadOptions(worker="arq", rate=2500, locust_workers=2).parse()
    assert LoadOptions(worker="arq", rate=2500, locust_workers=3).parse().rate == 2500.0


def test_generated_run_names_fit_the_ledger():
    for raw in (
        {"worker": "all", "endpoint": "all"},
        {"worker": "background,arq,saq,faststream", "users": "100000"},
        {"scenario": "clients", "mode": "model", "count": "40000"},
    ):
        run = P.parse_params(raw).run
        assert re.fullmatch(RUN_PATTERN, run) and ":" not in run, run


def test_driver_environment_makes_the_containers_parse_the_same_run():
    """The load run writes the parsed parameters into LOAD_*; the locustfile parses
    them back from there (--lab-* options read ENV_NAMES): the same run must come out."""
    for raw in (
        {"worker": "arq,saq", "endpoint": "all", "users": "7", "spawn_rate": "2.5", "run": "r1"},
        {"scenario": "upstream", "variant": "async-blocking", "duration": "1h30m"},
        {"scenario": "payload", "size": "0", "iterations": "3"},
        {"scenario": "clients", "mode": "prejson", "count": "12"},
        {"worker": "huey", "rate": "12.5", "duration": "30s"},
    ):
        params = P.parse_params(raw)
        env = locust.load_env(params, locust_workers=3)
        assert env["LOCUST_WORKERS"] == "3"
        back = {key: env[name] for key, name in P.ENV_NAMES.items()}
        back.update(users=env["LOAD_USERS"], spawn_rate=env["LOAD_SPAWN_RATE"])
        again = P.parse_params(back)
        assert again == params and again.calls == params.calls, (raw, env)


def test_compose_passes_every_parameter_to_the_locust_containers():
    text = (ROOT / "docker-compose.yml").read_text()
    for name in [
        *P.ENV_NAMES.values(),
        "LOAD_USERS",
        "LOAD_SPAWN_RATE",
        "LOCUST_WORKERS",
        "LOAD_START_GATE",
        "LOAD_END_GATE",
    ]:
        assert f"${{{name}:-" in text, name


def test_driver_settings_come_from_the_env_files_compose_reads(tmp_path, monkeypatch):
    env_file = tmp_path / "lab.env"
    env_file.write_text("# knobs\nLOCUST_WORKERS=4   # four containers\nGRAFANA_ADMIN_PASSWORD='s3 cret'\n\nBROKEN\n")
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(env_file))
    monkeypatch.delenv("LOCUST_WORKERS", raising=False)
    assert config.dotenv() == {"LOCUST_WORKERS": "4", "GRAFANA_ADMIN_PASSWORD": "s3 cret"}
    given = config.knobs()
    assert given.locust_workers == 4 and given.load_linger_s == config.Knobs.model_fields["load_linger_s"].default
    assert LoadOptions().locust_workers == 4
    # The command line reads the env files for every option that names an env var.
    defaults = dotenv_defaults(get_command(labctl_app), config.dotenv())
    assert defaults["load"] == {"locust_workers": "4"} and defaults["compare"] == {"locust_workers": "4"}
    monkeypatch.setenv("LOCUST_WORKERS", "3")  # the environment wins, as with compose
    assert LoadOptions().locust_workers == 3
    monkeypatch.setenv("LOCUST_WORKERS", "three")  # refused by its env var, as a bad option is
    with pytest.raises(ParamError, match="LOCUST_WORKERS='three'"):
        config.knobs()


# -- Tickets: exactly `iterations` requests ----------------------------------------------
def test_ticket_book_never_grants_more_than_the_target():
    book = P.TicketBook(10)
    assert book.grant(4) == (4, False)
    assert book.grant(0) == (0, False)
    assert book.grant(-3) == (0, False)
    assert book.grant(100) == (6, True)
    assert book.grant(1) == (0, True) and book.granted == 10 and book.remaining == 0
    with pytest.raises(ValueError):
        P.TicketBook(0)


def test_tickets_are_spread_by_users_and_add_up_to_the_target():
    """Workers that ask as the locustfile does (tickets_to_ask, one request per
    ticket) end with exactly the target between them, each roughly in proportion
    to its users, also when a worker has no user at all."""
    for users, total in (((25, 25), 100), ((1, 0), 7), ((3, 2), 1000), ((50, 50), 3)):
        book = P.TicketBook(total)
        held = [0] * len(users)
        sent = [0] * len(users)
        while not book.exhausted or any(held):
            for i, u in enumerate(users):
                if u == 0:
                    continue
                want = P.tickets_to_ask(u, held[i])
                if want and not book.exhausted:
                    held[i] += book.grant(want)[0]
                for _ in range(min(u, held[i])):  # each user sends one request per round
                    held[i] -= 1
                    sent[i] += 1
        assert sum(sent) == total and book.granted == total, (users, total, sent)
        if total >= 100:
            share = sent[0] / total
            assert abs(share - users[0] / sum(users)) < 0.1, (users, sent)


def test_a_worker_asks_for_one_round_at_most():
    assert P.tickets_to_ask(users=10, available=0) == 10
    assert P.tickets_to_ask(users=10, available=4) == 6
    assert P.tickets_to_ask(users=10, available=5) == 0
    assert P.tickets_to_ask(users=1, available=0) == 1
    assert P.tickets_to_ask(users=1, available=1) == 0
    assert P.tickets_to_ask(users=0, available=0) == 1  # still spawning: one to start with


# -- The record -----------------------------------------------------------------------
# `docker inspect` of a container, in the parts the record reads.
INSPECT_ARQ = {
    "HostConfig": {"NanoCpus": 200_000_000, "CpuQuota": 0, "CpuPeriod": 0, "Memory": 200 * 2**20},
    "Config": {
        "Env": [
            "ARQ_MAX_JOBS=3",
            "CONCURRENCY=3",
            "ARQ_POLL_DELAY=0.5",
            "CPU_WORK=1000000",
            "PATH=/app/.venv/bin:/usr/bin",
            "EMPTY=",
        ]
    },
}
INSPECT_API = {
    "HostConfig": {"NanoCpus": 0, "CpuQuota": 50_000, "CpuPeriod": 100_000, "Memory": 2**30},
    "Config": {"Env": ["ENQUEUE_MODE=await", "API_WORKERS=1"]},
}
LOCUST_RESULT = {
    "run": "arq-x",
    "requests": 2000,
    "failures": 10,
    "status_codes": {"202": 1990, "503": 10},
    "median_ms": 120,
    "p95_ms": 480,
    "p99_ms": 900,
    "avg_ms": 150.5,
    "max_ms": 1200.0,
    "test_started_at": 1000.0,
    "first_request_at": 1000.5,
    "last_response_at": 1020.5,
    "exported_requests": 2000,
    "errors": [{"name": "/api/v1/incr/io/simple/arq", "method": "POST", "error": "HTTP 503", "count": 10}],
    "locust_cpu_warning": False,
    "processes": [
        {"role": "master", "cpu_seconds": 0.5, "interval_s": 20.0, "cpu_limit_cores": 2.0},
        {"role": "worker", "cpu_seconds": 19.0, "interval_s": 20.0, "cpu_limit_cores": 2.0},
        {"role": "worker", "cpu_seconds": 4.0, "interval_s": 20.0, "cpu_limit_cores": 2.0},
    ],
}
LEDGER = {
    "run": "arq-x",
    "totals": {"enqueued": 1990, "completed": 1990, "failed": 0, "duplicates": 0, "pending": 0},
    "queues": {
        "arq": {
            "io/simple": {
                "enqueued": 1990,
                "completed": 1990,
                "failed": 0,
                "duplicates": 0,
                "pending": 0,
                "value": 1990,
                "work": 1990,
            }
        }
    },
    "first_enqueued_at": 1000.6,
    "last_settled_at": 1300.6,
}


def test_limits_as_the_engine_applied_them():
    arq = C.limits_of([INSPECT_ARQ, INSPECT_ARQ], "arq")
    assert arq == {"cpus": 0.2, "memory": "200M", "memory_bytes": 200 * 2**20, "replicas": 2, "concurrency": 3}
    api = C.limits_of([INSPECT_API])
    assert (api["cpus"], api["memory"], api["replicas"]) == (0.5, "1G", 1) and "concurrency" not in api
    assert C.limits_of([], "arq")["replicas"] == 0
    unlimited = {"HostConfig": {"NanoCpus": 0, "CpuQuota": 0, "Memory": 0}, "Config": {"Env": []}}
    assert C.limits_of([unlimited], "saq") == {
        "cpus": None,
        "memory": "-",
        "memory_bytes": None,
        "replicas": 1,
        "concurrency": None,
    }
    half = {**INSPECT_ARQ, "HostConfig": {**INSPECT_ARQ["HostConfig"], "NanoCpus": 500_000_000}}
    assert C.limits_of([INSPECT_ARQ, half], "arq")["mixed"] is True
    assert C.knobs_of([INSPECT_ARQ], "arq") == {"ARQ_MAX_JOBS": "3", "ARQ_POLL_DELAY": "0.5", "CPU_WORK": "1000000"}
    assert [C.mem_text(n) for n in (0, None, 512 * 1024, 200 * 2**20, 3 * 2**30, 1000)] == [
        "-",
        "-",
        "512K",
        "200M",
        "3G",
        "1000",
    ]
    assert limit_text(arq) == "0.2cpu/200M" and limit_text(None) == "-"
    assert workers_limit_text({"arq": arq, "saq": arq}) == "0.2cpu/200M"
    assert workers_limit_text({"arq": arq, "api": api}) == "arq:0.2cpu/200M,api:0.5cpu/1G"


def record(**overrides):
    kwargs = dict(
        params={
            "run": "arq-x",
            "scenario": "queue",
            "worker": "arq",
            "endpoint": "io/simple",
            "users": 100,
            "spawn_rate": 100.0,
            "iterations": 2000,
            "duration_target_s": None,
        },
        locust=LOCUST_RESULT,
        ledger=LEDGER,
        settled=True,
        limits={"api": C.limits_of([INSPECT_API]), "workers": {"arq": C.limits_of([INSPECT_ARQ], "arq")}},
        knobs={"arq": C.knobs_of([INSPECT_ARQ], "arq")},
        resources={
            "arq": {"peak_memory_bytes": 150 * 2**20, "cpu_throttled_periods_pct": 42.04},
            "api": {"peak_memory_bytes": 90 * 2**20, "cpu_throttled_periods_pct": 80.0},
        },
        probe=None,
        locust_workers=2,
        subjects=["arq"],
    )
    kwargs.update(overrides)
    return build_run_record(RunInputs(**kwargs)).as_json()


def test_the_record_of_a_queue_run():
    r = record()
    assert (r["requests"], r["failures"], r["failures_pct"], r["duration_s"], r["rps"]) == (2000, 10, 0.5, 20.0, 100.0)
    assert (r["median_ms"], r["p95_ms"], r["p99_ms"]) == (120, 480, 900)
    t = r["tasks"]
    assert (t["enqueued"], t["completed"], t["failed"], t["duplicates"], t["lost"], t["settled"]) == (
        1990,
        1990,
        0,
        0,
        0,
        True,
    )
    assert t["time_to_execute_all_s"] == 300.0  # first enqueue to last completion
    assert t["drain_s"] == 280.1  # last completion after the last response
    # The subject is arq: its memory and throttling, not the API's.
    assert (r["worker_peak_memory_bytes"], r["cpu_throttled_periods_pct"]) == (150 * 2**20, 42.0)
    assert r["generator"]["cpu_bound"] is True  # one worker at 0.95 core
    assert [p["cpu_cores"] for p in r["generator"]["processes"]] == [0.025, 0.95, 0.2]
    assert any("CPU-bound" in w for w in r["warnings"]) and not any("!=" in w for w in r["warnings"])
    assert r["time"] == "1970-01-01T00:16:40Z" and json.loads(json.dumps(r)) == r
    # Locust's start, from which its duration counts, kept beside the first request's.
    assert (r["locust_started_at"], r["load_started_at"], r["load_ended_at"]) == (1000.0, 1000.5, 1020.5)


def with_counts(ledger: dict, **counts) -> dict:
    """LEDGER with the same counts in its totals and its one cell, as a real ledger's add up."""
    cell = {**ledger["queues"]["arq"]["io/simple"], **counts}
    return {**ledger, "totals": {**ledger["totals"], **counts}, "queues": {"arq": {"io/simple": cell}}}


def test_the_record_flags_what_does_not_add_up():
    pending = with_counts(LEDGER, completed=1900, pending=90, duplicates=2)
    r = record(ledger=pending, settled=False)
    t = r["tasks"]
    assert (t["lost"], t["settled"], t["time_to_execute_all_s"], t["drain_s"]) == (90, False, None, None)
    assert any("90 task(s) still pending" in w for w in r["warnings"])
    assert any("2 duplicate" in w for w in r["warnings"])
    short = record(locust={**LOCUST_RESULT, "requests": 1999})
    assert any("1999 requests recorded, not the 2000" in w for w in short["warnings"])
    mismatch = record(ledger={**LEDGER, "totals": {**LEDGER["totals"], "enqueued": 1991}})
    assert any("ledger enqueued 1991 != 1990" in w for w in mismatch["warnings"])
    assert "ledger mismatch" in run_table.notes_of(RunRecord.model_validate(mismatch))
    # Two tasks answered 503 that their broker had all the same: counted enqueued and
    # said so, not a mismatch with the 202s.
    after_error = record(ledger={**with_counts(LEDGER, enqueued=1992, completed=1992), "enqueued_after_error": 2})
    assert after_error["tasks"]["enqueued_after_error"] == 2 and not any("!=" in w for w in after_error["warnings"])
    assert any(w.startswith("2 task(s) whose enqueue failed (a 503) ran") for w in after_error["warnings"])
    assert "ledger mismatch" not in run_table.notes_of(RunRecord.model_validate(after_error))
    # More settled than enqueued: an enqueue taken back although the broker had the
    # task. Nothing is waiting, so the run counts as settled, and the record says why
    # its numbers cannot be trusted.
    overdrawn = with_counts(LEDGER, enqueued=218, completed=1778, pending=-1560)
    r = record(ledger=overdrawn, locust={**LOCUST_RESULT, "status_codes": {"202": 204, "503": 1796}})
    assert (r["tasks"]["lost"], r["tasks"]["settled"]) == (0, True)
    assert any("1560 more task(s) settled than enqueued" in w for w in r["warnings"])
    assert "ledger mismatch" in run_table.notes_of(RunRecord.model_validate(r))
    calm = record(locust={**LOCUST_RESULT, "processes": LOCUST_RESULT["processes"][:1]})
    assert calm["generator"] == {
        "processes": [{"role": "master", "cpu_cores": 0.025, "ceiling_cores": 1.0}],
        "cpu_bound": False,
        "warning": None,
    }


def test_restarts_during_a_run_are_reported():
    def inspected(name, count, oom):
        return {"Name": f"/lab-{name}", "RestartCount": count, "State": {"OOMKilled": oom}}

    before = C.restart_counts(
        {"api": [inspected("api-1", 0, False)], "arq": [inspected("arq-1", 3, True), inspected("arq-2", 0, False)]}
    )
    after = C.restart_counts(
        {
            "api": [inspected("api-1", 2, True)],
            "arq": [inspected("arq-1", 3, True), inspected("arq-2", 0, False), inspected("arq-3", 1, False)],
        }
    )  # a replica added since: not a restart
    restarts = C.restarts_during(before, after)
    assert restarts == {"api": {"restarts": 2, "oom_killed": True}}  # arq-1's old OOM kill is not this run's
    r = record(restarts=restarts)
    assert "api restarted 2 time(s) during the run (OOM killed)" in r["warnings"]
    assert "api restarted (OOM)" in run_table.notes_of(RunRecord.model_validate(r)) and record()["restarts"] == {}


def test_the_generator_is_cpu_bound_against_its_own_limit_too():
    limited = generator_check([{"role": "worker", "cpu_seconds": 4.5, "interval_s": 10, "cpu_limit_cores": 0.5}])
    assert limited.cpu_bound and "0.45/0.5 core" in (limited.warning or "")
    idle = generator_check([{"role": "worker", "cpu_seconds": 0, "interval_s": 0, "cpu_limit_cores": 2}])
    assert idle.as_json() == {
        "processes": [{"role": "worker", "cpu_cores": None, "ceiling_cores": 1.0}],
        "cpu_bound": False,
        "warning": None,
    }


def test_an_event_loop_run_has_no_task_fields_and_keeps_the_probe():
    probe = {"sent": 200, "ok": 150, "success_rate": 0.75, "worst_gap_s": 2.5}
    r = record(
        params={
            "run": "up-1",
            "scenario": "upstream",
            "worker": None,
            "endpoint": "upstream/async-blocking",
            "users": 50,
            "spawn_rate": 100.0,
            "iterations": 100,
            "duration_target_s": None,
        },
        locust={**LOCUST_RESULT, "requests": 100, "failures": 0, "status_codes": {"200": 100}},
        ledger=None,
        settled=False,
        limits={"api": C.limits_of([INSPECT_API]), "workers": {}},
        knobs={},
        probe=probe,
        subjects=["api"],
    )
    assert r["tasks"] is None and r["probe"] == probe and r["worker"] is None
    assert r["worker_peak_memory_bytes"] == 90 * 2**20 and r["cpu_throttled_periods_pct"] == 80.0
    cells = dict(zip([name for name, _ in run_table.COLUMNS], run_table.row_cells(RunRecord.model_validate(r))))
    assert (
        cells["worker"],
        cells["scenario"],
        cells["all tasks done s"],
        cells["probe ok %"],
        cells["probe worst gap s"],
        cells["worker limits"],
    ) == ("-", "upstream", "-", "75", "2.5", "-")


def test_the_table_puts_the_articles_columns_first():
    header = run_table.table([]).splitlines()[0]
    names = [c.strip() for c in header.strip("|").split("|")]
    assert names[:6] == ["worker", "RPS", "median ms", "p95 ms", "all tasks done s", "errors %"]
    older = record(
        params={
            "run": "b-old",
            "scenario": "queue",
            "worker": "saq",
            "endpoint": "io/simple",
            "users": 100,
            "spawn_rate": 100.0,
            "iterations": 2000,
            "duration_target_s": None,
        },
        locust={**LOCUST_RESULT, "first_request_at": 10.0},
    )
    lines = run_table.table([RunRecord.model_validate(r) for r in (record(), older)]).splitlines()
    assert len(lines) == 4 and all(line.count("|") == len(run_table.COLUMNS) + 1 for line in lines)
    assert "b-old" in lines[2] and "arq-x" in lines[3]  # oldest first
    cells = [c.strip() for c in lines[3].strip("|").split("|")]
    assert cells[:6] == ["arq", "100", "120", "480", "300", "0.5"]
    # arq's note states the rate this run measured (completed / time to execute all) and the knobs that set it
    assert (
        "arq ran 6.6 tasks/s" in cells[-2]
        and "ARQ_MAX_JOBS=3" in cells[-2]
        and "ARQ_POLL_DELAY=0.5 s" in cells[-2]
        and "generator CPU-bound" in cells[-2]
    )


def test_annotations_follow_the_grafana_readme():
    start = annotation("start", "arq-50u", "arq", "io/simple", 50, "0.2cpu/200M", "0.2cpu/200M", at=1700000000.5)
    assert start == {
        "time": 1700000000500,
        "tags": ["lab-run", "arq-50u", "arq"],
        "text": "lab-run run=arq-50u worker=arq endpoint=io/simple users=50 "
        "api_limits=0.2cpu/200M worker_limits=0.2cpu/200M",
    }
    readme = (ROOT / "grafana" / "README.md").read_text()
    assert start["text"] in readme  # the README's own example
    end = annotation(
        "end", "up-1", "none", "upstream/async-native", 20, "0.2cpu/200M", "-", at=70.0, duration_s=61.6, tag="upstream"
    )
    assert end["text"].endswith("worker_limits=- duration=62s") and end["tags"] == ["lab-run", "up-1", "upstream"]
    assert (end["time"], end["timeEnd"]) == (8400, 70000)  # a region: the run's start to its end


def test_a_run_link_opens_its_window_on_its_queue():
    link = grafana_link("127.0.0.1:3000", "queues", 1000.0, 1060.0, "arq,saq")
    assert link == ("http://127.0.0.1:3000/d/lab-queues/?orgId=1&from=990000&to=1075000&var-queue=arq&var-queue=saq")
    dashboards = {json.loads(p.read_text())["uid"] for p in (ROOT / "grafana" / "dashboards").glob("*.json")}
    assert set(RUN_DASHBOARDS.values()) <= dashboards
    assert grafana_link("0.0.0.0:3001", "api", 0, 1).startswith("http://127.0.0.1:3001/d/lab-api/")


def test_the_progress_rate_follows_the_last_seconds():
    rate = follow.Rate(span_s=3)
    assert rate.rps == 0.0
    for second, total in enumerate((0, 100, 200, 300, 1300, 2300)):
        rate.add(float(second), total)
    assert rate.rps == pytest.approx(1000, rel=0.35)  # the recent pace, not the mean since the start
    fraction, line = follow.load_progress(
        P.parse_params({"worker": "arq", "iterations": "4000"}),
        {"requests": 1000, "failures": 10, "users": 100},
        12.5,
        {"enqueued": 990},
        80.0,
    )
    assert fraction == 0.25
    assert "1000/4000" in line and " 25%" in line and "failures 10 (1.0%)" in line and "enqueued 990" in line
    # Before the ledger first answers, the line says so rather than show zeros.
    _, unread = follow.load_progress(
        P.parse_params({"worker": "arq", "iterations": "4000"}), {"requests": 10, "users": 100}, 1.0, {}, 10.0
    )
    assert "ledger: no answer yet" in unread and "enqueued 0" not in unread


# -- The locustfile, run by real Locust processes ---------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Target:
    """A small HTTP server that answers like the API's enqueue route and counts
    what it received."""

    def __init__(self):
        self.count = 0
        self.delay_s = 0.002  # an answer takes a moment, so requests overlap
        self.status, self.body = 202, b'{"task_id": "x"}'
        self.runs: set = set()
        self.lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with target.lock:
                    target.count += 1
                    target.runs.add(self.headers.get("X-Lab-Run"))
                time.sleep(target.delay_s)
                body = target.body
                self.send_response(target.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target():
    t = Target()
    yield t
    t.close()


def scrape(port: int) -> dict[str, float]:
    """Samples of a process's /metrics: 'name{labels}' -> value (labels sorted)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def locust_env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOAD_", "LOCUST_"))}
    env.update(PYTHONPATH=str(ROOT), METRICS_ADDR="127.0.0.1", PYTHONUNBUFFERED="1", **extra)
    return env


def run_distributed(target, tmp_path, users: int, **run_env) -> tuple[dict, dict, list[int]]:
    """A master and two workers on the host, the locustfile as in the containers:
    the master's LAB-* lines, each process's /metrics while the master lingers
    after its result, and the exit codes."""
    master_port, ports = free_port(), {"master": free_port(), "w1": free_port(), "w2": free_port()}
    run_env = {"LOAD_SCENARIO": "queue", "LOAD_WORKER": "arq", "LOAD_LINGER_S": "4", **run_env}
    locustfile = str(ROOT / "locust" / "locustfile.py")
    master_log = tmp_path / "master.log"
    procs = []
    try:
        with master_log.open("w") as log:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "locust",
                        "-f",
                        locustfile,
                        "--master",
                        "--headless",
                        "--only-summary",
                        "--expect-workers=2",
                        "--expect-workers-max-wait=60",
                        f"--users={users}",
                        "--spawn-rate=100",
                        f"--host={target.url}",
                        f"--master-bind-port={master_port}",
                        "--master-bind-host=127.0.0.1",
                        "--exit-code-on-error=0",
                    ],
                    env=locust_env(**run_env, METRICS_PORT=str(ports["master"]), SERVICE_NAME="locust-master"),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        for name in ("w1", "w2"):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "locust",
                        "-f",
                        locustfile,
                        "--worker",
                        "--master-host=127.0.0.1",
                        f"--master-port={master_port}",
                    ],
                    env=locust_env(**run_env, METRICS_PORT=str(ports[name]), SERVICE_NAME="locust-worker"),
                    stdout=(tmp_path / f"{name}.log").open("w"),
                    stderr=subprocess.STDOUT,
                )
            )

        deadline = time.monotonic() + 90
        while "LAB-RESULT" not in master_log.read_text():
            assert procs[0].poll() is None, master_log.read_text()[-3000:]
            assert time.monotonic() < deadline, master_log.read_text()[-3000:]
            time.sleep(0.2)
        # The master lingers 4 s after the result: every process still serves /metrics.
        metrics = {name: scrape(port) for name, port in ports.items()}
        codes = [p.wait(timeout=60) for p in procs]  # they end by themselves
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return lab_lines(master_log.read_text()), metrics, codes


def lab_lines(text: str) -> dict:
    """A Locust process's LAB-* lines, the last of each kind by its name, and
    every LAB-PROGRESS in order under "progress"."""
    parsed = [
        (line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("LAB-")
    ]
    return {**dict(parsed), "progress": [data for kind, data in parsed if kind == "LAB-PROGRESS"]}


def closed_at_its_duration(lines: dict) -> None:
    """The run was closed at the first of its once-a-second looks that found its
    duration past, counted from the test's start (its PROGRESS lines' elapsed)."""
    duration = lines["LAB-RESULT"]["duration_target_s"]
    elapsed = [p["elapsed"] for p in lines["progress"]]
    assert elapsed and elapsed[-1] >= duration and all(e < duration for e in elapsed[:-1]), elapsed


def test_a_distributed_run_sends_exactly_its_iterations_and_counts_each_once(target, tmp_path):
    """3 users over 2 workers (2 and 1), 137 iterations: the server receives
    exactly 137 requests, the result says so, and the workers'
    locust_requests_total add up to 137 while the master exports only users."""
    lines, metrics, codes = run_distributed(target, tmp_path, users=3, LOAD_ITERATIONS="137", LOAD_RUN="units-1")
    assert codes == [0, 0, 0]
    assert target.count == 137 and target.runs == {"units-1"}
    result = lines["LAB-RESULT"]
    assert (result["requests"], result["failures"], result["granted"], result["status_codes"]) == (
        137,
        0,
        137,
        {"202": 137},
    )
    assert result["exported_requests"] == 137 and result["first_request_at"] < result["last_response_at"]
    assert sorted(p["role"] for p in result["processes"]) == ["master", "worker", "worker"]
    assert lines["LAB-START"]["run"] == "units-1" and lines["LAB-PROGRESS"]["iterations"] == 137

    name = "/api/v1/incr/io/simple/arq"
    sent = {k: metrics[k].get(f"locust_requests_total{{method=POST,name={name}}}", 0) for k in ("w1", "w2")}
    assert sum(sent.values()) == 137 and all(sent.values()), sent  # both workers sent, each counted once
    assert sum(metrics[k][f"locust_response_time_seconds_count{{name={name}}}"] for k in ("w1", "w2")) == 137
    # Created at 0 before the first request (rate() needs that first sample), never incremented.
    assert metrics["w1"][f"locust_failures_total{{method=POST,name={name}}}"] == 0
    assert not any(k.startswith("locust_requests_total") for k in metrics["master"])
    assert "locust_users{}" in metrics["master"] and not any(k.startswith("locust_users") for k in metrics["w1"])
    assert "lab_cpu_seconds_total{service=locust-master}" in metrics["master"]
    assert "lab_cpu_seconds_total{service=locust-worker}" in metrics["w1"]


def test_a_distributed_run_for_a_duration_records_every_request_it_sent(target, tmp_path):
    """duration=3s over two workers: at the end no new request starts and those
    in flight are answered, so Locust's count is what the server received (the
    ledger's enqueued then equals the 202s). The duration runs from the test's
    start, not from the first request (which waits for the workers' users to
    spawn, longer on a busy machine)."""
    lines, _, codes = run_distributed(target, tmp_path, users=4, LOAD_DURATION="3s", LOAD_RUN="units-3")
    assert codes == [0, 0, 0]
    result = lines["LAB-RESULT"]
    assert result["iterations"] is None and result["duration_target_s"] == 3.0
    assert result["requests"] == target.count == result["status_codes"]["202"] > 0
    assert result["test_started_at"] < result["first_request_at"] < result["last_response_at"]
    closed_at_its_duration(lines)


def test_a_local_run_for_a_duration_and_a_refused_parameter(target, tmp_path):
    """One local process: duration=2s ends by itself with requests; a bad
    parameter stops it before any request, naming the parameter."""
    locustfile = str(ROOT / "locust" / "locustfile.py")
    common = [
        "-f",
        locustfile,
        "--headless",
        "--only-summary",
        "--users=2",
        "--spawn-rate=10",
        f"--host={target.url}",
        "--exit-code-on-error=0",
    ]
    env = locust_env(
        LOAD_SCENARIO="queue",
        LOAD_WORKER="saq",
        LOAD_DURATION="2s",
        LOAD_RUN="units-2",
        LOAD_LINGER_S="0",
        METRICS_PORT="off",
    )
    proc = subprocess.run(  # 120 s: only a hang
        [sys.executable, "-m", "locust", *common], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    lines = lab_lines(proc.stdout)
    result = lines["LAB-RESULT"]
    assert proc.returncode == 0 and result["iterations"] is None and result["duration_target_s"] == 2.0
    assert result["requests"] == target.count > 0  # nothing in flight was dropped
    closed_at_its_duration(lines)

    before = target.count
    bad = subprocess.run(
        [sys.executable, "-m", "locust", *common],
        env={**env, "LOAD_WORKER": "kafka"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0 and target.count == before
    assert "LAB-ERROR" in bad.stdout and "worker='kafka'" in bad.stdout


def run_local(target, users: int, **env: str) -> dict:
    """One local Locust process with the locustfile, to its end: its LAB-* lines."""
    common = [
        "-f", str(ROOT / "locust" / "locustfile.py"), "--headless", "--only-summary", f"--users={users}",
        "--spawn-rate=100", f"--host={target.url}", "--exit-code-on-error=0",
    ]  # fmt: skip
    env = locust_env(LOAD_SCENARIO="queue", LOAD_WORKER="arq", LOAD_LINGER_S="0", METRICS_PORT="off", **env)
    proc = subprocess.run(  # 120 s: only a hang
        [sys.executable, "-m", "locust", *common], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return lab_lines(proc.stdout)


def test_a_rate_run_sends_on_its_schedule_and_counts_latency_from_it(target, tmp_path):
    """rate=20 for 3 s, 4 users: the requests follow the schedule (20 a second from
    the users' start until the run closes), whatever the answers. Then answers that
    take 0.5 s against a schedule of one request per user every 0.2 s: each send
    leaves late, and its latency counts from its scheduled time, well past the
    server's own 0.5 s (a closed loop would report 0.5 s and send less). How many of
    the fast run's sends a busy machine makes late is its speed: that run is held
    against the slow one, where lateness is the schedule's, not a fixed share."""
    lines = run_local(target, 4, LOAD_RATE="20", LOAD_DURATION="3s", LOAD_RUN="units-rate")
    result = lines["LAB-RESULT"]
    closed_at = lines["progress"][-1]["elapsed"]
    assert result["rate"] == 20.0 and result["requests"] == target.count == result["scheduled_sends"]
    # Sent from the users' start (within the first second) until the close: the schedule's count, not the machine's.
    assert 20 * (closed_at - 1) <= result["requests"] <= 20 * closed_at + 4, (result["requests"], closed_at)
    # The sends made in the run's second half (make capacity's steady part): a part of them all.
    assert 0 < result["steady_sends"] < result["scheduled_sends"], result

    target.delay_s = 0.5
    slow = run_local(target, 2, LOAD_RATE="10", LOAD_DURATION="3s", LOAD_RUN="units-rate-slow")["LAB-RESULT"]
    assert slow["late_sends"] > slow["scheduled_sends"] / 2, slow
    # Behind from its start, every user still is in the second half.
    assert slow["steady_sends"] and slow["steady_late_sends"] == slow["steady_sends"], slow
    assert slow["median_ms"] > 600 and slow["max_ms"] > 1000, slow
    # A send on time is not counted late: the fast run's sends were late less often than
    # the slow run's, its second half not throughout, and its answers came sooner.
    late_share = result["late_sends"] / result["scheduled_sends"]
    assert late_share < slow["late_sends"] / slow["scheduled_sends"], (result, slow)
    assert result["steady_late_sends"] < result["steady_sends"], result
    assert result["median_ms"] < slow["median_ms"], (result, slow)


def test_a_refusal_is_recorded_with_what_the_api_said(target):
    """A 503 stands in the record's errors with the API's reason and the
    broker's error, not its code alone: a run's refusals are read from its record."""
    detail = "ConnectionResetError: [Errno 104] Connection reset by peer"
    target.status = 503
    target.body = json.dumps(
        {"error": "queue unavailable", "queue": "arq", "reason": "connection", "detail": detail}
    ).encode()
    result = run_local(target, 2, LOAD_ITERATIONS="4", LOAD_RUN="units-refused")["LAB-RESULT"]
    assert result["status_codes"] == {"503": 4}, result
    assert [e["error"] for e in result["errors"]] == [f"HTTP 503 queue unavailable (connection): {detail}"], result


@contextlib.contextmanager
def gated_locust(target, log: Path, **gate: str):
    """A local Locust run of 5 requests from 2 users with the gate variables
    `gate`, its output in `log`; killed on the way out if it still runs."""
    env = locust_env(
        LOAD_SCENARIO="queue",
        LOAD_WORKER="arq",
        LOAD_ITERATIONS="5",
        LOAD_LINGER_S="0",
        METRICS_PORT="off",
        **gate,
    )
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(ROOT / "locust" / "locustfile.py"),
                "--headless",
                "--only-summary",
                "--users=2",
                "--spawn-rate=10",
                f"--host={target.url}",
                "--exit-code-on-error=0",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def wait_for_line(proc: subprocess.Popen, log: Path, marker: str) -> None:
    """Until the running process has written `marker` (a deadline bounds a hang)."""
    deadline = time.monotonic() + 60
    while marker not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.1)


def test_the_master_waits_for_its_start_gate(target, tmp_path):
    """With LOAD_START_GATE the users start only once that file exists (make load
    creates it when Prometheus has scraped every Locust process)."""
    gate, log = tmp_path / "go", tmp_path / "local.log"
    with gated_locust(target, log, LOAD_RUN="units-4", LOAD_START_GATE=str(gate)) as proc:
        wait_for_line(proc, log, "LAB-WAITING")
        assert "LAB-START" not in log.read_text() and proc.poll() is None and target.count == 0
        opened_at = time.time()
        gate.write_text("")
        assert proc.wait(timeout=120) == 0
    lines = lab_lines(log.read_text())
    # The users started after the gate was there, never while it was waited for.
    assert lines["LAB-START"]["started_at"] >= opened_at and lines["LAB-RESULT"]["first_request_at"] >= opened_at
    assert target.count == 5


def test_the_master_quits_at_its_end_gate(target, tmp_path):
    """With LOAD_END_GATE the master, its result given, stays until that file
    exists (make load creates it once Prometheus counts the run's requests)."""
    gate, log = tmp_path / "end", tmp_path / "local.log"
    with gated_locust(target, log, LOAD_RUN="units-5", LOAD_END_GATE=str(gate)) as proc:
        wait_for_line(proc, log, "LAB-RESULT")
        assert proc.poll() is None, log.read_text()[-2000:]
        gate.write_text("")
        assert proc.wait(timeout=120) == 0
    lines = lab_lines(log.read_text())
    # It quit because the gate opened, not at the end of its wait.
    assert lines["LAB-END"] == {"gate": str(gate), "opened": True}
    assert target.count == 5


def test_bench_table_judges_the_ratio_it_shows():
    """The bench table's ratio is rounded down: 0.899 of the bare figure shows
    as 0.89 and is marked under budget, never as a 0.9 that meets it; the
    record's own bench (faststream at 0.5 CPU) had 1012.5 against 1125.7 RPS.
    A row without each round's figures (an older record) is judged on its whole
    figures and says it has no interval; a row with them, on the median of its
    rounds' ratios, its interval rounded down likewise."""

    def row(queue, bare_rps, lab_rps, bare_rate, lab_rate):
        return {
            "queue": queue,
            "bare": {"rps": bare_rps, "api_cpu_us_per_request": 480},
            "lab": {"rps": lab_rps, "api_peak_mb": 91.6, "api_cpu_us_per_request": 531},
            "bare_drain": {"rate": bare_rate},
            "lab_drain": {"rate": lab_rate},
        }

    record = {
        "run": "bench-x",
        "mode": "await",
        "api_limits": {"cpus": 0.5, "memory": "500M"},
        "rows": [row("faststream", 1125.7, 1012.5, 443.0, 398.9), row("saq", 100.0, 90.0, 100.0, 120.0)],
    }

    def cells():
        lines = bench_rows(record)
        return {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in lines}

    assert cells()["faststream"][5] == "0.89 ✗ (no interval)"  # 0.8994: under budget, shown as such
    assert cells()["faststream"][6] == "480 / 531"  # the API's CPU per request, bare / lab
    assert cells()["faststream"][13] == "0.90 (no interval)"  # 398.9 / 443.0 = 0.9005: meets it
    assert cells()["saq"][5] == "0.90 (no interval)" and cells()["saq"][13] == "1.20 (no interval)"
    assert cells()["faststream"][14] == "- / -"  # a record without the workers' CPU
    assert cells()["faststream"][15] == ""  # no rounds recorded: nothing to show
    # Each round's figures: the median of the rounds' ratios (0.8994, 0.8994, 0.9, 0.8994), not the
    # pooled RPS, and the interval's bounds rounded down as the median is.
    faststream = record["rows"][0]
    faststream["bare"]["rps_rounds"] = [1125.7, 1000.0, 1000.0, 1125.7]
    faststream["lab"]["rps_rounds"] = [1012.5, 899.4, 900.0, 1012.5]
    assert cells()["faststream"][5] == "0.89 ✗ [0.89–0.90] (n=4) unsure"
    faststream["lab"]["rps_rounds"] = [1012.5, 900.0, 900.0, 1013.2]  # 0.8994, 0.9, 0.9, 0.9001
    assert cells()["faststream"][5] == "0.90 [0.89–0.90] (n=4) unsure"


def test_bench_table_shows_each_rounds_ratio():
    """Beside a ratio, each round's: bare round i against lab round i, for the
    API and the drain, so that a reader sees how far one round moves it."""

    row = {
        "queue": "taskiq",
        "bare": {"rps": 400.0, "rps_rounds": [380.0, 420.0]},
        "lab": {"rps": 360.0, "rps_rounds": [376.2, 344.4]},
        "bare_drain": {"rate": 100.0, "rate_rounds": [90.0, 110.0]},
        "lab_drain": {"rate": 95.0, "rate_rounds": [None, 99.0]},
    }
    [line] = bench_rows({"run": "bench-y", "mode": "await", "api_limits": {}, "rows": [row]})
    notes = [c.strip() for c in line.strip("|").split("|")][15]
    assert notes == "RPS ratio by round 0.99, 0.82; drain ratio by round -, 0.9"
    # Drains in many windows (labctl/experiments/bench/paired_windows.py): the pairs' median and range.
    row["bare_drain"]["rate_rounds"] = [100.0, 200.0, 100.0, 100.0, 100.0]
    row["lab_drain"]["rate_rounds"] = [90.0, 220.0, 80.0, 95.0, 100.0]
    [line] = bench_rows({"run": "bench-y", "mode": "await", "api_limits": {}, "rows": [row]})
    notes = [c.strip() for c in line.strip("|").split("|")][15]
    assert notes.endswith("; drain pairs median 0.95, 0.80-1.10 over 5 pairs"), notes


def test_bench_table_says_which_drain_windows_were_not_cpu_bound():
    """A window in which a worker used under 80 % of its CPU quota says how its
    library schedules tasks (arq at ARQ_POLL_DELAY=0.01 under 0.5 CPU runs at
    one of two rates), not what a task costs: the notes count those windows."""

    def windows(tasks, *cpu_s):
        return [{"tasks": tasks, "s": 1.05, "cpu_s": c} for c in cpu_s]

    row = {
        "queue": "saq",
        "worker_limits": {"cpus": 0.5},
        "bare_drain": {"rate": 666.7, "windows": windows(700, 0.52, 0.53, 0.5)},
        "lab_drain": {"rate": 476.2, "windows": windows(500, 0.27, 0.53, 0.41)},
    }
    [line] = bench_rows({"run": "bench-z", "mode": "await", "api_limits": {}, "rows": [row]})
    notes = [c.strip() for c in line.strip("|").split("|")][15]
    # 0.41 / 1.05 / 0.5 = 0.78
    assert notes == "drain ratio by round 0.71, 0.71, 0.71; windows not CPU-bound (under 80% of the quota): lab 2 of 3"
    row["lab_drain"]["windows"] = windows(500, 0.52, 0.53, 0.43)  # 0.82: every window CPU-bound
    [line] = bench_rows({"run": "bench-z", "mode": "await", "api_limits": {}, "rows": [row]})
    assert "CPU-bound" not in line
    row["lab_drain"]["windows"] = windows(500, 0.1, None, 0.5)  # a window without its CPU is not judged
    row["worker_limits"] = {"cpus": 0.2}
    [line] = bench_rows({"run": "bench-z", "mode": "await", "api_limits": {}, "rows": [row]})
    assert "lab 1 of 3" in line and "bare" not in line.split("quota):")[1]


def test_bench_judges_a_drain_that_was_not_cpu_bound_by_its_cpu_per_task():
    """A worker that left its quota unused was held back by its library's
    schedule, not its CPU: a rate under budget is then judged again on the
    CPU per task (bare ÷ lab), shown beside it, window pair by window pair.
    The figures are after arq's at ARQ_POLL_DELAY=0.01 under 0.5 CPU: the bare
    worker flat out at a CPU a task of 690 (microseconds), the lab's at 735-745,
    idle in two windows of three."""

    def windows(*tasks_and_us):
        return [{"tasks": n, "s": 1.0, "cpu_s": n * us / 1e6} for n, us in tasks_and_us]

    bare = windows((740, 690), (750, 690), (748, 690))
    row = {
        "queue": "arq",
        "worker_limits": {"cpus": 0.5},
        "bare_drain": {"rate": 746.0, "cpu_us_per_task": 690, "windows": bare},
        "lab_drain": {"rate": 431.0, "cpu_us_per_task": 741, "windows": windows((350, 735), (577, 745), (365, 740))},
    }

    def drain_cell():
        [line] = bench_rows({"run": "bench-w", "mode": "after-response", "api_limits": {}, "rows": [row]})
        return [c.strip() for c in line.strip("|").split("|")][13]

    # The pairs' rates 0.47, 0.77, 0.49; their CPU a task 690 / 735 = 0.939, 0.926, 0.932: within budget.
    assert drain_cell() == "0.48 [0.28–1.10] (n=3) (CPU 0.93 [0.91–0.94] (n=3))"
    row["lab_drain"]["windows"] = windows((350, 800), (577, 810), (365, 820))
    assert drain_cell() == "0.48 [0.28–1.10] (n=3) (CPU 0.85 ✗ [0.82–0.87] (n=3))"
    row["lab_drain"]["windows"] = windows((350, 760), (577, 735), (365, 790))  # 0.91, 0.94, 0.87
    assert drain_cell().endswith("(CPU 0.90 [0.82–0.99] (n=3) unsure)")
    # Every window CPU-bound: the rate's ratio is the one judged.
    row["lab_drain"]["windows"] = windows((577, 740), (580, 740), (570, 740))
    row["worker_limits"] = {"cpus": 0.4}
    assert drain_cell() == "0.77 ✗ [0.74–0.79] (n=3)"
    # A rate within budget is not judged again (arq at its default polling:
    # mostly idle, where the CPU per task is mostly the idle worker's).
    row["worker_limits"] = {"cpus": 0.5}
    row["lab_drain"]["windows"] = windows((700, 2433), (710, 2433), (705, 2433))
    assert drain_cell() == "0.94 [0.93–0.95] (n=3)"
    # Windows not CPU-bound but no CPU recorded: the rate, as before.
    for w in row["lab_drain"]["windows"] + row["bare_drain"]["windows"]:
        w["cpu_s"] = None
    row["lab_drain"]["windows"] = windows((350, 735), (577, 745), (365, 740))
    for w in row["lab_drain"]["windows"]:
        w["cpu_s"] = None
    row["bare_drain"]["cpu_us_per_task"] = row["lab_drain"]["cpu_us_per_task"] = None
    assert drain_cell() == "0.48 ✗ [0.28–1.10] (n=3) unsure"


def test_bench_says_when_an_api_went_down_and_gives_it_no_cpu_figure():
    """The bare API's plain BackgroundTasks have no bound: under 0.2 CPU /
    200M it was killed at its memory limit in round 3 of a bench, and the
    record then showed a negative CPU a request. A drive now says which API
    went down, in which round and why, and such a round has no CPU figure."""
    from labctl.experiments.bench import api_rounds
    from labctl.platform import docker

    running = {"Running": True, "OOMKilled": False, "ExitCode": 0, "StartedAt": "2026-11-26T15:25:30Z"}
    assert api_rounds.api_down(running, running) is None
    assert (
        api_rounds.api_down(running, {**running, "Running": False, "OOMKilled": True, "ExitCode": 137})
        == "killed at its memory limit (OOM)"
    )
    assert api_rounds.api_down(running, {**running, "Running": False, "ExitCode": 1}) == "exited with code 1"
    assert api_rounds.api_down(running, {**running, "StartedAt": "2026-11-26T15:26:01Z"}) == "restarted"
    assert api_rounds.api_down(None, None) == "not running"
    assert docker.state("no-such-container-of-the-lab") is None  # docker inspect, for real

    def drive(rps, down=None):
        return {
            "requests": 3000,
            "ok": 3000 if rps else 0,
            "errors": 0 if rps else 3000,
            "statuses": {"202": 3000} if rps else {"ClientConnectorError": 3000},
            "elapsed_s": 10.0,
            "rps": rps,
            "window": [0, 10],
            "p50_ms": 1.0,
            "p95_ms": 2.0,
            "api_peak_mb": 200.0,
            "generator_cpu": 0.5,
            "generator_bound": False,
            **({"api_down": down} if down else {"api_cpu_s": 3.0}),
        }

    bare = api_rounds.combine(
        [drive(280.0), drive(220.0, "killed at its memory limit (OOM)"), drive(0.0, "not running")]
    )
    assert bare["api_down"] == ["round 2: killed at its memory limit (OOM)", "round 3: not running"]
    assert bare["api_cpu_us_per_request"] is None  # not a figure from a counter that restarted
    lab = api_rounds.combine([drive(330.0), drive(350.0), drive(290.0)])
    assert lab["api_down"] == [] and lab["api_cpu_us_per_request"] == 1000
    [line] = bench_rows(
        {
            "run": "bench-v",
            "mode": "await",
            "api_limits": {},
            "rows": [{"queue": "background", "bare": bare, "lab": lab}],
        }
    )
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[6] == "- / 1000"
    assert "bare API down from round 2: killed at its memory limit (OOM)" in cells[15]
    assert "lab API down" not in cells[15]


def test_bench_drains_to_what_the_lab_published_after_response():
    """`after-response`: one Celery publish of 12,800 timed out after its 202
    (lab_enqueue_errors_total{reason="timeout"} 1), the ledger counted 12,799,
    and the bench waited for the 12,800th task until it gave up, losing the
    record. The drain's target is now what the ledger says was published,
    once its count stops moving, and the notes say what was not."""
    from labctl.experiments.bench import drains

    counts = iter([12000, 12500, 12799, 12799, 12799, 12799])
    assert drains.settled_count(lambda: next(counts), 12800, stall_s=0.02, every_s=0.01) == 12799
    counts = iter([12000, 12800])
    assert drains.settled_count(lambda: next(counts), 12800, stall_s=5, every_s=0.01) == 12800  # all in: no wait
    row = {
        "queue": "celery",
        "bare": {"rps": 300.0, "enqueued": 12800},
        "lab": {"rps": 400.0, "enqueued": 12800, "published": 12799},
    }
    [line] = bench_rows({"run": "bench-u", "mode": "after-response", "api_limits": {}, "rows": [row]})
    notes = [c.strip() for c in line.strip("|").split("|")][15]
    assert notes == "lab: 1 of 12800 accepted tasks not published (lab_enqueue_errors_total)"
    # A bare API killed at its memory limit: the publishes its BackgroundTasks held never happened.
    row["lab"]["published"], row["bare"]["published"] = 12800, 1626
    [line] = bench_rows({"run": "bench-u", "mode": "after-response", "api_limits": {}, "rows": [row]})
    notes = [c.strip() for c in line.strip("|").split("|")][15]
    assert notes == "bare: 11174 of 12800 accepted tasks not published (never in its queue)"


def test_bench_drain_windows_take_turns_going_first():
    """Bare first, then lab first: over two pairs each side has the same
    mean position, so a machine that slows down steadily costs both alike."""
    from labctl.experiments.bench.paired_windows import sides

    order = [side for i in range(4) for side in sides(i)]
    assert order == ["bare", "lab", "lab", "bare", "bare", "lab", "lab", "bare"]
    positions = {side: sum(i for i, s in enumerate(order[:4]) if s == side) for side in ("bare", "lab")}
    assert positions["bare"] == positions["lab"]


def test_make_chaos_times_its_load_to_outlast_the_fault():
    """By default the chaos load runs until 10 s after the fault is undone, however
    fast the API answers; a count or a duration given is kept as given."""
    from labctl.experiments import chaos

    def length(worker, at=3.0, hold=5.0, **given):
        options = chaos.set_load_length(LoadOptions(worker=worker, **given), at, hold)
        return options.iterations, options.duration

    assert length("saq") == (None, 18.0)
    assert length("saq", at=5, hold=12.5) == (None, 27.5)
    assert length("background") == (None, 30.0)
    assert length("arq", iterations=800) == (800, None)
    assert length("arq", duration=60.0) == (None, 60.0)


def test_make_chaos_calls_a_fault_after_the_load_with_no_recovery_an_error():
    """The failed compose run's figures: the load ended at 14.6, the fault came at
    15.4, and no task settled once it was undone."""
    from labctl.experiments import chaos

    assert "0.8 s after the load had ended" in chaos.late_fault(15.4, 14.6, None)
    assert chaos.late_fault(15.4, 14.6, 2.5) is None  # a backlog still there: work resumed
    assert chaos.late_fault(13.0, 14.6, None) is None  # inside the load
    assert chaos.late_fault(None, 14.6, None) is None  # never injected (its own error)


# -- The wait for a run's tasks (labctl/load_run/task_wait.py) and a run that settles later -----------------------
def test_the_drain_rate_is_taken_over_the_last_half_minute():
    from labctl.load_run.task_wait import rate_of

    assert rate_of([]) is None and rate_of([(0.0, 5)]) is None
    samples = [(float(t), 6 * t) for t in range(0, 61)]  # 6 tasks/s for a minute
    assert rate_of(samples) == pytest.approx(6.0)
    samples += [(61.0 + t, 360) for t in range(40)]  # then nothing for 40 s
    assert rate_of(samples) == 0.0


def test_a_watch_that_ends_with_a_backlog_says_what_it_saw():
    from labctl.load_run.task_wait import TaskWait, outcome_lines

    drain = TaskWait(
        ledger={"totals": {"enqueued": 5000, "completed": 1400, "failed": 0, "pending": 3600}},
        watch_ended=True,
        rate_per_s=6.0,
        samples=[(1000.0, 1400)],
    )
    assert drain.backlog == 3600 and drain.projected_s == 600
    assert drain.watch_summary() == {
        "backlog": 3600,
        "rate_per_s": 6.0,
        "projected_empty_s": 600.0,
        "watch_ended_at": 1000.0,
    }
    text = "\n".join(outcome_lines(drain, run="r1", watch_s=60, timeout_s=1200, stall_s=120))
    assert "3600 task(s) pending after 60 s" in text and "6.0 tasks/s" in text and "10 min" in text
    assert "make results" in text and "wait=1" in text
    stalled = TaskWait(ledger=drain.ledger, stalled=True)
    assert "DRAIN STALLED" in outcome_lines(stalled, run="r1", watch_s=None, timeout_s=1200, stall_s=120)[0]


def _draining_record(pending: int) -> RunRecord:
    ledger = {
        "totals": {"enqueued": 100, "completed": 100 - pending, "failed": 0, "duplicates": 0, "pending": pending},
        "first_enqueued_at": 1000.0,
        "last_settled_at": 1030.0,
    }
    return build_run_record(
        RunInputs(
            params={
                "run": "r1",
                "scenario": "queue",
                "worker": "arq",
                "endpoint": "io/simple",
                "users": 10,
                "spawn_rate": 10,
                "iterations": 100,
            },
            locust={
                "requests": 100,
                "failures": 0,
                "first_request_at": 1000.0,
                "last_response_at": 1010.0,
                "status_codes": {"202": 100},
            },
            ledger=ledger,
            settled=False,
            limits={"api": {}, "workers": {}},
            knobs={},
            resources=None,
            probe=None,
            locust_workers=1,
            subjects=["arq"],
            draining={
                "backlog": pending,
                "rate_per_s": 2.0,
                "projected_empty_s": pending / 2,
                "watch_ended_at": 1070.0,
            },
        )
    )


def test_a_draining_run_is_not_called_lost_and_settles_when_its_ledger_does():
    record = _draining_record(pending=40)
    assert record.is_draining() and record.tasks.lost is None and not record.unsettled()
    assert record.tasks.time_to_execute_all_s is None
    assert any(w.startswith("still draining: 40") for w in record.warnings)
    assert "draining: 40 pending" in run_table.notes_of(record) and "NOT SETTLED" not in run_table.notes_of(record)
    still = {"totals": {"enqueued": 100, "completed": 90, "failed": 0, "pending": 10}}
    assert not record.settle_later(still) and record.is_draining()
    done = {
        "totals": {"enqueued": 100, "completed": 99, "failed": 1, "duplicates": 0, "pending": 0},
        "first_enqueued_at": 1000.0,
        "last_settled_at": 1123.5,
    }
    assert record.settle_later(done)
    assert not record.is_draining() and record.tasks.settled
    assert (record.tasks.time_to_execute_all_s, record.tasks.drain_s) == (123.5, 113.5)
    assert record.tasks.lost == 0 and record.tasks.failed == 1 and record.settled_later_at == 1123.5
    assert not any(w.startswith("still draining") for w in record.warnings)
    assert "| 123.5 |" in run_table.table([record])


def test_make_results_fills_in_a_run_that_settled_after_its_watch(tmp_path, monkeypatch):
    from labctl.platform.compose import Compose
    from labctl.records.store import Store
    from labctl.render.console import Console
    from labctl.views import results as results_view

    store = Store(tmp_path)
    store.save(_draining_record(pending=40))
    settled = {
        "totals": {"enqueued": 100, "completed": 100, "failed": 0, "duplicates": 0, "pending": 0},
        "first_enqueued_at": 1000.0,
        "last_settled_at": 1050.0,
    }
    monkeypatch.setenv("LAB_ORCHESTRATOR", "compose")
    monkeypatch.setattr(Compose, "port", lambda self, service, port: "127.0.0.1:1")
    monkeypatch.setattr(results_view, "ledger", lambda api, run: settled if run == "r1" else None)
    results_view.settle_draining(store, store.runs(), Console())
    again = json.loads((tmp_path / "r1.json").read_text())
    assert again["tasks"]["settled"] and again["tasks"]["time_to_execute_all_s"] == 50.0


def test_a_run_link_during_the_drain_ends_at_now():
    link = grafana_link("127.0.0.1:3000", "queues", 1000.0, None, "arq")
    assert "&to=now" in link and "from=990000" in link and link.endswith("&var-queue=arq")


def test_make_load_passes_the_drain_flags():
    out = subprocess.run(
        ["make", "-n", "load", "worker=arq", "wait=1", "drain_watch=30"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "python -m labctl load" in out and "--wait" in out and "--drain-watch '30'" in out
    out = subprocess.run(
        ["make", "-n", "load", "worker=arq", "wait=0"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "--wait" not in out
    options = LoadOptions()
    assert (options.drain_watch, options.wait) == (60.0, False)
