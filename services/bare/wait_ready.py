"""Wait until the API on this host answers /readyz for a queue (its library imported), then print `ready`.

    python -m services.bare.wait_ready QUEUE

make claims' lab path runs it in the API's container before it sends the load;
after 600 tries, 0.1 s apart, it ends without the line, which the step reads as not ready.
"""

import sys
import time
import urllib.request


def main(queue: str) -> None:
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"http://localhost:8000/readyz?queues={queue}", timeout=2) as r:
                if r.status == 200:
                    print("ready")
                    return
        except Exception:  # not listening yet, or 503 while the queue's library loads
            pass
        time.sleep(0.1)


if __name__ == "__main__":
    main(sys.argv[1])
