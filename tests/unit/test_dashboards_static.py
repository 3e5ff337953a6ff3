"""Static checks of the Grafana provisioning, the dashboards and the Prometheus
recording rules: no Docker, no Grafana, no Prometheus server.

Every metric a panel (or a recording rule) queries must be one of:
  * the lab's documented metrics: the metrics table of docs/metrics.md (a
    table whose header starts with `metric` and whose first column holds the
    names in backticks), which must name every metric lab/metrics.py and
    lab/cgroup.py export (test_every_metric_the_code_exports_is_documented);
  * a named exporter's metric (EXPORTERS below);
  * a recording rule of prometheus/rules/*.yml.

Every label a query selects or groups by must be one its series carry: the
labels column of that table (plus job and instance) for the lab's metrics,
what a recording rule keeps for its own.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.compose import panels as panels_mod  # Grafana's variable substitution, reused

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "grafana"
DASHBOARD_DIR = GRAFANA / "dashboards"
PROVISIONING = GRAFANA / "provisioning"
RULES_DIR = ROOT / "prometheus" / "rules"
METRICS_DOC = ROOT / "docs" / "metrics.md"
DASHBOARD_MOUNT = "/var/lib/grafana/dashboards"  # docker-compose.yml mounts grafana/dashboards there
HOME_DASHBOARD = "queues.json"
GRAFANA_DS = {"type": "grafana", "uid": "-- Grafana --"}

# Metrics the lab's own code does not define, by the exporter that produces them.
EXPORTERS: dict[str, set[str]] = {
    "redis_exporter (oliver006/redis_exporter)": {
        "redis_up",
        "redis_commands_processed_total",
        "redis_commands_total",
        "redis_memory_used_bytes",
        "redis_memory_max_bytes",
        "redis_connected_clients",
        "redis_blocked_clients",
        "redis_db_keys",
        "redis_db_keys_expiring",
        "redis_key_size",
        "redis_cpu_sys_seconds_total",
        "redis_cpu_user_seconds_total",
        "redis_keyspace_hits_total",
        "redis_keyspace_misses_total",
    },
    # Seen answering in the RabbitMQ dashboard's test (tests/compose/test_rabbitmq.py).
    "rabbitmq_prometheus (RabbitMQ's own plugin, its aggregated /metrics)": {
        "rabbitmq_global_messages_received_total",
        "rabbitmq_global_messages_confirmed_total",
        "rabbitmq_global_messages_delivered_total",
        "rabbitmq_global_messages_acknowledged_total",
        "rabbitmq_queue_messages_ready",
        "rabbitmq_queue_messages_unacked",
        "rabbitmq_connections",
        "rabbitmq_channels",
        "rabbitmq_consumers",
        "rabbitmq_process_resident_memory_bytes",
        "rabbitmq_resident_memory_limit_bytes",
        "rabbitmq_erlang_processes_used",
        "rabbitmq_erlang_scheduler_context_switches_total",
    },
    # Seen answering in the PostgreSQL dashboard's test (tests/compose/test_postgres.py).
    "postgres_exporter (prometheuscommunity/postgres-exporter)": {
        "pg_stat_database_xact_commit",
        "pg_stat_database_xact_rollback",
        "pg_stat_database_tup_inserted",
        "pg_stat_database_tup_updated",
        "pg_stat_database_tup_deleted",
        "pg_stat_database_tup_returned",
        "pg_stat_database_numbackends",
        "pg_locks_count",
        "pg_database_size_bytes",
    },
    "flower": {
        "flower_events_total",
        "flower_task_runtime_seconds",
        "flower_task_prefetch_time_seconds",
        "flower_worker_prefetched_tasks",
        "flower_worker_online",
        "flower_worker_number_of_currently_executing_tasks",
    },
    "prometheus-fastapi-instrumentator": {
        "http_requests_total",
        "http_request_duration_seconds",
        "http_request_duration_highr_seconds",
        "http_requests_inprogress",
        "http_request_size_bytes",
        "http_response_size_bytes",
    },
    "prometheus (the server's own per-target series)": {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_series_added",
    },
    "prometheus_client (process collector of every lab process)": {
        "process_start_time_seconds",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    },
    "locust listener (grafana/README.md)": {
        "locust_users",
        "locust_requests_total",
        "locust_failures_total",
        "locust_response_time_seconds",
    },
}
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")
# Grafana unit ids the dashboards may use, or a custom "suffix:<text>" (Grafana adds the space).
UNITS = {"short", "none", "s", "ms", "bytes", "percent", "percentunit", "reqps", "ops"}
CUSTOM_UNIT = re.compile(r"(suffix|prefix):\S.*")


DASHBOARD_FILES = sorted(DASHBOARD_DIR.glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def all_panels(dashboard: dict) -> list[dict]:
    """Every panel, rows and their nested panels included."""
    out = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def queries(dashboard: dict):
    """(panel, target, expr with the dashboard's default variable values)."""
    values = panels_mod.dashboard_values(dashboard)
    for panel in panels_mod.iter_panels(dashboard):
        for target in panel.get("targets", []):
            yield panel, target, panels_mod.substitute(target["expr"], values)


# --- PromQL: the metric names a query reads ------------------------------------------
KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "inf",
    "nan",
    "atan2",
}


