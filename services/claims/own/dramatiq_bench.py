"""A port of Dramatiq's benchmarks/bench.py (Bogdanp/dramatiq @763b772, LGPL-3.0),
its `fib` benchmark, to what runs here:

- Redis for the broker, as the author's REDIS=1, and for the counter: memcached's
  INCR becomes Redis's, one round trip a job as before; the job also adds its
  index to a set, in the same round trip, so duplicates are counted;
- Celery 5's command line (`celery -A bench.celery_app worker`, then the options);
- RQ added (`rq worker-pool -n 8`), for "much faster than RQ", its job run from
  fib_job.py (the job itself lives there for all three);
- the two halves apart: `enqueue` sends N jobs (the author's loop, timed), then
  `work` starts the worker command and waits for the counter as the author's did
  (Popen -> counter = N, polled every 0.1 s), so the worker alone can be limited.

    python dramatiq_bench.py enqueue --lib dramatiq|celery|rq --count N
    python dramatiq_bench.py work --lib dramatiq|celery|rq --count N [--processes 8]
"""

import argparse
import random
import subprocess
import sys
import time

import celery
import dramatiq
from dramatiq.brokers.redis import RedisBroker
from fib_job import client, counter_key, fib_bench

random.seed(1337)

broker = RedisBroker()
dramatiq.set_broker(broker)
celery_app = celery.Celery(broker="redis:///")


dramatiq_fib_bench = dramatiq.actor(fib_bench)
celery_fib_bench = celery_app.task(name="fib-bench", acks_late=True)(fib_bench)


def enqueue(lib, count):
    if lib == "rq":
        from rq import Queue

        queue = Queue(connection=client)
    start = time.time()
    for i in range(count):
        n = random.randint(1, 200)
        if lib == "celery":
            celery_fib_bench.delay(n, i)
        elif lib == "dramatiq":
            dramatiq_fib_bench.send(n, i)
        else:
            queue.enqueue("fib_job.fib_bench", n, i)
    print(f"Enqueued {count} messages in {time.time() - start} seconds.")


def work(lib, count, processes):
    client.set(counter_key, 0)
    start_time = time.time()
    if lib == "celery":
        subprocess_args = ["celery", "-A", "dramatiq_bench.celery_app", "worker", "-c", str(processes)]
    elif lib == "dramatiq":
        subprocess_args = ["dramatiq", "dramatiq_bench", "-p", str(processes)]
    else:
        subprocess_args = ["rq", "worker-pool", "-n", str(processes)]
    proc = subprocess.Popen(subprocess_args)
    processed = 0
    while processed < count:
        processed = int(client.get(counter_key) or 0)
        time.sleep(0.1)

    duration = time.time() - start_time
    proc.terminate()
    proc.wait()
    print(f"Took {duration} seconds to process {count} messages.")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=("enqueue", "work"))
    parser.add_argument("--lib", choices=("dramatiq", "celery", "rq"), required=True)
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--processes", type=int, default=8)
    args = parser.parse_args()
    if args.phase == "enqueue":
        enqueue(args.lib, args.count)
    else:
        work(args.lib, args.count, args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
