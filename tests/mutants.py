"""The net holds: one deliberate fault at a time, in a copy of the tree, and the
tests that cover it must fail. `make mutants` (python -m tests.mutants [NAME ...]).

A fault for each promise the README and docs make that make test's suites can
check, each naming the test whose name states the promise. First every fault is
checked to still apply (each replacement must match exactly once: a fault that
no longer applies is an error, not a pass). Then the clean tree is copied and
the tests of every selection run there, in one pytest run: if one fails,
errors or runs nothing, the check refuses to judge (exit 2, naming the tests),
since a test that fails anyway would "catch" every fault. Then, for each fault
(--jobs of them at once, each with its own ports): copy the tree, apply it, run
its selection with -x, in its order, and read pytest's JUnit XML.

  caught          a test failed in its call: an assertion or an exception in
                  the test's own body
  NOT caught      every test passed, or the run outlived its time (it is
                  stopped, and the next fault runs)
  could not judge a test errored in its setup or teardown (no redis-server, a
                  port in use, a process that did not start), collection
                  failed, or nothing ran: no verdict either way

Prints a table (fault, the test that caught it, the verdict, seconds) and exits
0 when every fault was caught, 1 when one was not, 2 when one could not be
applied or judged or the clean tree's tests fail.

The dashboard faults are caught without a compose stack: the dashboards are
regenerated in the copy and the static checks (tests/unit/test_dashboards_static.py,
tests/unit/test_promql_parse.py) must name the metric, the label or the
expression that is wrong.

--suite compose runs another suite's faults, kept in a module of their own
(tests/mutants_compose.py: the compose stack's promises), with the same arguments.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300.0  # per run of a selection, unless a mutant says otherwise
INTERRUPT_GRACE_S = 60.0  # after a timeout: SIGINT lets pytest stop the processes its fixtures started
# make test's xdist workers take the port ranges 0-2 (tests/lab.py): the runs here take the next ones.
FIRST_PORT_SLOT = 3
MAX_JOBS = 4  # tests/lab.py has seven port ranges
# Other suites' faults, each in a module of its own, run by `make mutants suite=NAME`.
SUITES = {"host": None, "compose": "tests.mutants_compose"}


@dataclass(frozen=True)
class Mutant:
    name: str
    fault: str  # what the fault does, for the table
    edits: tuple[tuple[str, str, str], ...]  # (file, regex matching once, replacement)
    tests: tuple[str, ...]  # pytest arguments: the tests that must catch it
    after: tuple[str, ...] = ()  # a command run in the copy after the edits (python args)
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = TIMEOUT_S

    @property
    def selection(self) -> tuple:
        return self.tests, tuple(sorted(self.env.items()))


SIGTERM_TEST = "tests/integration/test_worker_stop.py::test_sigterm_mid_batch_loses_nothing"
SIGKILL_TEST = "tests/integration/test_worker_stop.py::test_sigkill_mid_batch_loses_nothing"
API_INPUT = "tests/integration/test_api_input.py"
OUTAGE = "tests/integration/test_outage.py"
DASHBOARDS_STATIC = ("tests/unit/test_dashboards_static.py",)
LOAD_TOOLING = "tests/integration/test_load_tooling.py"
REFUSED_TEST = (
    "tests/integration/test_ledger.py::"
    "test_a_refused_enqueue_is_counted_once_if_it_ever_settles_whichever_is_written_first"
)
# A SIGKILL fault shows as a batch that never settles: the test waits out the
# queue's lease and its margin (tests/integration/test_worker_stop.py, COME_BACK_S).
SIGKILL_TIMEOUT_S = 600.0

MUTANTS: tuple[Mutant, ...] = (
    # -- The ledger: every task accounted for ------------------------------------------------
    Mutant(
        "settle-never-written",
        "a task's settle is never written to the ledger",
        (
            (
                "lab/ledger/ledger.py",
                r"return await self\._execution_batch\.submit\(item\) == 1\n(\s+)except REDIS_DOWN:\n\s+if not retry_s:",
                "return True\n\\1except REDIS_DOWN:\n\\1    if not retry_s:",
            ),
        ),
        ("tests/integration/test_ledger.py::test_ledger_settles_once_and_counts_duplicates",),
    ),
    Mutant(
        "duplicate-not-counted",
        "a second execution of a settled task is not counted as a duplicate",
        (("lab/ledger/executions.py", r"    redis\.call\('HINCRBY', KEYS\[2\], f \.\. ':duplicates', 1\)\n", ""),),
        ("tests/integration/test_ledger.py::test_ledger_settles_once_and_counts_duplicates",),
    ),
    Mutant(
        "refused-enqueue-not-noted",
        "the API notes nothing of an enqueue it answered 503: a task whose reply was lost runs uncounted",
        (
            (
                "services/api/enqueue.py",
                r"            state\.ledger\.count_refused\(msg, accepted\)\n",
                "            pass\n",
            ),
        ),
        (
            "tests/integration/test_lost_reply.py::test_a_task_answered_503_for_a_lost_reply_runs_and_is_counted_enqueued_after_error[arq]",
        ),
    ),
    Mutant(
        "refused-settle-not-counted",
        "a task answered 503 that settles after its note is not counted enqueued",
        (("lab/ledger/executions.py", r"    if refused then ", "    if false then "),),
        (REFUSED_TEST,),
    ),
    Mutant(
        "refused-note-after-settle-not-counted",
        "a note of a task answered 503 that reaches Redis after the task settled counts nothing",
        (("lab/ledger/enqueue_counts.py", r" and redis\.call\('SISMEMBER', KEYS\[2\], id\) == 1", " and false"),),
        (REFUSED_TEST,),
    ),
    Mutant(
        "accepted-lost-reply-counted-as-503",
        "in after-response mode a publish whose reply was lost, answered 202, is counted as a 503 that ran",
        (
            (
                "services/api/enqueue.py",
                r"enqueue\(state, msg, _NO_REQUEST, accepted=True\)",
                "enqueue(state, msg, _NO_REQUEST)",
            ),
        ),
        (
            "tests/integration/test_lost_reply.py::test_after_response_a_publish_whose_reply_was_lost_is_counted_enqueued_not_as_a_503[arq]",
        ),
    ),
    Mutant(
        "purge-leaves-unacked",
        "make purge deletes Celery's queue but not the messages delivered and not acknowledged",
        (("workers/celery_queue.py", r'\(f"\{QUEUE_NAME\}\*", "unacked", "unacked_index"\)', '(f"{QUEUE_NAME}*",)'),),
        ("tests/integration/test_purge.py::test_a_purge_empties_a_queue_and_every_task_stays_counted[celery]",),
    ),
    Mutant(
        "purge-counted-twice",
        "a second purge counts a run's purged tasks again",
        (("lab/ledger/purge.py", r" - \(counts\[cell \.\. ':purged'\] or 0\)", ""),),
        ("tests/integration/test_purge.py::test_a_purge_empties_a_queue_and_every_task_stays_counted[arq]",),
    ),
    # -- A stopped or killed worker loses nothing -------------------------------------------
    Mutant(
        "task-dropped-on-sigterm",
        "taskiq acknowledges a task on receipt and does not wait for it on SIGTERM",
        (
            ("workers/taskiq_queue.py", r"AcknowledgeType\.WHEN_EXECUTED", "AcknowledgeType.WHEN_RECEIVED"),
            ("workers/taskiq_queue.py", r"wait_tasks_timeout=settings\.shutdown_grace_s", "wait_tasks_timeout=0"),
        ),
        ("tests/integration/test_worker_stop.py::test_sigterm_mid_batch_loses_nothing[taskiq]",),
    ),
    Mutant(
        "celery-acks-on-receipt",
        "Celery acknowledges a task as it starts it (acks_late off): a killed worker's running tasks are lost",
        (("workers/celery_queue.py", r"task_acks_late=True,", "task_acks_late=False,"),),
        (f"{SIGKILL_TEST}[celery]",),
    ),
    Mutant(
        "faststream-acks-first",
        "FastStream acknowledges a stream entry on receipt (AckPolicy.ACK_FIRST): a killed worker's are lost",
        (
            (
                "workers/faststream_queue.py",
                r"ack_policy=AckPolicy\.ACK\)\(handle\)\n(\s+)broker\.subscriber\(stream=reclaim",
                "ack_policy=AckPolicy.ACK_FIRST)(handle)\n\\1broker.subscriber(stream=reclaim",
            ),
        ),
        (f"{SIGKILL_TEST}[faststream]",),
    ),
    Mutant(
        "arq-cuts-off-on-sigterm",
        "arq's worker waits for nothing on SIGTERM (job_completion_wait=0): its running jobs are cut off",
        (("workers/arq_queue.py", r"job_completion_wait=settings\.shutdown_grace_s,", "job_completion_wait=0,"),),
        (f"{SIGTERM_TEST}[arq]",),
    ),
    Mutant(
        "arq-one-try",
        "arq gives a job one try (max_tries=1): a killed worker's jobs are dropped when they come back",
        (
            (
                "workers/arq_queue.py",
                r"\n( +)job_timeout=settings\.task_timeout_s,\n",
                "\n\\1job_timeout=settings.task_timeout_s,\n\\1max_tries=1,\n",
            ),
        ),
        (f"{SIGKILL_TEST}[arq]",),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    Mutant(
        "saq-cuts-off-on-sigterm",
        "SAQ's worker gives its running jobs no grace on SIGTERM (grace_s=0): they are cut off",
        (("workers/saq_queue.py", r"grace_s=settings\.shutdown_grace_s,", "grace_s=0,"),),
        (f"{SIGTERM_TEST}[saq]",),
    ),
    Mutant(
        "saq-one-attempt",
        "SAQ jobs get one attempt (retries=1): a job swept from a killed worker is aborted, never run",
        (("workers/saq_queue.py", r"\n( +)retries=2,\n", "\n\\1retries=1,\n"),),
        (f"{SIGKILL_TEST}[saq]",),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    Mutant(
        "dramatiq-cuts-off-on-sigterm",
        "Dramatiq's worker is stopped without waiting for its threads (timeout=0): running tasks are cut off",
        (
            (
                "workers/dramatiq_queue.py",
                r"worker\.stop\(timeout=settings\.shutdown_grace_s \* 1000\)",
                "worker.stop(timeout=0)",
            ),
        ),
        (f"{SIGTERM_TEST}[dramatiq]",),
    ),
    Mutant(
        "dramatiq-no-housekeeping",
        "Dramatiq's brokers never run their housekeeping (maintenance_chance=0): a dead worker's tasks stay unacked",
        (("workers/dramatiq_queue.py", r"maintenance_chance=DRAMATIQ_MAINTENANCE_CHANCE,", "maintenance_chance=0,"),),
        (f"{SIGKILL_TEST}[dramatiq]",),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    Mutant(
        "streaq-cuts-off-on-sigterm",
        "streaq's worker gives its running tasks no grace on SIGTERM (grace_period=0): they are cut off",
        (("workers/streaq_queue.py", r"grace_period=settings\.shutdown_grace_s,", "grace_period=0,"),),
        (f"{SIGTERM_TEST}[streaq]",),
    ),
    Mutant(
        "streaq-one-try",
        "streaq gives a task one try (max_tries=1): an entry reclaimed from a killed worker is failed unrun",
        (
            (
                "workers/streaq_queue.py",
                r"@worker\.task\(name=TASK_NAME, timeout=settings\.task_timeout_s, ttl=0\)",
                "@worker.task(name=TASK_NAME, timeout=settings.task_timeout_s, ttl=0, max_tries=1)",
            ),
        ),
        (f"{SIGKILL_TEST}[streaq]",),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    Mutant(
        "docket-cuts-off-on-sigterm",
        "docket's worker gives its running tasks no grace on SIGTERM: they are cancelled at once",
        (
            (
                "workers/docket_queue.py",
                r"await stop\(worker, running, settings\.shutdown_grace_s\)",
                "await stop(worker, running, 0)",
            ),
        ),
        (f"{SIGTERM_TEST}[docket]",),
    ),
    Mutant(
        "docket-no-redelivery",
        "docket redelivers an idle entry after a day (redelivery_timeout): a killed worker's tasks do not come back",
        (
            (
                "workers/docket_queue.py",
                r"redelivery_timeout=timedelta\(seconds=settings\.docket_redelivery_timeout_s\),",
                "redelivery_timeout=timedelta(days=1),",
            ),
        ),
        (f"{SIGKILL_TEST}[docket]",),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    Mutant(
        "rq-cold-stop",
        "RQ's pool stops its workers with SIGKILL on SIGTERM (a cold stop): their running jobs are cut off",
        (
            (
                "workers/rq_queue.py",
                r"\nclass LabWorkerPool\(WorkerPool\):\n",
                "\nclass LabWorkerPool(WorkerPool):\n"
                "    def stop_worker(self, worker_data, sig=signal.SIGINT):\n"
                "        return super().stop_worker(worker_data, signal.SIGKILL)\n\n",
            ),
        ),
        (f"{SIGTERM_TEST}[rq]",),
    ),
    Mutant(
        "rq-no-retry",
        "RQ jobs are enqueued without Retry: an abandoned job (its worker killed) goes to the failed registry",
        (("workers/rq_queue.py", r"\n +retry=Retry\(max=RETRIES\),\n", "\n"),),
        (f"{SIGKILL_TEST}[rq]",),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    Mutant(
        "rq-maintenance-lock-899s",
        "RQ's workers take RQ's own maintenance lock: one killed in its pass holds off every pass for 15 minutes",
        (("workers/rq_queue.py", r"\n +queue_class=LabQueue,\n", "\n"),),
        (
            "tests/integration/test_worker_stop.py::"
            "test_rqs_maintenance_lock_outlives_a_killed_holder_by_a_minute_not_a_quarter_hour",
        ),
    ),
    Mutant(
        "huey-loses-more-than-its-slots",
        "Huey's consumer runs twice HUEY_WORKERS workers: a killed replica loses more than one task per slot",
        (
            (
                "workers/huey_queue.py",
                r"workers=settings\.concurrency_for\(QUEUE\),",
                "workers=2 * settings.concurrency_for(QUEUE),",
            ),
        ),
        ("tests/integration/test_worker_stop.py::test_sigkill_loses_at_most_the_running_tasks_and_no_other[huey]",),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    # -- Workers and the API come back by themselves after a Redis outage ---------------------
    Mutant(
        "taskiq-group-not-recreated",
        "taskiq's worker does not create its consumer group again when Redis comes back without it",
        (("workers/taskiq_queue.py", r"await self\._declare_consumer_group\(\)", "pass"),),
        (
            "tests/integration/test_redis_loss.py::"
            "test_workers_take_tasks_again_after_redis_returns_with_its_data_then_empty",
        ),
        timeout_s=SIGKILL_TIMEOUT_S,
    ),
    Mutant(
        "api-keeps-a-failed-producer",
        "the API keeps a queue's producer whose start failed (Redis down): that queue never takes a task again",
        (
            (
                "services/api/state.py",
                r"\n( +)await producer\.start\(\)\n +self\.producers\[queue\] = producer\n",
                "\n\\1self.producers[queue] = producer\n\\1await producer.start()\n",
            ),
        ),
        (f"{OUTAGE}::test_an_api_started_while_redis_is_down_recovers_by_itself",),
    ),
    # -- The API: 202 once the broker has it, a clear 4xx that enqueues nothing, a fast 503 --
    Mutant(
        "200-not-202",
        "the enqueue route answers 200 instead of 202",
        (
            (
                "services/api/routes/tasks.py",
                r"Response\(answer\.encode\(\), status_code=202",
                "Response(answer.encode(), status_code=200",
            ),
        ),
        (f"{API_INPUT}::test_an_accepted_task_is_202_with_the_default_value_and_run",),
    ),
    Mutant(
        "unknown-field-accepted",
        "the task body takes fields it does not know (extra='ignore'): a mistyped request is enqueued",
        (
            (
                "services/api/routes/tasks.py",
                r'model_config = ConfigDict\(extra="forbid"\)',
                'model_config = ConfigDict(extra="ignore")',
            ),
        ),
        (f"{API_INPUT}::test_bad_body_is_422_naming_the_field",),
    ),
    Mutant(
        "body-size-unchecked",
        "the API reads a request body of any size (no 413)",
        (
            (
                "services/api/app.py",
                r"\n    app\.add_middleware\(errors\.BodySizeLimit, limit=settings\.max_body_bytes\)",
                "",
            ),
        ),
        (f"{API_INPUT}::test_oversized_body_is_413_by_length_and_by_stream",),
    ),
    Mutant(
        "validated-after-enqueue",
        "an unknown task shape is refused (404) only after the task was enqueued",
        (
            (
                "services/api/routes/tasks.py",
                r"(?s)(    if \(task_kind, task_variant\) not in ENDPOINTS:\n.*?\n        \)\n)"
                r"(.*?await enqueue\(state, msg, background\)\n)",
                "\\2\\1",
            ),
        ),
        (f"{API_INPUT}::test_a_kind_variant_pair_that_does_not_exist_is_404_and_enqueues_nothing",),
    ),
    Mutant(
        "outage-not-503",
        "a broker outage is answered 500, not 503",
        (
            (
                "services/api/errors.py",
                r'status_code=503,\n(\s+)headers=\{"Retry-After": "1"\}',
                'status_code=500,\n\\1headers={"Retry-After": "1"}',
            ),
        ),
        (f"{OUTAGE}::test_a_stopped_redis_gets_503_within_2_s_and_the_api_recovers_by_itself",),
    ),
    Mutant(
        "outage-slow",
        "the Redis clients' timeout is 5 s: a frozen Redis gets its 503 after the 2 s the API promises",
        (
            (
                "lab/settings.py",
                r"redis_timeout_s: float = Field\(1\.0, gt=0\)",
                "redis_timeout_s: float = Field(5.0, gt=0)",
            ),
        ),
        (f"{OUTAGE}::test_a_frozen_redis_gets_503_within_2_s_and_the_api_recovers_by_itself",),
    ),
    Mutant(
        "422-without-the-field",
        "a 422 names the field without where it is (`value`, not `body.value`)",
        (
            (
                "services/api/errors.py",
                r'return "\.".join\(str\(part\) for part in loc\)',
                'return ".".join(str(part) for part in loc[1:])',
            ),
        ),
        (f"{API_INPUT}::test_bad_body_is_422_naming_the_field",),
    ),
    Mutant(
        "value-bounds-off-by-one",
        "the task body takes a value from 0 to 1001, not 1 to 1000",
        (
            (
                "services/api/routes/tasks.py",
                r"value: StrictInt = Field\(1, ge=1, le=1000\)",
                "value: StrictInt = Field(1, ge=0, le=1001)",
            ),
        ),
        (f"{API_INPUT}::test_value_is_taken_from_1_to_1000_and_refused_outside",),
    ),
    Mutant(
        "run-header-unchecked",
        "the X-Lab-Run header is only checked for being empty: any other run name is taken",
        (("services/api/routes/tasks.py", r"if _RUN_OK\(run\) is None:", "if not run:"),),
        (f"{API_INPUT}::test_bad_run_header_is_422_and_enqueues_nothing",),
    ),
    Mutant(
        "deep-json-500",
        "an HTTP error without a body of the lab's own (FastAPI's 400 for JSON nested too deeply) is answered 500",
        (
            (
                "services/api/errors.py",
                r"return JSONResponse\(body, status_code=exc\.status_code,",
                "return JSONResponse(body, status_code=exc.status_code if isinstance(exc.detail, dict) else 500,",
            ),
        ),
        (f"{API_INPUT}::test_deeply_nested_json_is_400",),
    ),
    Mutant(
        "readyz-ok-while-redis-down",
        "/readyz answers 200 while Redis does not answer",
        (
            (
                "services/api/routes/health.py",
                r'response\.status_code = 503\n(\s+)return \{"status": "unavailable", "redis"',
                'response.status_code = 200\n\\1return {"status": "unavailable", "redis"',
            ),
        ),
        (f"{OUTAGE}::test_readyz_is_503_and_healthz_200_while_redis_is_down",),
    ),
    Mutant(
        "healthz-needs-redis",
        "/healthz pings Redis: a Redis outage fails the API's liveness too",
        (
            (
                "services/api/routes/health.py",
                r'async def healthz\(\) -> dict:\n    return \{"status": "ok"\}',
                'async def healthz(state: LabStateDep) -> dict:\n    await state.redis.ping()\n    return {"status": "ok"}',
            ),
        ),
        (f"{OUTAGE}::test_readyz_is_503_and_healthz_200_while_redis_is_down",),
    ),
    Mutant(
        "postgres-pool-waits-for-an-absent-server",
        "a request that finds no connection in the PostgreSQL pool waits on while PostgreSQL is away",
        (("lab/postgres.py", r"await asyncio\.shield\(self\.probe\)", "await asyncio.sleep(0)"),),
        (
            "tests/unit/test_postgres_pool.py::"
            "test_a_connection_asked_of_a_pool_whose_postgres_is_away_fails_with_a_connection_error",
        ),
    ),
    # -- The queue table, the backlog and the dashboards --------------------------------------
    Mutant(
        "queue-missing",
        "the streaq row is missing from lab/queues.py",
        (("lab/queues.py", r"\n    Broker\(\"streaq\",[^\n]*\n", "\n"),),
        ("tests/unit/test_settings.py", "tests/unit/test_api_routes.py"),
    ),
    Mutant(
        "backlog-is-stream-length",
        "the monitor reads a stream queue's backlog as the stream's length (entries stay once acknowledged)",
        (
            (
                "lab/stream_groups.py",
                r'return found\["lag"\] if found\.get\("lag"\) is not None else float\("nan"\)',
                "return await redis.xlen(stream)",
            ),
        ),
        ("tests/integration/test_queue_monitor.py",),
    ),
    Mutant(
        "panel-metric-missing",
        "a Queues panel query names lab_task_completed_totl (no such metric)",
        (
            (
                "grafana/generate.py",
                r"per_queue\(\"lab_task_completed_total\"\)",
                'per_queue("lab_task_completed_totl")',
            ),
        ),
        DASHBOARDS_STATIC,
        after=("grafana/generate.py",),
    ),
    Mutant(
        "panel-wrong-label",
        "the Backlog panel filters on queues= (no such label: it matches every series)",
        (
            (
                "grafana/generate.py",
                r'lab_queue_depth\{queue=~"\$queue", queue!="background"\}',
                'lab_queue_depth{queues=~"$queue", queue!="background"}',
            ),
        ),
        DASHBOARDS_STATIC,
        after=("grafana/generate.py",),
    ),
    Mutant(
        "background-backlog-never-falls",
        "the API's background backlog is never taken down as its tasks start",
        (("services/api/background.py", r"\n +self\.depth\.dec\(\)\n", "\n"),),
        ("tests/integration/test_background.py",),
    ),
    Mutant(
        "panel-promql-syntax-error",
        "an API panel's query has an unbalanced grouping: sum by (handler (…)",
        (
            (
                "grafana/generate.py",
                r"'sum by \(handler\) \(http_requests_inprogress\{job=\"api\"\}\)'",
                "'sum by (handler (http_requests_inprogress{job=\"api\"})'",
            ),
        ),
        ("tests/unit/test_promql_parse.py::test_dashboard_and_rule_exprs_parse",),
        after=("grafana/generate.py",),
    ),
    Mutant(
        "dashboards-not-regenerated",
        "grafana/generate.py changed and the committed dashboards not regenerated",
        (("grafana/generate.py", r'"title": "Lab dashboards",', '"title": "Lab dashboards, edited",'),),
        ("tests/unit/test_dashboards_generated.py::test_committed_dashboards_are_the_generators_output",),
    ),
    Mutant(
        "asyncpg-connect-retries-an-absent-server",
        "PgQueuer's connections are tried again without asking whether PostgreSQL answers",
        (
            (
                "lab/postgres.py",
                r"        except TimeoutError:\n            await answers\(settings\)\n",
                "        except TimeoutError:\n            pass\n",
            ),
        ),
        (
            "tests/unit/test_postgres_pool.py::"
            "test_an_asyncpg_connection_to_a_postgres_that_is_away_fails_with_its_error",
        ),
    ),
    Mutant(
        "locust-quits-before-its-end-gate",
        "Locust's master quits after its result without waiting for make load's end gate",
        (("locust/locustfile.py", r"    if not END_GATE:\n", "    if True:\n"),),
        ("tests/integration/test_load_tooling.py::test_the_master_quits_at_its_end_gate",),
    ),
    Mutant(
        "refusals-recorded-by-code-alone",
        "a load run records a refused request by its status code alone, not what the API said",
        (
            (
                "locust/locustfile.py",
                r"resp\.failure\(failure_text\(resp\.status_code, resp\.text\)\)",
                'resp.failure(f"HTTP {resp.status_code}")',
            ),
        ),
        ("tests/integration/test_load_tooling.py::test_a_refusal_is_recorded_with_what_the_api_said",),
    ),
    Mutant(
        "bare-task-smaller-than-the-labs",
        "make bench's bare apps send one value, not a task of the lab message's size",
        (
            (
                "services/bare/bench_task.py",
                r"    return \{\n        \"task_id\": os\.urandom\(16\)\.hex\(\),",
                '    return {"value": value}\n    return {\n        "task_id": os.urandom(16).hex(),',
            ),
        ),
        ("tests/unit/test_protocol.py::test_a_bare_apps_task_has_the_lab_messages_shape_and_validates_as_one",),
    ),
    # -- make capacity: a rate is sustained only when the queue keeps up with it -------------------
    Mutant(
        "capacity-backlog-ignored",
        "a capacity step is sustained however fast its backlog grows, while its p95 wait stays under max_wait",
        (("labctl/records/capacity.py", r"elif step\.backlog_slope > step\.slope_bound:", "elif False:"),),
        ("tests/unit/test_capacity.py::test_a_backlog_that_grows_faster_than_the_bound_is_the_workers_limit",),
    ),
    Mutant(
        "capacity-bisects-the-wrong-way",
        "the search's bisection keeps the lower bound when a rate between is not sustained",
        (
            (
                "labctl/experiments/capacity.py",
                r"lo, hi = \(mid, hi\) if s\.sustained else \(lo, mid\)",
                "lo, hi = (mid, hi)",
            ),
        ),
        ("tests/unit/test_capacity.py::test_the_search_brackets_the_capacity_within_the_precision",),
    ),
    Mutant(
        "capacity-walks-by-the-percent-as-a-factor",
        "a later search steps by precision as a factor (x11), not by precision %: its bracket is 11 times wide",
        (
            (
                "labctl/experiments/capacity.py",
                r"factor = 1 \+ precision_pct / 100",
                "factor = 1 + precision_pct",
            ),
        ),
        ("tests/unit/test_capacity.py::test_a_later_search_walks_from_the_first_ones_rate_to_the_same_precision",),
    ),
    Mutant(
        "capacity-api-rate-from-the-lagging-ledger",
        "a capacity step's API rate is read from the ledger's timeline, read through the loaded API, not the scraped counter",
        (
            (
                "labctl/records/capacity.py",
                r"    if scraped is not None:\n        step.sent_half = scraped\n",
                "",
            ),
        ),
        ("tests/unit/test_capacity.py::test_the_rate_taken_is_the_scraped_counters_where_the_record_has_it",),
    ),
    Mutant(
        "capacity-late-share-over-the-whole-step",
        "a capacity step's late sends are read over the whole step, its users' start included, not its second half",
        (
            (
                "labctl/records/capacity.py",
                r"record\.late_sends_steady_pct if record\.late_sends_steady_pct is not None else record\.late_sends_pct",
                "record.late_sends_pct",
            ),
        ),
        ("tests/unit/test_capacity.py::test_what_stops_a_step_first_errors_then_the_generator_then_the_api",),
    ),
    Mutant(
        "tickets-past-the-target",
        "the ticket book grants what a worker asks for, past the run's iterations",
        (
            (
                "lab/load_params.py",
                r"given = max\(0, min\(int\(want\), self\.remaining\)\)",
                "given = max(0, int(want))",
            ),
        ),
        (
            f"{LOAD_TOOLING}::test_ticket_book_never_grants_more_than_the_target",
            f"{LOAD_TOOLING}::test_a_distributed_run_sends_exactly_its_iterations_and_counts_each_once",
        ),
    ),
    Mutant(
        "lost-hidden-by-totals",
        "a run's backlog (its lost tasks) is read from the totals, where a cell with extra settles hides another's",
        (
            (
                "labctl/records/run_tasks.py",
                r'return sum\(max\(0, c\.get\("pending", 0\)\) for c in cells\)',
                'return max(0, sum(c.get("pending", 0) for c in cells))',
            ),
        ),
        ("tests/unit/test_drain_backlog.py",),
    ),
    Mutant(
        "settled-later-with-a-backlog",
        "a draining run is filled in as settled while its ledger still has tasks pending",
        (
            (
                "labctl/records/run.py",
                r'if not self\.is_draining\(\) or not ledger\.get\("totals"\) or backlog_of\(ledger\) > 0:',
                'if not self.is_draining() or not ledger.get("totals"):',
            ),
        ),
        (f"{LOAD_TOOLING}::test_a_draining_run_is_not_called_lost_and_settles_when_its_ledger_does",),
    ),
    Mutant(
        "drain-projection-from-settled",
        "the drain's projected time to empty divides the tasks settled, not the backlog, by the rate",
        (
            (
                "labctl/load_run/task_wait.py",
                r"return self\.backlog / self\.rate_per_s if self\.rate_per_s else None",
                "return settled_count(self.totals) / self.rate_per_s if self.rate_per_s else None",
            ),
        ),
        (f"{LOAD_TOOLING}::test_a_watch_that_ends_with_a_backlog_says_what_it_saw",),
    ),
    Mutant(
        "summary-mixes-queues",
        "the comparison's summary spreads each figure over every queue's runs, not the queue's own",
        (
            (
                "labctl/records/compare_figures.py",
                r"own = \[r for r in rows if r\.queue == q\]",
                "own = list(rows)",
            ),
        ),
        ("tests/unit/test_compare_report.py",),
    ),
    Mutant(
        "steady-rps-over-the-warm-up",
        "make compare reads a run's RPS over the whole load, its warm-up and end included, not its steady part",
        (
            (
                "labctl/records/compare_run.py",
                r"(def steady_rps\(record: Mapping\[str, Any\], warmup_s: float\)(?:.|\n)*?)"
                r"window = steady_window\(record, warmup_s\)",
                "\\1window = steady_window(record, None)",
            ),
        ),
        ("tests/unit/test_compare_steady.py::test_the_rps_is_the_steady_parts_not_the_warm_ups",),
    ),
    Mutant(
        "cpu-per-request-not-task",
        "the comparison's worker CPU per task divides by the requests, not the tasks the worker ran",
        (
            (
                "labctl/records/compare_run.py",
                r'done_in_window if done_in_window is not None else tasks\.get\("completed"\)',
                'record.get("requests")',
            ),
        ),
        ("tests/unit/test_compare_report.py",),
    ),
    Mutant(
        "bench-ratio-rounded",
        "the bench's lab/bare ratio is rounded, not rounded down: 0.899 shows as a 0.9 that meets the budget",
        (
            (
                "labctl/records/bench.py",
                r"return math\.floor\(lab / bare \* 100 \+ 1e-9\) / 100 if lab and bare else None",
                "return round(lab / bare, 2) if lab and bare else None",
            ),
        ),
        (f"{LOAD_TOOLING}::test_bench_table_judges_the_ratio_it_shows",),
    ),
)


# -- What pytest did ------------------------------------------------------------------------
@dataclass
class Outcome:
    """One run of a selection, from pytest's JUnit XML (junit_family=xunit1,
    which names each test's file)."""

    failed: list[tuple[str, str]] = field(default_factory=list)  # (test, message): failed in the test's call
    errors: list[tuple[str, str]] = field(default_factory=list)  # (test, message): setup, teardown, collection
    passed: int = 0
    skipped: int = 0
    timed_out_s: float | None = None  # stopped after this long
    exit_code: int | None = None
    output: str = ""  # the tail of pytest's output


