"""The lab's shared core, the ground floor every process stands on: the task
message, the settings, the queue table, the ledger, the metrics, the Redis
clients, the task bodies and the runner that executes them. It imports nothing
from workers/, services/ or labctl/."""
