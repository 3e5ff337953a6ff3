"""The lab's processes: the API, the queue monitor, the stand-ins (probe,
upstream) and the bench's bare baseline. They stand on lab/ and workers/."""
