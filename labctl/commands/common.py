"""What every command shares: the one error handler (exit codes 0, 1, 2, 130),
the console, the results directory option, and the options of a load run,
which make load, sweep, scale and chaos all take."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from lab import load_params
from labctl.config import RESULTS_DIR
from labctl.errors import EXIT_INTERRUPTED, EXIT_PARAMS, LabError
from labctl.load_run import options as load_defaults
from labctl.load_run.options import LoadOptions
from labctl.render.console import Console

ResultsDir = Annotated[Path, typer.Option("--results-dir", help="where the records go (and are read)")]


def help_of(doc: str | None) -> str:
    """A module's docstring as a command's --help: its indented blocks (usage lines,
    lists) kept as written (click's \\b), its prose wrapped."""
    paragraphs = (doc or "").strip().split("\n\n")
    return "\n\n".join(f"\b\n{p}" if "\n " in p or p.startswith(" ") else p for p in paragraphs)


def console() -> Console:
    return Console()


def handled(name: str, on_interrupt: str = "interrupted") -> Callable[[Callable[..., int]], Callable[..., None]]:
    """The one error handler: a command returns its exit code; a LabError prints its
    message and exits 1 (2 for bad parameters), Ctrl-C exits 130 saying what was kept."""

    def decorate(fn: Callable[..., int]) -> Callable[..., None]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> None:
            try:
                code = fn(*args, **kwargs)
            except load_params.ParamError as exc:
                print(f"make {name}: {exc}", file=sys.stderr)
                code = EXIT_PARAMS
            except LabError as exc:
                print(f"\nmake {name}: {exc}", file=sys.stderr)
                code = exc.exit_code
            except KeyboardInterrupt:
                print(f"\n{on_interrupt}", file=sys.stderr)
                code = EXIT_INTERRUPTED
            if code:
                raise typer.Exit(code)

        return run

    return decorate


def _option(default: Any, annotation: Any, *decls: str, **info: Any) -> tuple[Any, Any]:
    return Annotated[annotation, typer.Option(*decls, **info)], default


LOAD_OPTIONS: dict[str, tuple[Any, Any]] = {
    "scenario": _option("", str, "--scenario", help="queue (default), upstream, clients, payload"),
    "worker": _option("", str, "--worker", help="queue runs: a queue of lab/queues.py, background, all, or a,b"),
    "endpoint": _option(
        "", str, "--endpoint", help="queue runs: io/simple (default)|io/sync|io/thread|cpu/simple|cpu/process|all|a,b"
    ),
    "users": _option("", str, "--users", help="Locust users (default 100)"),
    "spawn": _option("", str, "--spawn", help="users started per second (default 100)"),
    "iterations": _option("", str, "--iterations", help="exactly this many requests (default: lab/load_params.py's)"),
    "duration": _option("", str, "--duration", help="or send for this long: 60s, 2m"),
    "run": _option("", str, "--run", help="the ledger's run name (default: generated)"),
    "variant": _option("", str, "--variant", help="upstream: async-blocking|async-threadpool|sync-def|async-native"),
    "mode": _option("", str, "--mode", help="clients: model (default)|prejson"),
    "count": _option("", str, "--count", help="clients: how many (default 1000)"),
    "size": _option("", str, "--size", help="payload: bytes (default 1024)"),
    "rate": _option(
        "",
        str,
        "--rate",
        help="the open model: requests/s on a fixed schedule for the duration, latency from each scheduled time",
    ),
    "locust_workers": _option(
        load_defaults.LOCUST_WORKERS,
        int,
        "--locust-workers",
        envvar="LOCUST_WORKERS",
        min=1,
        help="Locust worker processes (containers)",
    ),
    "drain_watch": _option(
        load_defaults.DRAIN_WATCH_S,
        float,
        "--drain-watch",
        envvar="LOAD_DRAIN_WATCH_S",
        help="seconds to watch the tasks after the load before ending with the backlog",
    ),
    "wait": _option(
        False, bool, "--wait", envvar="LOAD_WAIT", help="wait until every task settled (at most --drain-timeout)"
    ),
    "drain_timeout": _option(
        load_defaults.DRAIN_TIMEOUT_S,
        float,
        "--drain-timeout",
        envvar="LOAD_DRAIN_TIMEOUT_S",
        help="with --wait: seconds to wait for pending tasks after the load",
    ),
    "drain_stall": _option(
        load_defaults.DRAIN_STALL_S,
        float,
        "--drain-stall",
        envvar="LOAD_DRAIN_STALL_S",
        help="...or until no task settled for this long (seconds)",
    ),
    "results_dir": (ResultsDir, RESULTS_DIR),
}


def with_load_options(**replaced: tuple[Any, Any]) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A command that takes a load run's options: its own parameters, then every one of
    LOAD_OPTIONS (some `replaced`: name -> (annotation, default)), gathered into the
    `options: LoadOptions` it is called with; a replaced option's value is also passed as is."""
    table = {**LOAD_OPTIONS, **replaced}

    def decorate(fn: Callable[..., int]) -> Callable[..., int]:
        params = inspect.signature(fn, eval_str=True).parameters.values()
        own = [p for p in params if p.name != "options" and p.name not in table]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            for name, (annotation, default) in table.items()
        ]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> int:
            given = {name: kwargs.pop(name) for name in table}
            values = {k: v for k, v in given.items() if not (k in replaced and v is None)}
            kwargs.update({k: given[k] for k in replaced})
            return fn(options=LoadOptions(**values), **kwargs)

        signature = inspect.Signature([*own, *added])
        command.__signature__ = signature  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        return command

    return decorate
