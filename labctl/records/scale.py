"""make scale's record (results/scale-<time>-<worker>.json, beside its .md and
.html): the same load at each replica count. `schema` "scale/1"."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from labctl.records.base import Record

SCHEMA = "scale/1"


class ScaleRecord(Record):
    schema_version: str = Field(SCHEMA, alias="schema")
    base: str  # the runs' common name: each count's run is <base>-<n>r
    worker: str
    params: dict[str, Any] = {}  # requests, endpoint, users
    rows: list[dict[str, Any]] = []  # one per replica count (or node count)
    axis: str = "replicas"  # what the counts are: replicas, or nodes the workers are spread over
    per_node: int | None = None  # over nodes: the workers' replicas on each
    platform: dict[str, Any] = {}
    api_limits: str | None = None
    worker_limits: str | None = None