def metric_names(expr: str) -> set[str]:
    s = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)  # string literals
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)  # label lists
    names = set()
    for m in re.finditer(r"(?<![\w:.])([A-Za-z_:][\w:]*)", s):
        name = m.group(1)
        if name.lower() in KEYWORDS or re.match(r"\s*\(", s[m.end() :]):  # function or aggregation
            continue
        names.add(name)
    return names


def test_metric_name_extraction():
    assert metric_names('sum by (queue) (rate(lab_enqueued_total{queue=~"a|b"}[5m]))') == {"lab_enqueued_total"}
    assert metric_names("histogram_quantile(0.95, sum by (le) (rate(x_bucket[15s]))) / on(job) group_left y") == {
        "x_bucket",
        "y",
    }
    assert metric_names('label_replace(a:b:c, "q", "$1", "job", "(arq|saq)") or vector(0) * 1e3') == {"a:b:c"}
    assert metric_names("sum(up == bool 0) offset 5m") == {"up"}


# --- the documented metrics -------------------------------------------------------
def readme_metrics(text: str) -> set[str]:
    """Names in backticks in the first column of a metrics table (docs/metrics.md)."""
    names: set[str] = set()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("|"):
            i += 1
            continue
        block = []
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            block.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
            i += 1
        if len(block) < 3 or block[0][0].strip("` ").lower() not in ("metric", "metrics"):
            continue
        for row in block[2:]:  # header, separator, rows
            names.update(re.findall(r"`([A-Za-z_:][\w:]*)", row[0]))
    return names


def documented_metrics() -> tuple[set[str], str]:
    names = readme_metrics(METRICS_DOC.read_text())
    assert names, (
        "docs/metrics.md has no metrics table (header `| metric | type | labels | "
        "exported by | meaning |`, names in backticks in the first column)"
    )
    return names, "docs/metrics.md metrics table"


def test_every_metric_the_code_exports_is_documented():
    """lab/metrics.py's metrics and the cgroup collector's families (lab/cgroup.py)."""
    from prometheus_client.metrics import MetricWrapperBase

    import lab.metrics

    exported = {
        m._name + ("_total" if m._type == "counter" else "")
        for m in vars(lab.metrics).values()
        if isinstance(m, MetricWrapperBase)
    }
    cgroup = (ROOT / "lab" / "cgroup.py").read_text()
    families = re.findall(r"\(\s*(Counter|Gauge)MetricFamily,\s*\"(\w+)\"", cgroup)
    assert len(families) >= 5, families
    exported |= {name + ("_total" if kind == "Counter" else "") for kind, name in families}
    documented, source = documented_metrics()
    assert not exported - documented, f"exported, not in the {source}: {sorted(exported - documented)}"


def test_readme_table_parser():
    text = (
        "intro\n\n| metric | type | labels | exported by | meaning |\n| --- | --- | --- | --- | --- |\n"
        "| `lab_enqueued_total` | counter | queue | api | x |\n"
        "| `lab_task_duration_seconds` | histogram | queue | workers | y |\n\n"
        "| setting | default |\n| --- | --- |\n| `CPU_WORK` | 1 |\n"
    )
    assert readme_metrics(text) == {"lab_enqueued_total", "lab_task_duration_seconds"}


def recorded_metrics() -> set[str]:
    return {
        rule["record"]
        for path in sorted(RULES_DIR.glob("*.yml"))
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    }


def known(name: str, allowed: set[str]) -> bool:
    if name in allowed:
        return True
    return any(name.endswith(suffix) and name[: -len(suffix)] in allowed for suffix in SUFFIXES)


# --- provisioning ------------------------------------------------------------------
def datasources() -> list[dict]:
    out = []
    for path in sorted((PROVISIONING / "datasources").glob("*.y*ml")):
        doc = yaml.safe_load(path.read_text())
        assert doc["apiVersion"] == 1, path
        out.extend(doc.get("datasources", []))
    return out


