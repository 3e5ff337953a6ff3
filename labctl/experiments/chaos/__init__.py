"""Fault experiments: a load run (labctl/load_run) with one fault injected
while it runs, then undone; the run's record gains a `chaos` section: lost,
duplicated, failed, time to recover.

    make chaos worker=arq fault=kill-worker [at=3] [hold=5] [duration=18s users=10 endpoint=io/simple]
    make chaos worker=celery fault=kill-node [node=node-5] [hold=60]   (on the cluster of make cluster-up)

For `background` the worker is the API itself: its faults hit the API container.

Faults of a container of the compose project (container.py):
  kill-worker    SIGKILL to the worker container (a crash: nothing can finish)
  stop-worker    SIGTERM to it (`docker stop`: the worker's own graceful shutdown)
  restart-redis  Redis restarted (`docker restart`). Without REDIS_APPENDONLY=yes its
                 data, the ledger included, is gone: the run cannot be accounted for,
                 so this fault refuses to run without it (make up REDIS_APPENDONLY=yes)
  restart-broker the queue's broker restarted: Redis (as restart-redis) or RabbitMQ
                 (its queues are durable and the lab's messages persistent)
  oom            the worker's memory limit lowered to what it uses plus OOM_MARGIN,
                 then a memory hog inside the container (BALLOON) allocates past it:
                 the kernel's OOM killer kills the worker's main process, pointed at
                 it with oom_score_adj 1000 (the biggest process, its usual choice
                 anyway), and the restart policy brings the container back. A lower
                 limit alone proves nothing: the kernel reclaims page cache first and
                 a steady worker allocates too little to be killed.
A fault of a Swarm's node (node.py):
  kill-node      a whole node of the cluster killed (its engine, its containers, its
                 network at once) with the queue's workers on two nodes or more, and
                 started again after `hold` (default 60 s); the section adds when the
                 Swarm saw the node down, ran the queue's replicas again without it
                 and had the node back
After `hold` seconds the fault is undone (container or node started again, limit restored).
Recovery time: from the fault's start until tasks complete again (the ledger's
completed count rises) once the fault is undone or the worker back; for kill-node
from the fault itself (the queue's other workers go on).
"""

from .run import FAULTS, ChaosOptions, chaos, late_fault, set_load_length

__all__ = ["FAULTS", "ChaosOptions", "chaos", "late_fault", "set_load_length"]
