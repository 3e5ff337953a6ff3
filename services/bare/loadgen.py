"""The HTTP client of `make bench`: N POSTs at concurrency C, keep-alive, one JSON line out.

    python -m services.bare.loadgen URL --requests 3000 --users 50 [--warmup 200] [--run NAME]

Closed loop, like the published experiment's client: C connections, each
sending its next request when the last one answered. It reports its own CPU
use: above GENERATOR_BUSY of one core the numbers measure the client, and
`make bench` says so.
"""

import argparse
import asyncio
import json
import math
import time

import aiohttp

BODY = b'{"value": 1}'
GENERATOR_BUSY = 0.85


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


async def drive(url: str, requests: int, users: int, headers: dict) -> dict:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    remaining = requests
    connector = aiohttp.TCPConnector(limit=users, force_close=False)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:

        async def user() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                try:
                    async with session.post(url, data=BODY) as response:
                        await response.read()
                        status = str(response.status)
                except (TimeoutError, aiohttp.ClientError) as exc:
                    status = type(exc).__name__
                latencies.append(time.perf_counter() - started)
                statuses[status] = statuses.get(status, 0) + 1

        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(user() for _ in range(users)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    latencies.sort()
    ok = sum(n for s, n in statuses.items() if s.startswith("2"))
    return {
        "requests": requests,
        "ok": ok,
        "errors": requests - ok,
        "statuses": statuses,
        "elapsed_s": round(wall, 3),
        "rps": round(ok / wall, 1) if wall else None,
        "p50_ms": round(1000 * percentile(latencies, 0.5), 1) if latencies else None,
        "p95_ms": round(1000 * percentile(latencies, 0.95), 1) if latencies else None,
        "generator_cpu": round(cpu / wall, 2) if wall else None,
        "generator_bound": bool(wall and cpu / wall > GENERATOR_BUSY),
    }


async def main_async(args) -> dict:
    headers = {"Content-Type": "application/json", **({"X-Lab-Run": args.run} if args.run else {})}
    warmup = await drive(args.url, args.warmup, min(args.users, args.warmup), headers) if args.warmup else {}
    result = await drive(args.url, args.requests, args.users, headers)
    result["warmup"], result["warmup_ok"] = args.warmup, warmup.get("ok", 0)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.bare.loadgen", description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--run", default="")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(main_async(args))), flush=True)


if __name__ == "__main__":
    main()