def prometheus_uid() -> str:
    prom = [ds for ds in datasources() if ds["type"] == "prometheus"]
    assert len(prom) == 1, prom
    return prom[0]["uid"]


def test_datasource_provisioning():
    sources = datasources()
    uids = [ds["uid"] for ds in sources]
    assert len(uids) == len(set(uids)), uids
    (prom,) = [ds for ds in sources if ds["type"] == "prometheus"]
    assert prom["uid"] == "prometheus"
    assert prom["url"] == "http://prometheus:9090"
    assert prom["access"] == "proxy" and prom["isDefault"] is True
    assert re.fullmatch(r"\d+s", prom["jsonData"]["timeInterval"])


def test_dashboard_provisioning():
    files = sorted((PROVISIONING / "dashboards").glob("*.y*ml"))
    assert files
    providers = [p for f in files for p in yaml.safe_load(f.read_text())["providers"]]
    assert len(providers) == 1, providers
    (provider,) = providers
    assert provider["type"] == "file"
    assert provider["folder"] == "Lab"
    assert provider["options"]["path"] == DASHBOARD_MOUNT
    assert (DASHBOARD_DIR / HOME_DASHBOARD).exists()


# --- dashboards --------------------------------------------------------------------
def test_dashboards_exist():
    assert {p.name for p in DASHBOARD_FILES} >= {"queues.json", "api.json", "load.json", "redis.json"}


def test_dashboard_uids_unique_and_titles():
    dashboards = [load(p) for p in DASHBOARD_FILES]
    uids = [d["uid"] for d in dashboards]
    titles = [d["title"] for d in dashboards]
    assert len(set(uids)) == len(uids), uids
    assert len(set(titles)) == len(titles), titles
    assert all(d.get("id") is None for d in dashboards), "provisioned dashboards carry id: null"
    assert load(DASHBOARD_DIR / HOME_DASHBOARD)["title"] == "Queues"


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.stem)
def test_dashboard_structure(path):
    d = load(path)
    uid = prometheus_uid()
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", d["uid"])
    assert 36 <= d["schemaVersion"] <= 41
    assert d["title"] and d["description"] and "lab" in d["tags"]
    ids = [p["id"] for p in all_panels(d)]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {ids}"
    cells = {}
    for panel in all_panels(d):
        g = panel["gridPos"]
        assert all(isinstance(g[k], int) for k in ("h", "w", "x", "y")), panel["title"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]
        assert panel["title"].strip(), panel
        if panel["type"] == "row":
            continue
        assert panel["type"] in ("timeseries", "stat", "gauge", "bargauge", "table"), panel["type"]
        assert panel["datasource"] == {"type": "prometheus", "uid": uid}, panel["title"]
        unit = panel["fieldConfig"]["defaults"].get("unit")
        assert unit in UNITS or CUSTOM_UNIT.fullmatch(unit or ""), f"{panel['title']}: unit {unit!r}"
        assert panel.get("description"), f"{panel['title']}: no description"
        targets = panel["targets"]
        assert targets, panel["title"]
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]
        for t in targets:
            assert t["datasource"] == {"type": "prometheus", "uid": uid}, panel["title"]
            assert t["expr"].strip() and t["legendFormat"].strip(), panel["title"]


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.stem)
def test_run_annotations(path):
    d = load(path)
    runs = [a for a in d["annotations"]["list"] if "lab-run" in a.get("target", {}).get("tags", [])]
    assert len(runs) == 1, "one 'lab-run' annotation query"
    (ann,) = runs
    assert ann["datasource"] == GRAFANA_DS and ann["enable"] is True
    assert ann["target"]["type"] == "tags" and ann["target"]["matchAny"] is False
    for a in d["annotations"]["list"]:
        assert a["datasource"] in (GRAFANA_DS, {"type": "prometheus", "uid": prometheus_uid()})


