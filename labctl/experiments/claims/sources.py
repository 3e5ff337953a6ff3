"""The authors' files as `make claims` runs them: the originals vendored
verbatim under services/claims/vendor/ (each with its repository, commit and
git blob id, so `git hash-object` proves it unchanged), and every change made to
them written here as data: (the exact original text, its replacement). A run
copies the originals into its work directory, applies the changes (each must
match exactly once), adds claims_tally.py and harness.py (services/claims/lib/),
the Dramatiq port and the blog's minimal workers (services/claims/own/), and
keeps each change as a unified diff in its record, which the report prints.

The changes, by kind: `N` read from the environment (the counts are scaled
here); one tally line per job body (claims_tally.py: every job counted); RQ's
`Connection`, removed in rq 2.0 (SAQ's simple.py); `int()` around
steventen's TOTAL_JOBS, a string when set.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from labctl.config import ROOT
from labctl.errors import LabError

CLAIMS_DIR = ROOT / "services" / "claims"
VENDOR = CLAIMS_DIR / "vendor"
LIB = CLAIMS_DIR / "lib"
OWN = CLAIMS_DIR / "own"


@dataclass(frozen=True)
class Vendored:
    path: str  # under services/claims/vendor/
    repo: str
    commit: str
    origin: str  # the file's path in its repository
    blob: str  # its git blob id at that commit
    licence: str
    changes: tuple[tuple[str, str], ...] = field(default=())


def blob_id(data: bytes) -> str:
    """The id git gives a file's content (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


SAQ_RQ_ORIGINAL = """    from rq import Connection, Queue, Worker

    with Connection() as connection:
        queue = Queue(connection=connection)
        worker = Worker("default", log_job_description=False)
        worker.log_result_lifespan = False

        def enqueue(func):
            for _ in range(N):
                queue.enqueue(func)

        now = time.time()
        enqueue(sync_noop)
        print(f"RQ enqueue {N} {time.time() - now}")
        worker.work(burst=True)
        print(f"RQ process {N} noop {time.time() - now}")

        enqueue(sync_sleeper)
        worker.work(burst=True)
        print(f"RQ process {N} sleep {time.time() - now}")
"""


def _saq_rq_patched(original: str) -> str:
    """SAQ's RQ part without `Connection` (removed in rq 2.0): a Redis connection made and
    passed to the Worker, the `with` block's body dedented; nothing else changes."""
    head, _, body = original.partition("    with Connection() as connection:\n")
    head = head.replace(
        "    from rq import Connection, Queue, Worker\n",
        "    from redis import Redis\n    from rq import Queue, Worker\n",
    )
    body = "".join(line[4:] if line.strip() else line for line in body.splitlines(keepends=True))
    body = body.replace(
        'Worker("default", log_job_description=False)',
        'Worker("default", connection=connection, log_job_description=False)',
    )
    return head + "    connection = Redis()\n" + body


SAQ_RQ_PATCHED = _saq_rq_patched(SAQ_RQ_ORIGINAL)
STREAQ_N = ("N_TASKS = 20_000\n", 'N_TASKS = int(__import__("os").environ.get("N_TASKS", 20_000))\n')
STEVENTEN_N = ('total_jobs = os.getenv("TOTAL_JOBS", 20000)', 'total_jobs = int(os.getenv("TOTAL_JOBS", 20000))')
STEVENTEN = "steventen/python_queue_benchmark"


STEVENTEN_BLOBS = {
    "rq": ("61f480b7afa8b3eeaabe1959a6b03be1dc729c1c", "7a24adb1ab900dd7f95db7baa95ac679588b2d46"),
    "arq": ("e3a6cd7afd6a48121172fe94988f6a1de09d53d9", "bc1d378c3bf01a862f192692876bacb98b0d2645"),
    "celery": ("740a1d7714964a71e551de5d3ab1d3f358bf9e4f", "2e76ead1546fb355d5f2976ead19b2b72de945d0"),
    "dramatiq": ("21ba66f3ed7530e4e005a5721bac058f02d6b4f2", "e8ae75f4877b1ed377a354a11dfd1648b952c173"),
    "huey": ("7000234123db1eec950f56e849dbd82e41569637", "71023b3a2cf0df477812c908f6300e801550dbf2"),
    "taskiq": ("30b728943b1aecb1467ee5c91ac0540786ef9d4a", "13984e64468d0262a168de99d00dfd1ed5e6a8ac"),
}


def _steventen(path: str, blob: str, changes: tuple[tuple[str, str], ...] = ()) -> Vendored:
    return Vendored(f"steventen/{path}", STEVENTEN, "6f50a12", path, blob, "MIT (pyproject.toml)", changes)


def _streaq(name: str, commit: str, blob: str, hit: str) -> Vendored:
    """A streaq benchmark file: N_TASKS from the environment, and the sleeper counted."""
    sleep = "anyio" if name == "bench_streaq.py" else "asyncio"
    ctx = "ctx, " if name in ("bench_saq.py", "bench_arq.py") else ""
    head, body = f"async def sleeper({ctx}time: int) -> None:\n", f"        await {sleep}.sleep(time)\n"
    original = f"{head}    if time:\n{body}"
    patched = f"{head}    t0 = claims_tally.now()\n    if time:\n{body}    claims_tally.hit({hit}, t0)\n"
    first = f"import {sleep}\n"
    return Vendored(
        f"streaq/{name}",
        "tastyware/streaq",
        commit,
        f"benchmarks/{name}",
        blob,
        "MIT",
        ((first, first + "\nimport claims_tally\n"), STREAQ_N, (original, patched)),
    )


