"""The lab as a Docker Swarm stack, derived from docker-compose.yml.

    uv run python -m labctl stack-file [--services "api redis ..."] [--profile load] [--out .stack/lab.yml]

The stack file is `docker compose config` (the compose file with every knob of
the environment and .env applied, as `make up` would start it) with
docker-stack.override.yml merged over it, then turned into what `docker stack
deploy` accepts:

  kept       image, command, entrypoint, environment, healthcheck, init,
             stop_grace_period, deploy.replicas and deploy.resources.limits
  endpoints  deploy.endpoint_mode: dnsrr. A service's name, and tasks.<service>,
             resolve to the address of each replica; a virtual IP needs IPVS,
             which not every kernel has, and the lab never needs one
  ports      x-publish only, in mode: host (the routing mesh needs IPVS too)
  placement  node.labels.lab.role == x-role when some node carries that role
             (a worker's, `worker`, else `lab`'s); else anywhere but the nodes
             labelled `load` or `worker` (the load generator stays apart from what
             it measures, the workers' nodes run the workers alone)
  restart    compose's restart policy as deploy.restart_policy
  files      the bind mounts become Swarm configs (x-configs), named after
             their content, since a config cannot change once created
  dropped    build, pull_policy, depends_on (Swarm starts everything at once:
             each service retries Redis), profiles, host_ip

Prometheus on the stack reads .stack/prometheus.yml: prometheus/prometheus.yml
with every name looked up as tasks.<service> (one address per replica, also
where a cluster gives services a virtual IP), the rules shared as they are.
"""

from __future__ import annotations

import copy
import glob
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from labctl.config import ROOT
from labctl.errors import DockerError, ParamError
from labctl.platform import docker

OVERRIDE = ROOT / "docker-stack.override.yml"
BUILD_DIR = ROOT / ".stack"
PROMETHEUS_CONFIG = ROOT / "prometheus" / "prometheus.yml"
ROLES = ("load", "broker", "lab", "worker", "monitor", "here")
DEFAULT_ROLE = "lab"
# A role no node carries falls back to this one: the queues' workers go where the
# API goes unless some nodes are set apart for them.
FALLBACK = {"worker": "lab"}
APART = ("load", "worker")
RESTART = {"no": "none", "always": "any", "unless-stopped": "any", "on-failure": "on-failure"}
# Service keys `docker stack deploy` takes as compose config writes them.
KEPT = ("image", "command", "entrypoint", "environment", "healthcheck", "init", "stop_grace_period")
STACK_VERSION = "3.8"


# -- The compose side -------------------------------------------------------------------
def compose_config(env: dict[str, str] | None = None, profiles: tuple[str, ...] = ()) -> dict[str, Any]:
    """`docker compose config` as JSON, with the knobs of `env` (default: this
    process's environment; compose adds .env, or COMPOSE_ENV_FILES)."""
    cmd = [*docker.compose_command(), *(x for profile in profiles for x in ("--profile", profile))]
    proc = docker.run([*cmd, "config", "--format", "json"], env=os.environ if env is None else env, check=False)
    if proc.returncode != 0:
        raise DockerError(f"docker compose config failed:\n{proc.stderr.strip()}")
    return cast(dict[str, Any], json.loads(proc.stdout))


