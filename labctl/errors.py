"""One family of errors for every command, and the exit code each maps to.

0 ok, 1 the experiment failed or the lab cannot run it, 2 bad parameters,
130 interrupted (Ctrl-C). The command line's one handler (labctl/commands/common.py)
prints the message and exits with the code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_PARAMS = 2
EXIT_INTERRUPTED = 130


class LabError(RuntimeError):
    """An experiment could not be made or failed; the message says why and what to do."""

    exit_code = EXIT_FAILED


class LabNotRunning(LabError):
    """The lab (or a service an experiment needs) is not running: `make up`."""


class DockerError(LabError):
    """A docker command failed or did not finish in time."""


class SwarmError(LabError):
    """The Swarm stack could not be deployed, reached, removed or left."""


class ParamError(LabError, ValueError):
    """A parameter the command refuses, named in the message."""

    exit_code = EXIT_PARAMS
