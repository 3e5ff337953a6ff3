"""What every command shares: the one error handler (exit codes 0, 1, 2, 130),
the console, the results directory option, and a command's options made from
the one model that declares them (with_options)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_args, get_type_hints

import typer

from lab import load_params
from labctl.config import RESULTS_HELP, Opt
from labctl.errors import EXIT_INTERRUPTED, EXIT_PARAMS, LabError, ParamError
from labctl.render.console import Console

ResultsDir = Annotated[Path, typer.Option("--results-dir", help=RESULTS_HELP)]


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


def model_options(model: type[Any]) -> dict[str, tuple[Any, Any]]:
    """A model's command-line options: name -> (annotation, default) of each dataclass field
    marked with an Opt; one without a default is required. A field whose default is made
    when the model is (a knob: its env var, else the env files, else the lab's) defaults to
    None here, and is left out when not given."""
    hints = get_type_hints(model, include_extras=True)
    table: dict[str, tuple[Any, Any]] = {}
    for f in dataclasses.fields(model):
        opt = next((m for m in getattr(hints[f.name], "__metadata__", ()) if isinstance(m, Opt)), None)
        if opt is None:
            continue
        kind = get_args(hints[f.name])[0]
        option = functools.partial(
            typer.Option, *opt.flags, help=opt.help, envvar=opt.envvar, min=opt.min, parser=opt.parser
        )
        if f.default_factory is not dataclasses.MISSING:
            table[f.name] = (Annotated[kind | None, option(show_default=_shown(f.default_factory))], None)
        else:  # a field without a default is a required option
            default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            table[f.name] = (Annotated[kind, option()], default)
    return table


def _shown(make: Callable[[], Any]) -> str | bool:
    """A knob's value as --help shows it; none when the env files hold a bad one (the command says so)."""
    try:
        return str(make())
    except ParamError:
        return False


def with_options(
    model: type[Any], name: str = "options", **replaced: tuple[Any, Any]
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A command that takes a model's options (model_options; some `replaced`: name ->
    (annotation, default)) after its own parameters, called with the model made of them as
    `name`; an option not given (None) takes the model's default, and a replaced option's
    value is also passed as is."""
    table = {**model_options(model), **replaced}

    def decorate(fn: Callable[..., int]) -> Callable[..., int]:
        params = inspect.signature(fn, eval_str=True).parameters.values()
        own = [p for p in params if p.name != name and p.name not in table]
        added = [
            inspect.Parameter(option, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            for option, (annotation, default) in table.items()
        ]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> int:
            given = {option: kwargs.pop(option) for option in table}
            kwargs.update({k: given[k] for k in replaced})
            return fn(**{name: model(**{k: v for k, v in given.items() if v is not None})}, **kwargs)

        signature = inspect.Signature([*own, *added])
        command.__signature__ = signature  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        return command

    return decorate
