"""The bare workers of `make bench`: `python -m services.bare.worker <queue>`,
one of services/bare/queues.py's BARE: the library's own worker with the lab
worker's settings, on a task that only does INCRBY on `bench:done:<queue>`,
the drain rate a library reaches without the lab's runner, ledger and metrics.
"""

import sys

from lab.settings import get_settings
from services.bare.queues import BARE

if __name__ == "__main__":
    if sys.argv[1:2] not in ([q] for q in BARE):
        sys.exit(f"usage: python -m services.bare.worker {'|'.join(BARE)}")
    BARE[sys.argv[1]].worker(get_settings())
