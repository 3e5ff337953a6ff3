"""The fib benchmark's job (Dramatiq's benchmarks/bench.py, ported: dramatiq_bench.py),
in a module that imports only redis: Celery and Dramatiq wrap it there, and RQ runs
it from here, as an RQ project's jobs module would be. RQ's work horse imports a
job's module itself when its worker has not, and dramatiq_bench.py imports Celery
and Dramatiq, which every forked job would then pay for."""

import redis

counter_key = "latench-bench-counter"
ids_key = counter_key + ":ids"
client = redis.Redis()


def fib_bench(n, i):
    p, q = 0, 1
    while n > 0:
        p, q = q, p + q
        n -= 1

    pipe = client.pipeline(transaction=False)
    pipe.incr(counter_key)
    pipe.sadd(ids_key, i)
    pipe.execute()
    return p
