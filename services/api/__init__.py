"""The lab's FastAPI service: enqueues tasks on any queue and reports the ledger."""