def test_queues_dashboard_variables_and_legends():
    d = load(DASHBOARD_DIR / "queues.json")
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert {"queue", "variant", "run"} <= set(variables)
    assert variables["queue"]["multi"] is True
    # Every queue the API serves (the registry's), whatever queues there are.
    assert variables["queue"]["type"] == "query"
    assert variables["queue"]["query"]["query"] == "label_values(lab_enqueued_total, queue)"
    assert variables["queue"]["datasource"]["uid"] == "prometheus"
    # run is no metric label: it only filters the annotations, and the description says so.
    assert variables["run"]["type"] in ("textbox", "constant", "custom")
    assert not any("$run" in t["expr"] for _, t, _ in queries(d))
    (ann,) = [a for a in d["annotations"]["list"] if "lab-run" in a.get("target", {}).get("tags", [])]
    assert "$run" in ann["target"]["tags"]
    assert "run" in d["description"] and "annotation" in d["description"]
    for panel, target, _ in queries(d):
        if "$queue" in target["expr"] or "by (queue" in target["expr"]:
            assert "{{queue}}" in target["legendFormat"], (panel["title"], target["legendFormat"])


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.stem)
def test_every_variable_is_defined(path):
    d = load(path)
    for _, _target, expr in queries(d):  # substitute() raises on an unknown variable
        assert "$" not in re.sub(r'"\$\d+"|\$\{\d+\}', "", expr), expr


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.stem)
def test_every_queried_metric_is_known(path):
    documented, source = documented_metrics()
    recorded = recorded_metrics()
    exporters = set().union(*EXPORTERS.values())
    unknown = {}
    for panel, target, expr in queries(load(path)):
        for name in metric_names(expr):
            if not (known(name, documented) or known(name, exporters) or name in recorded):
                unknown.setdefault(name, []).append(f"{panel['title']} [{target['refId']}]")
    assert not unknown, (
        f"metrics neither in the {source}, nor an exporter's (EXPORTERS), nor a recording rule: {unknown}"
    )


