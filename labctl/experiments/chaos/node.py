"""kill-node: a whole node of make cluster-up's cluster killed while a load runs
(its engine and everything it runs, its network, at once: the node's container
gets SIGKILL, as a machine loses its power) and started again `hold` seconds
later. A watcher notes when the Swarm saw the node down, when the queue's
workers ran all their replicas again without it (rescheduled elsewhere), and
when the node was back.

The node must run some of the queue's workers. Spread over two nodes (`make
stack-up <QUEUE>_REPLICAS=2` on a cluster with two worker nodes, make cluster-up
nodes=5), the other node goes on working and the Swarm runs the dead node's
replicas there; replicas that share one node (after an earlier kill moved them)
are spread again first. The manager (the Docker CLI's node, where the Locust
master runs) is never killed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from labctl.errors import LabError, ParamError
from labctl.platform.cluster import Cluster
from labctl.platform.swarm import Swarm, by_node, created
from labctl.queues import service_of

WATCH_EVERY_S = 1.0


class NodeWatch(threading.Thread):
    """Polls the Swarm from the fault on: when the node was down, when the service ran
    `want` healthy replicas again without the node's old ones, when the node was back."""

    def __init__(self, swarm: Swarm, service: str, node: str, want: int, injected_at: float):
        super().__init__(daemon=True)
        self.swarm, self.service, self.node, self.want, self.injected_at = swarm, service, node, want, injected_at
        self.restored_at: float | None = None
        self.down_at: float | None = None
        self.rescheduled_at: float | None = None
        self.ready_at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(WATCH_EVERY_S) and not (self.rescheduled_at and self.ready_at):
            try:
                self.look(time.time())
            except LabError:  # the manager did not answer this once: the next look
                continue

    def look(self, now: float) -> None:
        nodes = self.swarm.nodes()
        names = {n["ID"]: n["Description"]["Hostname"] for n in nodes}
        state = next((n["Status"]["State"] for n in nodes if n["Description"]["Hostname"] == self.node), None)
        if self.down_at is None and state == "down":
            self.down_at = now
        if self.restored_at and self.ready_at is None and state == "ready" and self.down_at:
            self.ready_at = now
        if self.rescheduled_at is None:
            # The node's own tasks count only if they started after the fault (it came back first).
            running = [
                t
                for t in self.swarm.running(self.service)
                if names.get(t["NodeID"]) != self.node or created(t) > self.injected_at
            ]
            if len(running) >= self.want:
                self.rescheduled_at = now

    def seconds(self, at: float | None) -> float | None:
        return round(at - self.injected_at, 1) if at else None


class NodeFault:
    """make chaos fault=kill-node [node=node-5]: injects, undoes, and says what it saw."""

    def __init__(self, swarm: Swarm, worker: str, node: str | None, say: Callable[[str], None]):
        self.swarm, self.cluster, self.say = swarm, Cluster(), say
        self.fault = "kill-node"
        self.service = service_of(worker)
        self.node = node or ""
        self.events: dict[str, float] = {}
        self.errors: list[str] = []
        self.on_node: list[str] = []
        self.want = 0
        self.watch: NodeWatch | None = None

    def check(self) -> None:
        """The node one of those that run the queue's workers (spread again first when
        two or more share one node); never the manager."""
        nodes = self.swarm.placement().get(self.service, [])
        if len(set(nodes)) < 2 <= len(nodes):
            self.say(f"chaos: {self.service}'s {len(nodes)} workers share {nodes[0]}: spreading them again ...")
            self.swarm.rebalance(self.service)
            nodes = self.swarm.placement().get(self.service, [])
        if not nodes:
            raise LabError(f"no {self.service} worker runs on the stack: make stack-up")
        manager = self.swarm.hostnames().get(self.swarm.here(), "")
        self.node = self.node or (sorted(set(nodes) - {manager}) or [manager])[-1]
        if self.node == manager:
            raise ParamError(f"node={self.node} is the manager the Docker CLI talks to (the Locust master runs there)")
        if self.node not in nodes:
            raise ParamError(f"node={self.node} runs no {self.service} worker: one of {sorted(set(nodes))}")
        self.want = len(nodes)
        alone = " (all of them: the queue waits for the node)" if set(nodes) == {self.node} else ""
        self.say(
            f"chaos: {self.service}'s {self.want} workers run on {', '.join(nodes)}; {self.node} will be killed{alone}"
        )

    def inject(self) -> None:
        self.on_node = sorted(by_node(self.swarm.placement()).get(self.node, []))
        self.events["injected_at"] = time.time()
        self.cluster.kill(self.node)
        self.watch = NodeWatch(self.swarm, self.service, self.node, self.want, self.events["injected_at"])
        self.watch.start()
        self.say(f"chaos: {self.node} killed (it ran {', '.join(self.on_node)})")

    def restore(self) -> None:
        self.events["restored_at"] = time.time()
        if self.watch is not None:
            self.watch.restored_at = self.events["restored_at"]
        self.cluster.start(self.node)
        self.say(f"chaos: {self.node} started again")

    def resume_from(self) -> float | None:
        """Work counts as resumed once a task completes after the fault: the queue's other
        workers go on while the node is dead."""
        return self.events.get("injected_at")

    def container_state(self) -> dict[str, Any]:
        """The node's part of the chaos section, once the watcher has seen what it could."""
        watch = self.watch
        if watch is None:
            return {"node": self.node}
        watch.join(timeout=60)  # the node back, the replicas rescheduled
        watch.stop.set()
        if watch.rescheduled_at is None:
            self.errors.append(f"{self.service} did not run its {self.want} replicas again while watched")
        return {
            "node": self.node,
            "node_services": self.on_node,
            "node_down_s": watch.seconds(watch.down_at),
            "rescheduled_s": watch.seconds(watch.rescheduled_at),
            "node_ready_s": watch.seconds(watch.ready_at),
            "running": self.swarm.node_states().get(self.node) == "ready",
        }
