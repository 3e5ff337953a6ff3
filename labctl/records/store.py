"""results/: the one place that reads and writes the records and the files
beside them (a comparison's .md and .html, a scale's, a run's report .png).

Each JSON file is read by its `schema`: 1 (a load run, chaos included), "bench/1",
"compare/2" (and compare/1), "compare-article/1", "scale/1", "claims/1", "capacity/1". A file of another schema, or not a record, is skipped
with a line that says so; fields a record of the same schema lacks (an older
run) take their defaults, and fields this version does not know are kept."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from labctl.errors import LabError
from labctl.records.base import Record
from labctl.records.bench import SCHEMA as BENCH_SCHEMA
from labctl.records.bench import BenchRecord
from labctl.records.capacity import SCHEMA as CAPACITY_SCHEMA
from labctl.records.capacity import CapacityRecord
from labctl.records.claims import SCHEMA as CLAIMS_SCHEMA
from labctl.records.claims import ClaimsRecord
from labctl.records.compare import ARTICLE_SCHEMA, OLD_SCHEMAS, ArticleRecord, CompareRecord
from labctl.records.compare import SCHEMA as COMPARE_SCHEMA
from labctl.records.run import SCHEMA as RUN_SCHEMA
from labctl.records.run import RunRecord
from labctl.records.scale import SCHEMA as SCALE_SCHEMA
from labctl.records.scale import ScaleRecord

MODELS: dict[object, type[Record]] = {
    RUN_SCHEMA: RunRecord,
    BENCH_SCHEMA: BenchRecord,
    COMPARE_SCHEMA: CompareRecord,
    **{old: CompareRecord for old in OLD_SCHEMAS},  # read, its summary derived again from its runs
    ARTICLE_SCHEMA: ArticleRecord,
    SCALE_SCHEMA: ScaleRecord,
    CLAIMS_SCHEMA: ClaimsRecord,
    CAPACITY_SCHEMA: CapacityRecord,
}
R = TypeVar("R", bound=Record)


def parse(data: object) -> Record | None:
    """A record from its JSON, by its schema; None when it is no record this version reads."""
    if not isinstance(data, dict):
        return None
    model = MODELS.get(data.get("schema"))
    return model.model_validate(data) if model is not None else None


class Store:
    """The records of one results directory."""

    def __init__(self, directory: Path | str, warn: Callable[[str], None] | None = None):
        self.directory = Path(directory)
        self.warn = warn or (lambda line: print(line, file=sys.stderr))

    def path(self, name: str, suffix: str = ".json") -> Path:
        return self.directory / f"{name}{suffix}"

    # -- reading ----------------------------------------------------------------------------
    def _read(self, path: Path) -> Record | None:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            self.warn(f"skipping {path}: {exc}")
            return None
        try:
            record = parse(data)
        except ValidationError as exc:
            self.warn(f"skipping {path}: not a record of its schema ({exc.error_count()} field(s) do not fit)")
            return None
        if record is None and isinstance(data, dict) and "schema" in data:
            self.warn(
                f"skipping {path}: schema {data['schema']!r} is none this version reads ({', '.join(map(str, MODELS))})"
            )
        return record

    def all(self) -> list[Record]:
        found = (self._read(p) for p in sorted(self.directory.glob("*.json")))
        return [r for r in found if r is not None]

    def of(self, model: type[R]) -> list[R]:
        """Every record of one kind, oldest first."""
        found = [r for r in self.all() if isinstance(r, model)]
        return sorted(found, key=lambda r: (getattr(r, "time", "") or "", getattr(r, "run", "") or ""))

    def runs(self) -> list[RunRecord]:
        return self.of(RunRecord)

    def benches(self) -> list[BenchRecord]:
        return self.of(BenchRecord)

    def comparisons(self) -> list[CompareRecord]:
        return self.of(CompareRecord)

    def run(self, name: str) -> RunRecord:
        """One run's record; LabError when there is none."""
        path = self.path(name)
        record = self._read(path) if path.exists() else None
        if not isinstance(record, RunRecord):
            raise LabError(f"no run record {path}: `make results` lists the runs")
        return record

    # -- writing ----------------------------------------------------------------------------
    def beside(self, filename: str) -> Path:
        """Where a file beside the records goes (ours, or another program's: Locust's report,
        copied out of its container by `docker cp`): the directory made, the path returned."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory / filename

    def save(self, record: Record, name: str | None = None) -> Path:
        """Write a record as <name>.json (default: its run or base name)."""
        path = self.beside(f"{name or getattr(record, 'run', None) or getattr(record, 'base', '')}.json")
        path.write_text(json.dumps(record.as_json(), indent=2) + "\n")
        return path

    def write_text(self, name: str, suffix: str, text: str) -> Path:
        """A file beside the records: a report page, a markdown table."""
        path = self.beside(name + suffix)
        path.write_text(text)
        return path

    def write_bytes(self, name: str, suffix: str, data: bytes) -> Path:
        path = self.beside(name + suffix)
        path.write_bytes(data)
        return path