CAUGHT, NOT_CAUGHT, NO_VERDICT = "caught", "NOT caught", "could not judge"


def read_junit(text: str) -> Outcome:
    """Each test case's result: a <failure> is a failure in the test's call; an
    <error> is one in its setup or teardown, or a collection failure. A test
    that failed and then errored in teardown has both (two test cases)."""
    outcome = Outcome()
    for case in ET.fromstring(text).iter("testcase"):
        test = test_id(case)
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        if failure is not None:
            outcome.failed.append((test, first_line(failure.get("message", ""))))
        elif error is not None:
            outcome.errors.append((test, first_line(error.get("message", ""))))
        elif skipped is not None:
            outcome.skipped += 1
        else:
            outcome.passed += 1
    return outcome


def test_id(case: ET.Element) -> str:
    """pytest's id of a JUnit test case: file::[class::]name."""
    name, classname, path = case.get("name", ""), case.get("classname", ""), case.get("file")
    if not path:  # a collection failure: the module's dotted name
        return classname or name
    module = path.removesuffix(".py").replace("/", ".")
    inner = classname.removeprefix(module).lstrip(".")
    return "::".join(part for part in (path, *inner.split("."), name) if part)


def first_line(message: str) -> str:
    return message.strip().splitlines()[0][:200] if message.strip() else ""


