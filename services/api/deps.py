"""The handlers' typed access to the API process's LabState (app.state.lab,
set by the lifespan in services/api/app.py).

`lab_state(request)` is a plain call inside the handler, for the enqueue route
and the event-loop experiments: a FastAPI dependency is resolved on every
request, and the experiments' `def` handler runs in the threadpool, where a
dependency would add work to what they measure (docs/hot-path.md).
`LabStateDep` is the dependency, for the routes off that path (runs, readiness).
"""

from typing import Annotated

from fastapi import Depends, Request

from services.api.state import LabState


def lab_state(request: Request) -> LabState:
    """The API process's LabState."""
    state: LabState = request.app.state.lab
    return state


async def _lab_state_dependency(request: Request) -> LabState:
    # async: FastAPI would run a plain `def` dependency in the threadpool.
    return lab_state(request)


LabStateDep = Annotated[LabState, Depends(_lab_state_dependency)]
