"""locust/load_params.py, the parameters the load driver and the locustfile share.

Loaded by path: the directory is called `locust`, and importing it as a package
would shadow Locust itself."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from labctl.config import ROOT


def _import_load_params() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lab_load_params", ROOT / "locust" / "load_params.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


load_params = _import_load_params()