def verdict(outcome: Outcome) -> tuple[str, str]:
    """(CAUGHT, NOT_CAUGHT or NO_VERDICT; the test that caught it, or why not)."""
    if outcome.timed_out_s is not None:
        return NOT_CAUGHT, f"none: not caught in {outcome.timed_out_s:.0f} s (stopped)"
    if outcome.failed:
        return CAUGHT, outcome.failed[0][0]
    if outcome.errors:
        test, message = outcome.errors[0]
        return NO_VERDICT, f"{test} errored ({message})"
    if not outcome.passed:
        return NO_VERDICT, f"no test ran (pytest exit {outcome.exit_code})"
    return NOT_CAUGHT, f"none: {outcome.passed} passed"


def baseline_problems(outcome: Outcome) -> list[str]:
    """Why a selection's run on the clean tree cannot stand as the control."""
    if outcome.timed_out_s is not None:
        return [f"did not finish in {outcome.timed_out_s:.0f} s"]
    problems = [f"{test} failed: {message}" for test, message in outcome.failed]
    problems += [f"{test} errored: {message}" for test, message in outcome.errors]
    if not problems and not outcome.passed:
        problems.append(f"no test ran (pytest exit {outcome.exit_code})")
    return problems


# -- Trees and runs ---------------------------------------------------------------------------
def copy_tree(dest: Path) -> None:
    """The working tree as git sees it (tracked and untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def mutated(mutant: Mutant, read) -> dict[str, str]:
    """The files the mutant changes, changed; `read(name)` gives a file's text.
    ValueError when a replacement does not match exactly once."""
    files: dict[str, str] = {}
    for name, pattern, replacement in mutant.edits:
        text = files[name] if name in files else read(name)
        new, count = re.subn(pattern, replacement, text)
        if count != 1:
            raise ValueError(f"{pattern!r} matches {count} times in {name}, not once")
        files[name] = new
    return files


def apply(mutant: Mutant, tree: Path) -> None:
    for name, text in mutated(mutant, lambda n: (tree / n).read_text()).items():
        (tree / name).write_text(text)
    if mutant.after:
        subprocess.run([sys.executable, *mutant.after], cwd=tree, check=True, capture_output=True)


def run_tests(
    tree: Path,
    tests: Iterable[str],
    env: dict[str, str],
    timeout_s: float,
    first_failure: bool = True,
    slot: int = 0,
    workers: int = 1,
) -> Outcome:
    """pytest on `tests` in `tree` (-x: up to the first failure), in their
    order (pytest-randomly off); its outcome. A run past `timeout_s` is
    interrupted (SIGINT: pytest's fixtures stop what they started), then
    killed. `slot`: runs at once take their ports from ranges of their own
    (tests/lab.py, LAB_TEST_PORT_SLOT); `workers` > 1: pytest-xdist's
    workers, as make test runs them, each with its own range."""
    report = tree / ".mutants-junit.xml"
    report.unlink(missing_ok=True)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    run_env.update(
        PYTHONPATH=str(tree),
        LAB_TEST_LOGS=str(tree / ".test-logs"),
        **({} if workers > 1 else {"LAB_TEST_PORT_SLOT": str(FIRST_PORT_SLOT + slot)}),
        **env,
    )
    argv = [sys.executable, "-m", "pytest", *(["-x"] if first_failure else []), "-q", "-rfE"]
    argv += ["-n", str(workers), "--dist", "loadgroup"] if workers > 1 else []
    argv += ["-p", "no:cacheprovider", "-p", "no:randomly", "-o", "junit_family=xunit1", f"--junitxml={report}"]
    argv += list(dict.fromkeys(tests))
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            argv,
            cwd=tree,
            env=run_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=hears_sigint,
        )
        timed_out = None
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = time.monotonic() - started
            stop(proc)
        stop_leftovers(tree)
        log.seek(0)
        output = log.read()[-4000:]
    outcome = read_junit(report.read_text()) if report.exists() and timed_out is None else Outcome()
    outcome.timed_out_s, outcome.exit_code, outcome.output = timed_out, proc.returncode, output
    return outcome


def hears_sigint() -> None:
    """In the child before pytest starts: SIGINT back to its default. A shell's background
    job (`make mutants &`, nohup) starts with SIGINT ignored, and a Python started so
    installs no KeyboardInterrupt handler: the stop's SIGINT would go unheard."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(INTERRUPT_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stop_leftovers(tree: Path, wait_s: float = 10.0) -> None:
    """Kill, by pid, what a run left running in `tree` (the lab's processes run
    in sessions of their own, with the tree as their working directory), and
    wait until they are gone: the next run must not share the CPU with them."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == tree or tree in cwd.parents:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + wait_s
    while any(alive(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Running still: neither gone nor a zombie waiting for its parent."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def fresh_tree(label: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix=f"lab-mutant-{label}-"))
    copy_tree(tree)
    return tree


# -- The check ---------------------------------------------------------------------------------
def check_applies(mutants: list[Mutant]) -> dict[str, str]:
    """Each mutant that no longer applies to the working tree, and why."""
    broken = {}
    for mutant in mutants:
        try:
            mutated(mutant, lambda n: (ROOT / n).read_text())
        except (OSError, ValueError) as exc:
            broken[mutant.name] = str(exc)
    return broken


def run_baseline(mutants: list[Mutant], keep: bool, say, workers: int = 1) -> list[str]:
    """Every test the mutants name, on a copy of the clean tree (with the
    mutants' `after` commands run there too, as in their copies), in one
    pytest run per environment (on `workers` xdist workers), each test once:
    what failed."""
    tree = fresh_tree("baseline")
    problems: list[str] = []
    try:
        for command in dict.fromkeys(m.after for m in mutants if m.after):
            subprocess.run([sys.executable, *command], cwd=tree, check=True, capture_output=True)
        by_env: dict[tuple, dict[tuple, float]] = {}
        for mutant in mutants:
            selections = by_env.setdefault(mutant.selection[1], {})
            selections[mutant.tests] = max(selections.get(mutant.tests, 0.0), mutant.timeout_s)
        for env, selections in by_env.items():
            tests = [t for selection in selections for t in selection]
            started = time.monotonic()
            # Its time bounds a hang only: what the runs of every selection would be allowed.
            outcome = run_tests(tree, tests, dict(env), sum(selections.values()), first_failure=False, workers=workers)
            found = baseline_problems(outcome)
            where = f" ({', '.join(f'{k}={v}' for k, v in env)})" if env else ""
            say(
                f"   clean tree{where}: {len(dict.fromkeys(tests))} test(s) or file(s) named, "
                f"{outcome.passed} test(s) passed: {'FAILS' if found else 'passes'} ({time.monotonic() - started:.0f} s)"
            )
            if found:
                problems += found
                say(outcome.output)
                break  # one is enough to refuse
    finally:
        if keep:
            say(f"   kept {tree}")
        else:
            shutil.rmtree(tree, ignore_errors=True)
    return problems


def run_mutant(mutant: Mutant, keep: bool, say, slot: int = 0) -> tuple[str, str, float, Outcome]:
    tree = fresh_tree(mutant.name)
    started = time.monotonic()
    try:
        apply(mutant, tree)
        outcome = run_tests(tree, mutant.tests, mutant.env, mutant.timeout_s, slot=slot)
        state, detail = verdict(outcome)
        return state, detail, time.monotonic() - started, outcome
    finally:
        if keep:
            say(f"   kept {tree}")
        else:
            shutil.rmtree(tree, ignore_errors=True)


def run_suite(suite: str, argv: list[str]) -> int:
    """Another suite's faults: its own module, with the same arguments."""
    module = SUITES[suite]
    if importlib.util.find_spec(module) is None:
        print(
            f"make mutants suite={suite}: {module.replace('.', '/')}.py does not exist yet, so there is "
            f"nothing to run for it (the host suite's faults: make mutants)",
            file=sys.stderr,
        )
        return 2
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT).returncode


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Another suite's module takes every other argument, --help among them.
    pre = argparse.ArgumentParser(prog="python -m tests.mutants", add_help=False)
    pre.add_argument("--suite", choices=sorted(SUITES), default="host")
    chosen_suite, others = pre.parse_known_args(argv)
    if chosen_suite.suite != "host":
        return run_suite(chosen_suite.suite, others)
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all): " + ", ".join(m.name for m in MUTANTS))
    parser.add_argument("--keep", action="store_true", help="keep each copy of the tree (its path is printed)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print pytest's output for each mutant")
    parser.add_argument(
        "--suite",
        choices=sorted(SUITES),
        default="host",
        help="host: the faults of make test's suites (this module); compose: tests/mutants_compose.py's",
    )
    parser.add_argument(
        "-j", "--jobs", type=int, default=1, help=f"mutants run at once, each in its own copy and ports (1-{MAX_JOBS})"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= MAX_JOBS:
        parser.error(f"--jobs: from 1 to {MAX_JOBS}")
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    lock = threading.Lock()

    def say(text: str) -> None:
        with lock:
            print(text, flush=True)

    started = time.monotonic()
    rows: dict[str, tuple[Mutant, str, str, float]] = {}
    broken = check_applies(chosen)
    for mutant in chosen:
        if mutant.name in broken:
            say(f"== {mutant.name}: COULD NOT APPLY: {broken[mutant.name]}")
            rows[mutant.name] = (mutant, f"could not apply: {broken[mutant.name]}", "ERROR", 0.0)
    runnable = [m for m in chosen if m.name not in broken]

    if runnable:
        say(f"== the clean tree first: the tests of {len({m.selection for m in runnable})} selection(s)")
        problems = run_baseline(runnable, args.keep, say, workers=args.jobs)
        if problems:
            say(
                "\nREFUSING TO JUDGE: the tests fail on the clean tree, so a fault would be 'caught' by what already fails:"
            )
            for problem in problems:
                say(f"  {problem}")
            return 2

    slots = queue.Queue()
    for slot in range(args.jobs):
        slots.put(slot)

    def judge(mutant: Mutant) -> None:
        slot = slots.get()
        try:
            state, detail, seconds, outcome = run_mutant(mutant, args.keep, say, slot)
        except subprocess.CalledProcessError as exc:
            rows[mutant.name] = (mutant, f"could not apply: {exc}", "ERROR", 0.0)
            say(f"== {mutant.name}: could not apply: {exc}")
            return
        finally:
            slots.put(slot)
        rows[mutant.name] = (mutant, detail, state, seconds)
        output = outcome.output if args.verbose or state != CAUGHT else ""
        say(
            f"== {mutant.name}: {mutant.fault}\n   {state}: {detail} ({seconds:.0f} s)"
            + (f"\n{output}" if output else "")
        )

    # The longest first, so that none starts near the end and holds the others up.
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for done in [pool.submit(judge, m) for m in sorted(runnable, key=lambda m: -m.timeout_s)]:
            done.result()

    return report([rows[m.name] for m in chosen], started, say)


def report(table: list[tuple[Mutant, str, str, float]], started: float, say: Callable[[str], None]) -> int:
    """The mutation table, a fault a row, and the exit code: 2 when some fault could not be
    judged, 1 when one was not caught, 0 when every one was."""
    say("\n| fault | caught by (first failing test) | verdict | s |")
    say("|---|---|---|---|")
    for mutant, detail, state, seconds in table:
        say(f"| {mutant.fault} | `{detail}` | {state} | {seconds:.0f} |")
    say(f"\n{sum(s == CAUGHT for _, _, s, _ in table)} of {len(table)} caught in {time.monotonic() - started:.0f} s")
    states = {state for _, _, state, _ in table}
    if states & {"ERROR", NO_VERDICT}:
        return 2
    return 1 if NOT_CAUGHT in states else 0


if __name__ == "__main__":
    sys.exit(main())