def test_every_rule_reads_known_metrics():
    documented, source = documented_metrics()
    recorded = recorded_metrics()
    exporters = set().union(*EXPORTERS.values())
    unknown = {}
    for path in sorted(RULES_DIR.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                for name in metric_names(rule["expr"]):
                    if not (known(name, documented) or known(name, exporters) or name in recorded):
                        unknown.setdefault(name, []).append(rule.get("record") or rule.get("alert"))
    assert not unknown, f"rules read metrics neither in the {source} nor an exporter's: {unknown}"


def test_locust_names_documented():
    text = (GRAFANA / "README.md").read_text()
    for name in EXPORTERS["locust listener (grafana/README.md)"]:
        assert f"`{name}`" in text, name
    assert '"lab-run", "<run>", "<worker>"' in text


# --- labels: a query selects and groups by labels its metrics have --------------------
# A matcher on a label the series lacks matches the empty value: `queues=~".*"`
# keeps every series, `queues=~"arq"` none. Either way the panel shows no error.
TARGET_LABELS = {"job", "instance"}  # Prometheus adds them to every series it scrapes (prometheus/prometheus.yml)
SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\s*\{([^{}]*)\}")
MATCHER = re.compile(r"""([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*(?:"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')""")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
OUTER_AGGREGATION = re.compile(r"\s*(?:sum|max|min|avg|count|group|stddev|stdvar)\s+by\s*\(([^)]*)\)")
# label_replace(v, "dst", "replacement", "src", "regex"): the label it adds.
LABEL_REPLACE_DST = re.compile(r""",\s*"(\w+)"\s*,\s*"[^"]*"\s*,\s*"\w*"\s*,\s*"[^"]*"\s*\)""")


def split_labels(text: str) -> set[str]:
    return {label.strip() for label in text.split(",") if label.strip()}


def documented_labels(text: str) -> dict[str, set[str]]:
    """Series name -> its labels, from the metrics table (columns metric, type,
    labels): a histogram's _bucket, _sum and _count, `le` on its buckets."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|") or len(cells) < 3 or not cells[0].startswith("`"):
            continue
        labels = set() if cells[2] in ("-", "") else split_labels(cells[2])
        for name in re.findall(r"`([A-Za-z_:][\w:]*)`", cells[0]):
            if cells[1] == "histogram":
                out.update({f"{name}_bucket": labels | {"le"}, f"{name}_sum": labels, f"{name}_count": labels})
            else:
                out[name] = labels
    return out


def rule_labels(expr: str, labels_of) -> set[str] | None:
    """The labels of a recording rule's result: those of its outer `by (...)`,
    else those of what it reads (None when one of those is unknown), plus what
    label_replace adds, less `le` after histogram_quantile."""
    outer = OUTER_AGGREGATION.match(expr)
    if outer:
        return split_labels(outer.group(1))
    read = [labels_of(name) for name in metric_names(expr)]
    if not read or any(labels is None for labels in read):
        return None
    labels = set().union(*read) | set(LABEL_REPLACE_DST.findall(expr))
    return labels - {"le"} if "histogram_quantile(" in expr else labels


def rules() -> list[dict]:
    return [
        rule
        for path in sorted(RULES_DIR.glob("*.yml"))
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]


def label_index() -> dict[str, set[str] | None]:
    """Every series a query may read whose labels are known: the documented
    metrics as Prometheus stores them (with job and instance), then the
    recording rules, in order (a rule may read an earlier one)."""
    index: dict[str, set[str] | None] = {
        name: labels | TARGET_LABELS for name, labels in documented_labels(METRICS_DOC.read_text()).items()
    }
    for rule in rules():
        if "record" in rule:
            index[rule["record"]] = rule_labels(rule["expr"], index.get)
    return index


def label_problems(expr: str, labels_of) -> list[str]:
    """Each matcher on a label its series lacks, and each label grouped by
    (by, without, on, ignoring) that none of the series read carries."""
    problems = []
    for selector in SELECTOR.finditer(expr):
        name, have = selector.group(1), labels_of(selector.group(1))
        if have is None:
            continue
        for label in MATCHER.findall(selector.group(2)):
            if label not in have | {"__name__"}:
                problems.append(f"{name} has no label {label!r} (it has {', '.join(sorted(have))})")
    read = [labels_of(name) for name in metric_names(expr)]
    if read and all(labels is not None for labels in read):
        carried = set().union(*read) | set(LABEL_REPLACE_DST.findall(expr))
        for grouping in GROUPING.finditer(expr):
            for label in sorted(split_labels(grouping.group(1)) - carried):
                problems.append(f"groups by {label!r}, which none of {', '.join(sorted(metric_names(expr)))} has")
    return problems


def test_label_checks():
    labels = {"lab_queue_depth": {"queue", "job", "instance"}, "r:x": {"queue", "kind"}}
    assert label_problems('max by (queue) (lab_queue_depth{queue=~".*", job!="x"})', labels.get) == []
    assert label_problems('max by (queue) (lab_queue_depth{queues=~".*"})', labels.get) == [
        "lab_queue_depth has no label 'queues' (it has instance, job, queue)"
    ]
    assert label_problems("sum by (variant) (r:x)", labels.get) == ["groups by 'variant', which none of r:x has"]
    assert label_problems('sum by (q) (label_replace(r:x, "q", "$1", "queue", "(.+)"))', labels.get) == []
    assert label_problems('redis_up{nope="1"}', labels.get) == []  # an exporter's labels are not known here
    text = (
        "| metric | type | labels |\n|---|---|---|\n| `a_total` | counter | queue, kind | x |\n| `h` | histogram | - |"
    )
    assert documented_labels(text) == {
        "a_total": {"queue", "kind"},
        "h_bucket": {"le"},
        "h_sum": set(),
        "h_count": set(),
    }
    assert rule_labels("sum by (queue, le) (rate(h_bucket[10s]))", {}.get) == {"queue", "le"}
    assert rule_labels("histogram_quantile(0.5, q:h_bucket:rate)", {"q:h_bucket:rate": {"queue", "le"}}.get) == {
        "queue"
    }
    assert rule_labels("rate(unknown_total[10s])", {}.get) is None


def test_the_documented_labels_are_those_the_code_gives_each_metric():
    from prometheus_client.metrics import MetricWrapperBase

    import lab.metrics

    documented = documented_labels(METRICS_DOC.read_text())
    for metric in vars(lab.metrics).values():
        if isinstance(metric, MetricWrapperBase):
            name = metric._name + (
                "_total" if metric._type == "counter" else "_sum" if metric._type == "histogram" else ""
            )
            assert documented.get(name) == set(metric._labelnames), (name, documented.get(name), metric._labelnames)


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.stem)
def test_every_label_a_panel_reads_is_one_its_metric_has(path):
    labels = label_index()
    problems = {
        f"{panel['title']} [{target['refId']}]": found
        for panel, target, expr in queries(load(path))
        if (found := label_problems(expr, labels.get))
    }
    assert not problems, problems


def test_every_label_a_rule_reads_is_one_its_metric_has():
    labels = label_index()
    problems = {
        rule.get("record") or rule.get("alert"): found
        for rule in rules()
        if (found := label_problems(rule["expr"], labels.get))
    }
    assert not problems, problems
    # The rules the panels read most have known labels: the check above covers them.
    assert labels["queue_kind_variant:lab_task_completed:rate10s"] == {"queue", "kind", "variant"}
    assert labels["instance:lab_cpu_usage:ratio_rate10s"] == {"service", "job", "instance", "queue"}
