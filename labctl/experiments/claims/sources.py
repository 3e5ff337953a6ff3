"""The authors' files as `make claims` runs them: the originals vendored
verbatim under services/claims/vendor/ (each with its repository, commit and
git blob id, so `git hash-object` proves it unchanged), and every change made to
them written as data in services/claims/changes.toml (the exact original text,
its replacement; the kinds of change are listed at its head). A run copies the
originals into its work directory, applies the changes (each must match exactly
once), adds claims_tally.py and harness.py (services/claims/lib/), the Dramatiq
port and the blog's minimal workers (services/claims/own/), and keeps each
change as a unified diff in its record, which the report prints.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from labctl.config import ROOT
from labctl.errors import LabError

CLAIMS_DIR = ROOT / "services" / "claims"
VENDOR = CLAIMS_DIR / "vendor"
LIB = CLAIMS_DIR / "lib"
OWN = CLAIMS_DIR / "own"
CHANGES = CLAIMS_DIR / "changes.toml"


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


def _vendored(entry: dict[str, Any]) -> Vendored:
    changes = tuple((c["old"], c["new"]) for c in entry.pop("change", ()))
    return Vendored(**entry, changes=changes)


FILES: tuple[Vendored, ...] = tuple(_vendored(f) for f in tomllib.loads(CHANGES.read_text())["file"])


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
