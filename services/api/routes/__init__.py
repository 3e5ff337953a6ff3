"""The API's routes, one module per resource. Each module's `router` has paths
relative to the API's prefix, which services/api/app.py sets, once, for all of
them (health and metrics are served at the root):

- tasks.py: POST /incr/{kind}/{variant}/{queue}, enqueue a task;
- runs.py: GET /runs, GET /runs/{run}, the ledger of each run;
- upstream.py, clients.py, payload.py: the event-loop experiments;
- health.py: /healthz, /readyz;
- metrics.py: /metrics.
"""
