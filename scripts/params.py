"""locust/load_params.py, the parameters the driver and the locustfile share.

Loaded by path: the directory is called `locust`, and importing it as a package
would shadow Locust itself."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _import_load_params():
    spec = importlib.util.spec_from_file_location("lab_load_params", ROOT / "locust" / "load_params.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


load_params = _import_load_params()


def main(argv: list[str]) -> int:
    """`python -m scripts.params worker=arq endpoint=io/simple ...`: exit 2 with the
    reason when the locustfile would refuse these parameters (make locust-ui)."""
    raw = dict(arg.split("=", 1) for arg in argv if "=" in arg)
    try:
        load_params.parse_params({k: v for k, v in raw.items() if v})
    except load_params.ParamError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
