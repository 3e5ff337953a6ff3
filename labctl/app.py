"""The lab's one command line: `python -m labctl <command>` (the Makefile's
targets call it). Options read their env var where they name one; an env var
not set is read from the project's .env (or COMPOSE_ENV_FILES), as compose reads
it, before the option's own default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
from typer.main import get_command

from labctl.commands import bench, claims, compare, lab, load, results, tools
from labctl.config import dotenv

app = typer.Typer(
    name="labctl",
    help="The lab's experiments from the host: one subcommand per make target (make help lists them).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
for module in (load, compare, bench, claims, results, lab, tools):
    module.register(app)


def dotenv_defaults(group: Any, values: dict[str, str]) -> dict[str, dict[str, str]]:
    """click's default_map from the env files: for each command, the options whose env var they set."""
    out: dict[str, dict[str, str]] = {}
    for name, command in group.commands.items():
        for param in command.params:
            names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
            for var in names:
                if values.get(var) and param.name:
                    out.setdefault(name, {})[param.name] = values[var]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    command = get_command(app)
    try:
        command.main(
            args=list(argv) if argv is not None else None,
            prog_name="python -m labctl",
            default_map=dotenv_defaults(command, dotenv()),
        )
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
