"""Where the project is, and the knobs compose reads: the environment first,
then the env files compose reads (the project's .env, or COMPOSE_ENV_FILES)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "results"


def dotenv() -> dict[str, str]:
    """KEY=VALUE lines of the env files compose reads: COMPOSE_ENV_FILES when set
    (the compose tests point it at an empty file), else the project's .env."""
    files = [Path(f) for f in os.environ.get("COMPOSE_ENV_FILES", "").split(",") if f] or [ROOT / ".env"]
    values = {}
    for path in files:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                values[key.strip()] = value.split(" #")[0].strip().strip("'\"")
    return values


def setting(name: str, default: str) -> str:
    """A knob from the environment, else the project's .env (as compose reads it), else the default."""
    return os.environ.get(name) or dotenv().get(name) or default
