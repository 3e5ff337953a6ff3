"""The versions of the packages named on the command line as installed, and Python's,
as one JSON object (`-` for a package that is not installed)."""

import importlib.metadata as metadata
import json
import sys


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


print(json.dumps({**{p: version(p) for p in sys.argv[1:]}, "python": sys.version.split()[0]}))
