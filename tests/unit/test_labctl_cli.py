"""labctl's command line without running an experiment: every command has its
--help, every make target's line parses as its command's options, the exit codes
(2 bad parameters, 1 a failed experiment, 130 interrupted), and the shared
plumbing (the one wait, the one console)."""

import io
import itertools
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from typer.main import get_command

from labctl.app import app, main
from labctl.experiments.compare.options import run_options
from labctl.polling import Progress, wait_until
from labctl.render.console import Console

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = sorted(get_command(app).commands)  # type: ignore[attr-defined]
# Each target with the parameters the README shows for it.
MAKE_LINES = [
    ("load", "worker=arq", "endpoint=io/simple", "users=10", "iterations=100", "run=x", "wait=1", "drain_watch=30"),
    ("load", "scenario=upstream", "variant=async-blocking", "users=50", "duration=60s", "locust_workers=3"),
    ("load", "scenario=clients", "mode=model", "count=40000", "drain_timeout=30", "drain_stall=10"),
    ("locust-ui", "worker=arq", "endpoint=io/simple", "run=x"),
    ("results", "full=1", "last=5"),
    ("report", "run=x"),
    ("sweep", "worker=arq", "cpus=0.2 0.5", "mems=200M 500M", "iterations=2000", "services=api redis arq"),
    ("compare", "workers=arq saq", "requests=200", "reps=2", "users=100", "endpoint=io/simple", "spawn=50"),
    ("compare", "locust_workers=2", "backlog_wait_s=180"),
    ("bench", "worker=saq", "requests=300", "users=20", "warmup=50", "rounds=2", "drain_s=4", "drain_window_s=1"),
    ("bench", "backlog_wait_s=0"),
    ("chaos", "worker=arq", "fault=kill-worker", "at=3", "hold=5", "drain_watch=60"),
    ("chaos", "worker=celery", "fault=kill-node", "node=node-5", "hold=60"),
    ("stack-up", "services=api redis"),
    ("stack-down",),
    ("cluster-down",),
    ("cluster-env",),
    ("scale", "worker=celery", "replicas=1 2", "requests=300", "users=20", "endpoint=io/simple"),
    ("scale", "worker=celery", "nodes=1 2 3", "per_node=2", "requests=300"),
    ("limits",),
    ("claims", "quick=1", "only=saq_simple,rq_doc", "setups=unlimited"),
    ("claims", "scale=0.5", "reps=3"),
    ("claims", "report=claims-20261128-120044"),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_its_help(command, capsys):
    assert main([command, "--help"]) == 0
    assert "Usage:" in capsys.readouterr().out


@pytest.mark.parametrize("line", MAKE_LINES, ids=lambda line: " ".join(line))
def test_each_make_target_passes_options_its_command_takes(line):
    out = subprocess.run(["make", "-n", *line], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    [call] = [c for c in out.replace("\\\n", " ").splitlines() if "python -m labctl" in c]
    argv = shlex.split(call.split("python -m labctl", 1)[1])
    group = get_command(app)
    command = group.get_command(group.make_context("labctl", list(argv)), argv[0])  # type: ignore[attr-defined]
    ctx = command.make_context(argv[0], argv[1:])  # raises on an option the command does not take
    given = {name.split("=")[0] for name in line[1:]}
    assert all(isinstance(value, str | int | float | bool | list | Path | None) for value in ctx.params.values())
    assert len(argv) > 1 or not given


def test_an_option_declared_in_its_model_reaches_the_experiment_typed(monkeypatch, tmp_path):
    """make compare's and make load's options are their models' fields (labctl/config.py Opt):
    a value on the command line arrives as the field's type, under the field's name; an option
    left out takes the model's default, a knob's from its env var, else the env files."""
    seen: list = []
    monkeypatch.setattr(
        "labctl.experiments.compare.compare", lambda options, lab, ui, measure: seen.append(options) or 0
    )
    monkeypatch.setattr("labctl.commands.compare.orchestrator", lambda: None)
    monkeypatch.setattr("labctl.experiments.load.load", lambda options: seen.append(options) or 0)
    env_file = tmp_path / "lab.env"
    env_file.write_text("LOCUST_WORKERS=4\nLOAD_DRAIN_WATCH_S=7\n")
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(env_file))
    monkeypatch.delenv("LOCUST_WORKERS", raising=False)
    monkeypatch.delenv("LOAD_DRAIN_WATCH_S", raising=False)
    assert main(["compare", "--duration", "30", "--reps", "4", "--no-warmup-run", "--results-dir", str(tmp_path)]) == 0
    monkeypatch.setenv("LOCUST_WORKERS", "3")
    assert main(["load", "--worker", "arq", "--drain-watch", "9", "--duration", "2m", "--users", "7"]) == 0
    compare, load = seen
    assert (compare.duration_s, compare.rounds, compare.warmup_run, compare.results_dir) == (30.0, 4, False, tmp_path)
    assert (compare.users, compare.max_rounds, compare.locust_workers) == (100, 8, 4)  # defaults; the env file's
    assert (load.worker, load.drain_watch, load.locust_workers, load.drain_stall) == ("arq", 9.0, 3, 120.0)
    assert (load.duration, load.users, load.rate) == (120.0, 7, None)  # `2m` parsed once, at the command line
    # ...and a comparison's run gets them as numbers too, not text to parse again.
    run = run_options(compare, "arq", "r1")
    assert (run.duration, run.users, run.iterations, run.parse().duration_s) == (30.0, 100, None, 30.0)
    assert main(["chaos", "--worker", "arq"]) == 2  # --fault has no default: required


@pytest.mark.parametrize(
    ("brokers", "profiles"), [("rabbitmq", "rabbitmq"), ("rabbitmq postgres", "rabbitmq,postgres"), ("", "")]
)
def test_brokers_become_the_compose_profiles_make_exports(brokers, profiles):
    """make up BROKERS="rabbitmq postgres" starts both brokers' profiles."""
    show = 'lab-show-profiles: ; @echo "$(COMPOSE_PROFILES)"'
    out = subprocess.run(
        ["make", "-s", "--eval", show, "lab-show-profiles", f"BROKERS={brokers}"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "COMPOSE_PROFILES"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == profiles


def test_the_exit_codes(tmp_path, monkeypatch, capsys):
    assert main(["report"]) == 2  # no run=
    assert main(["load", "--locust-workers", "0"]) == 2
    assert main(["load", "--worker", "kafka", "--results-dir", str(tmp_path)]) == 2
    assert "worker='kafka'" in capsys.readouterr().err
    # A number that is not one is refused at the command line, naming the option.
    assert main(["load", "--worker", "arq", "--duration", "soon", "--results-dir", str(tmp_path)]) == 2
    assert "--duration" in (err := capsys.readouterr().err) and "duration='soon'" in err
    assert main(["load", "--worker", "arq", "--users", "many", "--results-dir", str(tmp_path)]) == 2
    assert "--users" in capsys.readouterr().err
    assert main(["report", "--run", "nowhere", "--results-dir", str(tmp_path)]) == 1
    assert "no run record" in capsys.readouterr().err

    def interrupted(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr("labctl.views.results.show_results", interrupted)
    assert main(["results", "--results-dir", str(tmp_path)]) == 130
    assert main(["no-such-command"]) == 2


def test_wait_until_returns_the_answer_or_the_last_one_at_the_timeout():
    answers = iter([0, 0, 7])
    assert wait_until(lambda: next(answers), timeout_s=5, every_s=0.01) == 7
    started = time.monotonic()
    assert wait_until(lambda: [], timeout_s=0.1, every_s=0.02) == []
    waited = time.monotonic() - started
    assert 0.1 <= waited < 30, waited  # its timeout out, and no hang
    calls = []
    assert wait_until(lambda: calls.append(1), timeout_s=None, tries=3, every_s=0) is None and len(calls) == 3
    with pytest.raises(ZeroDivisionError):
        wait_until(lambda: 1 / 0, timeout_s=5)


def test_progress_says_when_a_count_stopped_moving():
    progress = Progress(stall_s=0.05)
    values = itertools.count()

    def moved_and_not_stalled() -> bool:
        """A new value, looked at at once: not stalled. A look that itself took
        stall_s or longer (a busy machine) judges nothing, and is made again."""
        for _ in range(100):
            before = time.monotonic()
            progress.see(next(values))
            stalled = progress.stalled
            if time.monotonic() - before < progress.stall_s:
                return not stalled
        raise AssertionError("no look at the progress came within its stall time")

    assert moved_and_not_stalled()
    deadline = time.monotonic() + 30  # only a hang
    while not progress.stalled:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert progress.still_for > progress.stall_s
    progress.see(progress.last)  # the same value again is no move
    assert progress.stalled
    assert moved_and_not_stalled()


def test_the_console_prints_progress_every_few_seconds_where_no_terminal_reads_it():
    out = io.StringIO()
    ui = Console(file=out)
    assert not ui.tty
    ui.progress(0.25, "1000/4000  25%", force=False)
    ui.progress(0.5, "2000/4000  50%")  # within a few seconds of the last: not printed
    ui.progress(1.0, "4000/4000 100%", force=True)
    ui.progress(0.5, "completed 5/10", label="draining ")
    ui.say("[arq] text as it is: [bold]no markup[/bold], | table | cells |")
    ui.end_progress()
    assert out.getvalue().splitlines() == [
        "[######------------------] 1000/4000  25%",
        "[########################] 4000/4000 100%",
        "[arq] text as it is: [bold]no markup[/bold], | table | cells |",
    ]


def test_on_a_terminal_the_progress_line_is_live_and_messages_go_above_it():
    out = io.StringIO()
    ui = Console(file=out, terminal=True)
    ui.progress(0.5, "2000/4000  50%")
    ui.say("load started at 12:00:00")
    ui.progress(0.75, "3000/4000  75%")
    ui.end_progress()
    ui.say("load done")
    text = out.getvalue()
    assert "load started at 12:00:00" in text and "3000/4000  75%" in text
    assert text.rstrip().endswith("load done") and ui.live is None


def test_chaos_waits_three_task_timeouts_for_its_tasks_unless_told(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(
        "labctl.experiments.chaos.chaos", lambda options, plan, given, ui: seen.append((options, plan, given)) or 0
    )
    assert main(["chaos", "--worker", "arq", "--fault", "oom", "--results-dir", str(tmp_path)]) == 0
    assert main(["chaos", "--worker", "arq", "--fault", "oom", "--drain-stall", "7", "--at", "4"]) == 0
    (first, plan, given), (second, plan2, given2) = seen
    assert not given and first.worker == "arq" and first.results_dir == tmp_path and plan.at == 3
    assert given2 and second.drain_stall == 7 and plan2.at == 4 and plan2.fault == "oom"
    assert plan.hold_s == plan2.hold_s == 5


def test_a_node_fault_lasts_a_minute_unless_told_and_each_fault_acts_where_it_can(monkeypatch):
    from labctl.errors import ParamError
    from labctl.experiments.chaos import run as chaos_run
    from labctl.platform.compose import Compose
    from labctl.platform.swarm import Swarm

    seen = []
    monkeypatch.setattr("labctl.experiments.chaos.chaos", lambda options, plan, given, ui: seen.append(plan) or 0)
    assert main(["chaos", "--worker", "celery", "--fault", "kill-node", "--node", "node-5"]) == 0
    assert main(["chaos", "--worker", "celery", "--fault", "kill-node", "--hold", "90"]) == 0
    assert [(p.hold_s, p.node) for p in seen] == [(60, "node-5"), (90, "")]
    node = chaos_run.ChaosOptions(fault="kill-node", hold=60)
    with pytest.raises(ParamError, match="kills a node of a Swarm"):
        chaos_run.make_fault(Compose({}), node, "celery", print)
    with pytest.raises(ParamError, match="on a Swarm: fault=kill-node"):
        chaos_run.make_fault(Swarm({}), chaos_run.ChaosOptions(fault="kill-worker"), "celery", print)
    assert chaos_run.make_fault(Swarm({}), node, "celery", print).service == "celery"
