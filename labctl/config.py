"""Where the project is, and the knobs compose reads: the environment first,
then the env files compose reads (the project's .env, or COMPOSE_ENV_FILES)."""

from __future__ import annotations

import os
from pathlib import Path

from dotenv import dotenv_values

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "results"


def dotenv() -> dict[str, str]:
    """KEY=VALUE lines of the env files compose reads: COMPOSE_ENV_FILES when set
    (the compose tests point it at an empty file), else the project's .env. Parsed
    by python-dotenv (quotes, `# comments`, `export`), without expanding ${...}:
    compose expands them, and labctl passes the text on as it is."""
    files = [Path(f) for f in os.environ.get("COMPOSE_ENV_FILES", "").split(",") if f] or [ROOT / ".env"]
    values: dict[str, str] = {}
    for path in files:
        if path.is_file():
            values.update({k: v for k, v in dotenv_values(path, interpolate=False).items() if v is not None})
    return values


def setting(name: str, default: str) -> str:
    """A knob from the environment, else the project's .env (as compose reads it), else the default."""
    return os.environ.get(name) or dotenv().get(name) or default
