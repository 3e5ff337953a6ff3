"""GET a URL and print the body: how labctl reads a service that publishes no port,
from inside its container (`docker exec ... python -m services.fetch URL`), e.g. the
liveness probe's /report. Exits non-zero when the request fails."""

import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=10) as reply:
    sys.stdout.write(reply.read().decode())
