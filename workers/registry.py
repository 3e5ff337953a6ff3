"""Which adapter module serves which broker queue. Each module has a `Producer`
(used by the API), `depth()` (used by the queue monitor) and its worker.
Importing this imports every queue library: worker processes import only their own adapter."""

from types import ModuleType

from services.protocol import Queue
from workers import arq_queue, celery_queue, faststream_queue, saq_queue

ADAPTERS: dict[Queue, ModuleType] = {
    Queue.arq: arq_queue,
    Queue.saq: saq_queue,
    Queue.faststream: faststream_queue,
    Queue.celery: celery_queue,
}
