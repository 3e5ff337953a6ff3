"""What `make stack-up` and the experiments read from a Swarm, from the docker CLI's
own output (labctl/platform/swarm.py, labctl/platform/docker.py): a task pruned
between two calls, a service whose tasks keep failing, where each service runs,
the port forwarder's addresses. Pure functions over captured output, no Docker."""

import subprocess

import pytest

from labctl.errors import DockerError
from labctl.platform import docker
from labctl.platform import swarm as W

T0 = 1_800_000_000.0


def task(state: str, desired: str = "running", at: float = T0 + 10, err: str | None = None, slot: int = 1) -> dict:
    when = W.datetime.fromtimestamp(at, W.datetime.now().astimezone().tzinfo).isoformat()
    status = {"State": state, "Timestamp": when, **({"Err": err} if err else {})}
    return {"Status": status, "DesiredState": desired, "Slot": slot}


def test_a_task_pruned_between_listing_and_inspecting_is_left_out():
    found = subprocess.CompletedProcess([], 1, '[{"ID": "a"}]\n', "Error: No such object: b\n")
    assert docker.present(found) == [{"ID": "a"}]
    gone = subprocess.CompletedProcess([], 1, "[]\n", "Error: No such object: a\nError: No such object: b\n")
    assert docker.present(gone) == []
    other = subprocess.CompletedProcess(
        [], 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock\n"
    )
    with pytest.raises(DockerError, match="Cannot connect"):
        docker.present(other)


def test_a_rejected_service_is_named_with_its_error_and_given_up_after_a_few_tasks():
    image = "No such image: grafana/grafana:12.4.11"
    once = [task("rejected", "shutdown", err=image), task("pending")]
    state, errors = W.service_state(once, 1, since=T0)
    assert state == f"0/1, 1 task(s) ended: rejected: {image}" and errors == [f"rejected: {image}"]
    thrice = [task("rejected", "shutdown", at=T0 + i, err=image) for i in range(1, 4)] + [task("pending")]
    assert W.service_state(thrice, 1, since=T0)[0].endswith("(keeps failing)")
    # Failures from before the wait began (an earlier deploy's) do not count.
    assert not W.service_state(thrice, 1, since=T0 + 100)[0].endswith("(keeps failing)")


def test_a_service_at_its_replicas_is_converged_and_one_still_stopping_is_not():
    assert W.service_state([task("running"), task("failed", "shutdown", err="exit 1")], 1, since=T0)[0] is None
    state, _ = W.service_state([task("running"), task("running", "shutdown", slot=2)], 1, since=T0)
    assert state == "1/1 (1 stopping)"
    # A task that failed once while another runs is no reason to give up.
    failed = [task("failed", "shutdown", at=T0 + i, err="unhealthy") for i in range(5)]
    assert "keeps failing" not in W.service_state([*failed, task("running")], 2, since=T0)[0]


def test_where_each_service_runs_is_read_from_stack_ps():
    text = (
        "lab_celery.1 node-4 Running 2 minutes ago\n"
        "lab_celery.2 node-5 Running 2 minutes ago\n"
        "lab_api.1 node-2 Running 3 minutes ago\n"
        "lab_saq.1 node-4 Preparing 1 second ago\n"
        "other_api.1 node-1 Running 1 hour ago\n"
    )
    placement = W.placement_of(text, "lab")
    assert placement == {"api": ["node-2"], "celery": ["node-4", "node-5"]}
    assert W.by_node(placement) == {"node-2": ["api"], "node-4": ["celery"], "node-5": ["celery"]}


def test_the_forwarders_addresses_are_where_it_publishes():
    cmd = ["python", "-m", "services.port_forward", "19090=prometheus:9090", "5555=flower:5555"]
    bindings = {
        "19090/tcp": [{"HostIp": "10.0.9.2", "HostPort": "19090"}],
        "5555/tcp": [{"HostIp": "", "HostPort": ""}],
    }
    assert W.forwards_of(cmd, bindings) == {("prometheus", 9090): "10.0.9.2:19090", ("flower", 5555): "127.0.0.1:5555"}


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("task-queue-lab:local", None),
        ("library/redis:7", None),
        ("registry:5000/task-queue-lab:local", "registry:5000"),
        ("registry.example/lab/task-queue-lab:1", "registry.example"),
        ("localhost/lab:1", "localhost"),
    ],
)
def test_an_image_in_a_registry_is_told_from_a_local_tag(image, registry):
    assert W.registry_of(image) == registry


def test_a_record_of_a_run_on_several_nodes_names_where_the_api_and_the_workers_ran():
    from labctl.records.run import RunRecord
    from labctl.render.run_table import notes_of

    placement = {"api": ["node-2"], "celery": ["node-4", "node-5"], "redis": ["node-1"]}
    platform = {"orchestrator": "swarm", "nodes": 5, "placement": placement}
    record = RunRecord(run="r", worker="celery", platform=platform)
    assert notes_of(record) == "swarm, 5 node(s): api node-2, celery node-4+node-5"
    one = RunRecord(run="r", worker="celery", platform={**platform, "nodes": 1, "placement": {"api": ["a"]}})
    assert notes_of(one) == "swarm, 1 node(s)"


def test_an_update_that_replaces_every_task_waits_for_the_new_ones():
    def made(at: float) -> dict:
        t = task("running")
        t["CreatedAt"] = W.datetime.fromtimestamp(at, W.datetime.now().astimezone().tzinfo).isoformat()
        return t

    old, new = made(T0 - 60), made(T0 + 5)
    assert W.service_state([old, new], 2, since=T0)[0] is None  # a scale: any running task counts
    assert W.service_state([old, new], 2, since=T0, replaced=True)[0] == "1/2"
    assert W.service_state([new, made(T0 + 6)], 2, since=T0, replaced=True)[0] is None
