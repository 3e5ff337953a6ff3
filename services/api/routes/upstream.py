"""The event-loop experiments: what blocks FastAPI's loop, and what does not.

/api/v1/upstream/{variant} calls a slow remote API four ways:
  async-blocking    a synchronous client inside `async def`: the whole loop waits
  async-threadpool  the synchronous client through run_in_threadpool
  sync-def          a plain `def` handler: FastAPI runs it in the threadpool
  async-native      an async client with a shared connection pool
The threadpool has THREADPOOL_TOKENS threads (anyio's default is 40).

/api/v1/clients returns a large nested pydantic response, serialised on the
loop (`model`) or in the threadpool (`prejson`); /api/v1/payload returns a body
of a chosen size.
"""

import random
from functools import lru_cache
from typing import Annotated, Literal

import httpx
from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, TypeAdapter

router = APIRouter(prefix="/api/v1")


# Upstream calls
def _upstream_sync(request: Request) -> dict:
    lab = request.app.state.lab
    return lab.upstream_sync.get(lab.settings.upstream_url).raise_for_status().json()


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
    lab = request.app.state.lab
    r = await lab.upstream_async.get(lab.settings.upstream_url)
    return r.raise_for_status().json()


# A large nested response, as in the liveness-probe article
class Address(BaseModel):
    street: str
    city: str
    postcode: str
    country: str


class BankAccount(BaseModel):
    iban: str
    bank: str
    currency: str
    balance: float


class Client(BaseModel):
    id: int
    name: str
    email: str
    active: bool
    address: Address
    accounts: list[BankAccount]


CLIENTS = TypeAdapter(list[Client])
MAX_CLIENTS = 50_000


@lru_cache(maxsize=1)  # 40 000 clients hold ~100 MB: keep only the last count asked
def make_clients(count: int) -> list[Client]:
    """The same clients for a given count every time (cached: the experiment is
    about serialising them, not building them)."""
    rng = random.Random(count)
    return [
        Client(
            id=i,
            name=f"Client {i}",
            email=f"client{i}@example.com",
            active=rng.random() > 0.1,
            address=Address(
                street=f"{rng.randint(1, 999)} Main Street",
                city=rng.choice(["Lyon", "Porto", "Graz"]),
                postcode=f"{rng.randint(10000, 99999)}",
                country="EU",
            ),
            accounts=[
                BankAccount(
                    iban=f"EU{rng.randint(10**15, 10**16 - 1)}",
                    bank=rng.choice(["North", "South"]),
                    currency="EUR",
                    balance=round(rng.uniform(0, 10_000), 2),
                )
                for _ in range(2)
            ],
        )
        for i in range(count)
    ]


@router.get("/clients", response_model=list[Client])
async def clients(
    count: Annotated[int, Query(ge=1, le=MAX_CLIENTS)] = 1000,
    mode: Literal["model", "prejson"] = "model",
):
    data = await run_in_threadpool(make_clients, count)
    if mode == "prejson":
        body = await run_in_threadpool(CLIENTS.dump_json, data)
        return Response(content=body, media_type="application/json")
    return data  # validated and serialised by FastAPI, on the event loop


MAX_PAYLOAD = 10 * 1024 * 1024


@lru_cache(maxsize=8)
def _payload(size: int) -> bytes:
    return b"x" * size


@router.get("/payload")
async def payload(size: Annotated[int, Query(ge=0, le=MAX_PAYLOAD)] = 1024) -> Response:
    return Response(content=_payload(size), media_type="application/octet-stream")


def clients_for(settings) -> tuple[httpx.Client, httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    timeout = httpx.Timeout(settings.upstream_timeout_s)
    return httpx.Client(limits=limits, timeout=timeout), httpx.AsyncClient(limits=limits, timeout=timeout)
