"""/metrics: the API's Prometheus metrics (a thread serves the same on METRICS_PORT)."""

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def metrics() -> Response:
    """Everything in REGISTRY: this process's metrics and the cgroup's, or, with
    API_WORKERS > 1, every server process's samples added up."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