def load_override(path: Path = OVERRIDE) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base`: mappings key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# -- One service --------------------------------------------------------------------------
def placement(role: str, node_roles: set[str], here: str | None) -> list[str]:
    """The placement constraints of a service of `role`, given the lab.role labels the nodes carry."""
    if role == "here":
        return [f"node.id == {here}"] if here else ["node.role == manager"]
    for carried in (role, FALLBACK.get(role)):
        if carried in node_roles:
            return [f"node.labels.lab.role == {carried}"]
    # Nodes set apart for the load generator or the queues' workers run nothing else:
    # what the load measures, and the workers' machines when they are counted.
    return [f"node.labels.lab.role != {apart}" for apart in APART if apart in node_roles and apart != role]


def stack_deploy(service: dict[str, Any], role: str, node_roles: set[str], here: str | None) -> dict[str, Any]:
    """deploy: for the stack: compose's replicas and limits, dnsrr, the restart policy, placement."""
    deploy = service.get("deploy") or {}
    out: dict[str, Any] = {"endpoint_mode": "dnsrr"}
    if "replicas" in deploy:
        out["replicas"] = int(deploy["replicas"])
    limits = (deploy.get("resources") or {}).get("limits") or {}
    if limits:
        out["resources"] = {"limits": {k: str(v) for k, v in limits.items() if k in ("cpus", "memory")}}
    out["restart_policy"] = {"condition": RESTART[service.get("restart", "no")]}
    for key, value in deploy.items():  # what the override sets beyond compose
        if key not in ("replicas", "resources", "placement"):
            out[key] = value
    if constraints := placement(role, node_roles, here):
        out["placement"] = {"constraints": constraints}
    return out


def published_ports(name: str, service: dict[str, Any]) -> list[dict[str, Any]]:
    """The x-publish ports in mode host, at the host port compose would publish them on."""
    wanted = service.get("x-publish") or []
    by_target = {int(p["target"]): p for p in service.get("ports") or []}
    missing = [t for t in wanted if t not in by_target]
    if missing:
        raise ParamError(f"{name}: x-publish names port(s) {missing} that docker-compose.yml does not publish")
    return [
        {"target": t, "published": int(by_target[t]["published"]), "protocol": "tcp", "mode": "host"} for t in wanted
    ]


def config_files(name: str, service: dict[str, Any]) -> list[tuple[str, Path]]:
    """(target path in the container, repository file) for each x-configs entry; a
    file of .stack/ is generated first."""
    out = []
    for target, pattern in (service.get("x-configs") or {}).items():
        if target.endswith("/"):
            matches = sorted(glob.glob(str(ROOT / pattern)))
            if not matches:
                raise ParamError(f"{name}: x-configs {pattern} matches no file")
            out += [(target + Path(m).name, Path(m)) for m in matches]
        elif (ROOT / pattern) in GENERATED:
            out.append((target, GENERATED[ROOT / pattern]()))
        else:
            out.append((target, ROOT / pattern))
    return out


def config_name(path: Path) -> str:
    """A Swarm config's name: the file's name and its content's hash (a config is immutable)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    return f"{path.name}-{digest}"


def stack_service(
    name: str, service: dict[str, Any], node_roles: set[str], here: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One service of the stack file, and the configs it uses (name -> file)."""
    out = {key: service[key] for key in KEPT if service.get(key) is not None}
    role = service.get("x-role", DEFAULT_ROLE)
    if role not in ROLES:
        raise ParamError(f"{name}: x-role {role!r} is none of {ROLES}")
    out["deploy"] = stack_deploy(service, role, node_roles, here)
    if ports := published_ports(name, service):
        out["ports"] = ports
    configs = {}
    for target, path in config_files(name, service):
        configs[config_name(path)] = path
        out.setdefault("configs", []).append({"source": config_name(path), "target": target, "mode": 0o444})
    volumes = []
    for mount in service.get("volumes") or []:
        if mount.get("type") == "volume":
            volumes.append(f"{mount['source']}:{mount['target']}")
        elif not service.get("x-configs"):
            raise ParamError(f"{name}: bind mount {mount.get('source')} has no x-configs in {OVERRIDE.name}")
    if volumes:
        out["volumes"] = volumes
    return out, configs


# -- The stack file -----------------------------------------------------------------------
def default_services(config: dict[str, Any]) -> list[str]:
    """What `make up` starts: every service outside a profile."""
    return sorted(name for name, service in config["services"].items() if not service.get("profiles"))


def stack_file(
    config: dict[str, Any],
    override: dict[str, Any],
    services: list[str] | None = None,
    node_roles: set[str] | frozenset[str] = frozenset(),
    here: str | None = None,
) -> dict[str, Any]:
    """The stack file (a dict) for `services` of a `docker compose config`."""
    names = services or default_services(config)
    unknown = [n for n in names if n not in config["services"]]
    if unknown:
        raise ParamError(f"no such compose service(s): {unknown} (are their profiles given?)")
    out: dict[str, Any] = {"version": STACK_VERSION, "services": {}, "configs": {}}
    for name in names:
        service = merged(config["services"][name], (override.get("services") or {}).get(name) or {})
        out["services"][name], configs = stack_service(name, service, set(node_roles), here)
        out["configs"].update({key: {"file": str(path)} for key, path in configs.items()})
    # One overlay network; attachable, so that make stack-up's port forwarder
    # (a plain container) can join it.
    out["networks"] = {"default": {"driver": "overlay", "attachable": True}}
    volumes = {v.split(":")[0] for s in out["services"].values() for v in s.get("volumes", [])}
    if volumes:
        out["volumes"] = {v: {} for v in sorted(volumes)}
    if not out["configs"]:
        del out["configs"]
    return out


def forwarded_ports(
    config: dict[str, Any], override: dict[str, Any], services: list[str] | None = None
) -> list[tuple[str, int, int]]:
    """(service, host port, container port) of what compose publishes and the stack does
    not: make stack-up's port forwarder publishes these on 127.0.0.1 of the manager."""
    out = []
    for name in services or default_services(config):
        published = ((override.get("services") or {}).get(name) or {}).get("x-publish") or []
        for port in config["services"][name].get("ports") or []:
            if int(port["target"]) not in published:
                out.append((name, int(port["published"]), int(port["target"])))
    return out


def prometheus_for_stack(text: str) -> dict[str, Any]:
    """prometheus/prometheus.yml for the stack: each name looked up as tasks.<name>
    (every replica's address), the job label without the `tasks.` prefix."""
    config: dict[str, Any] = yaml.safe_load(text)
    for job in config["scrape_configs"]:
        for sd in job.get("dns_sd_configs", []):
            sd["names"] = [f"tasks.{n}" for n in sd["names"]]
        rules = []
        for rule in job.get("relabel_configs", []):
            rule = dict(rule)
            if rule.get("source_labels") == ["__meta_dns_name"] and rule.get("target_label") == "job":
                rule["regex"] = r"tasks\.(.+)"
            rules.append(rule)
        job["relabel_configs"] = rules
    return config


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML has no type information here: SafeDumper is Any
    """Every value written out in full: no YAML anchors for lists shared in memory."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def write_yaml(path: Path, data: dict[str, Any], header: str) -> None:
    """Written whole, then renamed into place: another process writing or reading the
    same file at once (two test workers, a test beside `make stack-up`) never sees it
    empty or half written, which would also name its Swarm config after the wrong hash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The stack file holds the environment, Grafana's admin password included: mkstemp's 0600.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(header + yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_prometheus_config() -> Path:
    path = BUILD_DIR / "prometheus.yml"
    write_yaml(
        path,
        prometheus_for_stack(PROMETHEUS_CONFIG.read_text()),
        "# Generated by labctl/platform/stack.py from prometheus/prometheus.yml: names as tasks.<service>.\n",
    )
    return path


# The files of .stack/ the override names, and what writes each.
GENERATED = {BUILD_DIR / "prometheus.yml": write_prometheus_config}


@dataclass
class Rendered:
    path: Path  # the stack file
    stack: dict[str, Any]  # its content
    forwards: list[tuple[str, int, int]]  # forwarded_ports()


def render(
    services: list[str] | None = None,
    *,
    profiles: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    node_roles: set[str] | frozenset[str] = frozenset(),
    here: str | None = None,
    out: Path = BUILD_DIR / "lab.yml",
) -> Rendered:
    """Write the stack file (and the files of .stack/ it names) for `services`."""
    config, override = compose_config(env, profiles), load_override()
    stack = stack_file(config, override, services, node_roles, here)
    write_yaml(
        out, stack, "# Generated by labctl/platform/stack.py (make stack-up) from docker-compose.yml: do not edit.\n"
    )
    return Rendered(out, stack, forwarded_ports(config, override, services))
