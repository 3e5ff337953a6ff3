"""The ledger: every task of every run accounted for, in Redis.

- keys.py: the keys it keeps (all under `lab:`), and what it counts;
- ledger.py: Ledger, what the API and the workers call, with the key layout;
- executions.py: the Lua that records executions starting and ending;
- enqueue_counts.py: the enqueues counted in memory and their writer;
- blocking_settle.py: the settle of a worker process with no event loop;
- purge.py: the script that counts a purged queue's pending tasks;
- __main__.py: `python -m lab.ledger reset|show|runs`.
"""

from lab.ledger.blocking_settle import BlockingSettle
from lab.ledger.keys import STATS, run_key, work_key
from lab.ledger.ledger import Ledger, PendingStart

__all__ = ["STATS", "BlockingSettle", "Ledger", "PendingStart", "run_key", "work_key"]