FILES: tuple[Vendored, ...] = (
    Vendored(
        "saq/simple.py",
        "tobymao/saq",
        "b40e3af",
        "benchmarks/simple.py",
        "6d72a621d07106959b1483985469ac744f2dd312",
        "MIT",
        (
            ("import asyncio\nimport sys\n", "import asyncio\nimport os\nimport sys\n"),
            ("N = 1000\n", 'N = int(os.environ.get("N", 1000))\n'),
            (SAQ_RQ_ORIGINAL, SAQ_RQ_PATCHED),
        ),
    ),
    Vendored(
        "saq/funcs.py",
        "tobymao/saq",
        "b40e3af",
        "benchmarks/funcs.py",
        "fa10e9049d989b53be65477ccbbe0a4ec7fd6947",
        "MIT",
        (
            ("import time\n", "import time\n\nimport claims_tally\n"),
            (
                "async def noop(ctx):\n",
                'async def noop(ctx):\n    claims_tally.hit(ctx.get("job_id") or ctx["job"].key)\n',
            ),
            (
                "    await asyncio.sleep(random.random() / 20)\n",
                "    t0 = claims_tally.now()\n    await asyncio.sleep(random.random() / 20)\n"
                '    claims_tally.hit(ctx.get("job_id") or ctx["job"].key, t0)\n',
            ),
            ("def sync_noop():\n", "def sync_noop():\n    claims_tally.hit_rq()\n"),
            (
                "    time.sleep(random.random() / 20)\n",
                "    t0 = claims_tally.now()\n    time.sleep(random.random() / 20)\n    claims_tally.hit_rq(t0)\n",
            ),
        ),
    ),
    Vendored(
        "rq/benchmark.md",
        "rq/rq",
        "eda19b1",
        "docs/benchmark.md",
        "4704e3d2b556a5198116c589b9ea503016cef619",
        "BSD-2-Clause",
        (("num_jobs = 1000\n", 'num_jobs = int(__import__("os").environ.get("N", 1000))\n'),),
    ),
    Vendored(
        "rq/fixtures.py",
        "rq/rq",
        "eda19b1",
        "tests/fixtures.py (say_hello alone, verbatim)",
        "",
        "BSD-2-Clause",
        (
            (
                '    """A job with a single argument and a return value."""\n',
                '    """A job with a single argument and a return value."""\n    claims_tally.hit_rq()\n',
            ),
            ("def say_hello", "import claims_tally\n\n\ndef say_hello"),
        ),
    ),
    _streaq("bench_saq.py", "c16c846", "40818b0eda879fcd238ef7b04eac4fa0db357820", 'ctx["job"].key'),
    _streaq("bench_arq.py", "c16c846", "f1540093755a12c4e46e5d380252ad65878f8c8b", 'ctx["job_id"]'),
    _streaq("bench_taskiq.py", "c16c846", "a439c4d0030b6091dfdc314788fa8780c55e0e24", "None"),
    _streaq("bench_streaq.py", "56567dc", "25abd7eb0eb4ce3f1f06df70e6fa0d4073d0425f", "sleeper.context.task_id"),
    *(
        _steventen(f"{lib}/{name}", blob, () if name == "tasks.py" or lib == "taskiq" else (STEVENTEN_N,))
        for lib, blobs in STEVENTEN_BLOBS.items()
        for name, blob in zip(("tasks.py", "enqueue_jobs.py"), blobs)
    ),
    _steventen("celery/celery_config.py", "6f6afd799d9483700e2382571308e4fe9af9c6f9"),
)


def apply(text: str, changes: tuple[tuple[str, str], ...], name: str) -> str:
    """The text with each change made; each original must occur exactly once."""
    for old, new in changes:
        count = text.count(old)
        if count != 1:
            raise LabError(f"{name}: a change expects its original text once, found it {count} times: {old[:60]!r}")
        text = text.replace(old, new)
    return text


def diff(original: str, patched: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True), patched.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    )


CODE_BLOCK = re.compile(r"```python\n(.*?)(?:```|\Z)", re.S)  # the doc leaves its one block open


def rq_script(markdown: str) -> str:
    """RQ's benchmark script: the one Python block of docs/benchmark.md, as printed."""
    blocks = CODE_BLOCK.findall(markdown)
    if len(blocks) != 1:
        raise LabError(f"rq/benchmark.md: expected one python block, found {len(blocks)}")
    return cast(str, blocks[0])


def stage(work: Path) -> dict[str, dict[str, Any]]:
    """The work directory a run mounts (its files as the containers read them), and
    per vendored file its origin and the diff of what was changed."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(VENDOR, work, ignore=shutil.ignore_patterns("__pycache__", "LICENSE"))
    shutil.copytree(LIB, work / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(OWN, work / "own", ignore=shutil.ignore_patterns("__pycache__"))
    sources = {}
    for f in FILES:
        original = (VENDOR / f.path).read_text()
        patched = apply(original, f.changes, f.path)
        (work / f.path).write_text(patched)
        sources[f.path] = {k: getattr(f, k) for k in ("repo", "commit", "origin", "blob", "licence")}
        sources[f.path]["diff"] = diff(original, patched, f.path)
    (work / "rq" / "rq_benchmark.py").write_text(rq_script((work / "rq" / "benchmark.md").read_text()))
    for path in work.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return sources
