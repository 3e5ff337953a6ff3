"""Enqueue the blog's jobs through one library's module, so the tasks carry the
names its worker knows them by (a library names a task by its module).

    python blog_enqueue.py arq|streaq|taskiq|dramatiq|celery io|cpu N
"""

import importlib
import sys

if __name__ == "__main__":
    lib, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    importlib.import_module(f"blog_{lib}").enqueue(kind, n)
