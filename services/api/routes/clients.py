"""GET /clients: a large nested pydantic response (as in the liveness-probe
article), serialised on the loop (`model`) or in the threadpool (`prejson`)."""

import random
from functools import lru_cache
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, TypeAdapter

router = APIRouter()


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


@lru_cache(maxsize=1)  # MAX_CLIENTS clients hold a lot of memory: keep only the last count asked
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
