"""The API's routes (services/api/): the enqueue route's schema against the queue
table and the task shapes, and the app's route table."""

from lab.protocol import ENDPOINTS, Kind, Queue, Variant
from lab.queues import BROKERS


def test_the_enqueue_route_documents_and_accepts_exactly_the_enums_values():
    """The route types its path as Literals of the enums' values (services/api/routes/tasks.py):
    its schema still lists each enum, and what it hands on are the enums' members."""
    from services.api.app import create_app
    from services.api.routes.tasks import _KINDS, _QUEUES, _VARIANTS

    params = create_app().openapi()["paths"]["/api/v1/incr/{kind}/{variant}/{queue}"]["post"]["parameters"]
    schemas = {p["name"]: p["schema"] for p in params if p["in"] == "path"}
    # What the route must take, from the sources the rest of the lab reads: the
    # queue table (lab/queues.py) and the task shapes, not the enums themselves.
    expected = {
        "kind": ["io", "cpu"],
        "variant": ["simple", "sync", "thread", "process"],
        "queue": ["background", *(b.name for b in BROKERS)],
    }
    assert {k for k, _ in ENDPOINTS} == set(Kind) and {v for _, v in ENDPOINTS} == set(Variant)
    for name, enum, members in (("kind", Kind, _KINDS), ("variant", Variant, _VARIANTS), ("queue", Queue, _QUEUES)):
        assert schemas[name]["enum"] == expected[name], name
        assert sorted(members) == sorted(expected[name]), name
        assert all(members[value] is enum(value) for value in expected[name])


def test_the_api_routes_sit_in_the_apps_own_table_under_one_prefix():
    """services/api/app.py joins each route module's routes to the app's own
    table, under API_V1 (health and metrics at the root), with no included
    router between: FastAPI matches an included router through a layer of its
    own on every request. The enqueue route is matched first."""
    from fastapi.routing import APIRoute
    from starlette.routing import Route

    from services.api.app import API_V1, create_app

    app = create_app()
    assert all(type(route) in (APIRoute, Route) for route in app.routes), [type(r) for r in app.routes]
    paths = [route.path for route in app.routes if isinstance(route, APIRoute)]
    assert paths[0] == f"{API_V1}/incr/{{kind}}/{{variant}}/{{queue}}"
    assert {p for p in paths if not p.startswith(f"{API_V1}/")} == {"/healthz", "/readyz", "/metrics"}
    assert {"/api/v1/runs", "/api/v1/runs/{run}", "/api/v1/clients", "/api/v1/payload"} <= set(paths)
