"""Where the project is, and the knobs labctl reads beside its options, each
declared once in `Knobs`: the environment first, then the env files compose
reads (the project's .env, or COMPOSE_ENV_FILES), then the default."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from lab.settings import Settings as ProcessSettings
from labctl.errors import ParamError

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "results"
RESULTS_HELP = "where the records go (and are read)"


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


class _ComposeEnvFiles(PydanticBaseSettingsSource):
    """The env files compose reads (dotenv), below the environment."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads them all at once

    def __call__(self) -> dict[str, Any]:
        values = dotenv()
        return {name: values[name.upper()] for name in self.settings_cls.model_fields if values.get(name.upper())}


class Knobs(BaseSettings):
    """The knobs labctl reads beside its options: each env var once, with its default.
    An empty value counts as unset, as in compose's `${X:-default}`."""

    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore")

    # The load driver's defaults (the commands' options and the comparison's read them).
    locust_workers: int = 2  # Locust worker containers, one process (at most one core) each
    load_drain_watch_s: float = 60.0  # how long make load watches the tasks after the load
    load_drain_timeout_s: float = 1200.0  # how long wait=1 (and make compare) waits for a backlog at most
    load_drain_stall_s: float = 120.0  # a wait ends once no task settled for this long
    load_wait: str = ""  # make load waits for every task unless empty or 0
    load_linger_s: float = 4.0  # Locust's processes serve /metrics this long after the result
    locust_ui_port: int = 8089
    task_timeout_s: int = ProcessSettings.model_fields["task_timeout_s"].default  # the processes' own
    worker_cpus: str = "0.2"
    worker_mem: str = "200M"
    # Where the lab runs: its image, the orchestrator, a Swarm stack and a cluster of engines.
    lab_image: str = "task-queue-lab:local"
    lab_orchestrator: str = "auto"
    stack_name: str = "lab"
    stack_publish_ip: str = "127.0.0.1"
    engine_restart: str = ""
    cluster_project: str = "task-queue-lab-cluster"
    cluster_node_cpus: str = "1"
    cluster_node_mem: str = "3g"
    cluster_docker_port: str = "2375"
    cluster_registry_port: str = "5000"
    cluster_roles: str = ""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _ComposeEnvFiles(settings_cls)


def knobs() -> Knobs:
    """The knobs as they are now (read again at each call: tests and commands change the
    environment); a value that is not of its knob's type is refused by the knob's env var."""
    try:
        return Knobs()
    except ValidationError as exc:
        bad = "; ".join(f"{'.'.join(map(str, e['loc'])).upper()}={e['input']!r}: {e['msg']}" for e in exc.errors())
        raise ParamError(f"{bad} (from the environment or the env files compose reads)") from None


class Opt:
    """Marks a field of a command's options model as a command-line option: its help,
    its flags (default: --the-field-name), its env var, the function that parses its
    text where the field's type alone does not (a duration's `2m`).
    labctl/commands/common.py makes the command's options from the model's marked
    fields, so each option is declared once, in its model, and parsed once, at the
    command line."""

    def __init__(
        self,
        help: str,
        *flags: str,
        envvar: str | None = None,
        min: float | None = None,
        parser: Callable[[str], Any] | None = None,
    ) -> None:
        self.help, self.flags, self.envvar, self.min, self.parser = help, flags, envvar, min, parser
