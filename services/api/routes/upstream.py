"""The event-loop experiments' upstream calls: what blocks FastAPI's loop, and what does not.

POST /upstream/{variant} calls a slow remote API four ways:
  async-blocking    a synchronous client inside `async def`: the whole loop waits
  async-threadpool  the synchronous client through run_in_threadpool
  sync-def          a plain `def` handler: FastAPI runs it in the threadpool
  async-native      an async client with a shared connection pool
The threadpool has THREADPOOL_TOKENS threads (anyio's default is 40).
"""

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from services.api.deps import lab_state

router = APIRouter()


def _upstream_sync(request: Request) -> dict:
    state = lab_state(request)
    return state.upstream_sync.get(state.settings.upstream_url).raise_for_status().json()


@router.post("/upstream/async-blocking")
async def upstream_async_blocking(request: Request) -> dict:
    return _upstream_sync(request)


@router.post("/upstream/async-threadpool")
async def upstream_async_threadpool(request: Request) -> dict:
    return await run_in_threadpool(_upstream_sync, request)


@router.post("/upstream/sync-def")
def upstream_sync_def(request: Request) -> dict:
    return _upstream_sync(request)


@router.post("/upstream/async-native")
async def upstream_async_native(request: Request) -> dict:
    state = lab_state(request)
    r = await state.upstream_async.get(state.settings.upstream_url)
    return r.raise_for_status().json()
