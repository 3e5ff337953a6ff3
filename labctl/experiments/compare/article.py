"""`make compare setting=article`: the published experiment's two settings in one go,
the compose lab restarted under each, then under its own settings again."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from lab.queues import BY_NAME
from labctl.errors import EXIT_FAILED, EXIT_OK, ParamError
from labctl.experiments.compare.comparison import compare_once
from labctl.experiments.compare.options import CompareOptions, check_params, command_line
from labctl.platform.compose import Compose
from labctl.platform.lab import Lab
from labctl.queues import parse_workers
from labctl.records import published
from labctl.records.compare import ArticleRecord
from labctl.records.store import Store
from labctl.render import article_page
from labctl.render.console import Console


def article_env(text: str) -> dict[str, str]:
    """`0.2cpu/200M` as the compose variables that set it for the API and every worker, with the
    article's concurrency for the workers it could set (records/published.py)."""
    cpus, memory = text.split("cpu/")
    env = {"API_CPUS": cpus, "API_MEM": memory, "WORKER_CPUS": cpus, "WORKER_MEM": memory}
    for queue, concurrency in published.CONCURRENCY.items():
        env[BY_NAME[queue].concurrency_knob] = str(concurrency)
    return env


def article(options: CompareOptions, lab: Lab, ui: Console, before: Callable[[list[str]], object] | None = None) -> int:
    """The comparison at each of the article's settings, the compose lab restarted under each
    (only the limits and the concurrency change), then under its own settings again."""
    if not isinstance(lab, Compose):
        raise ParamError("setting=article restarts the lab under the article's limits: the compose lab only")
    queues = parse_workers(options.workers) if options.workers else ["background", *published.QUEUES]
    options = replace(options, endpoint=published.ENDPOINT, users=published.USERS).quickened()
    check_params(options, queues)
    services = lab.running_services()
    name = f"compare-article-{time.strftime('%Y%m%d-%H%M%S')}"
    started, parts, failed = time.monotonic(), [], False
    try:
        for text in published.SETTINGS:
            ui.say(f"\n== the article's setting {text}: the lab restarted under it ({article_env(text)})")
            lab.up(services, extra_env=article_env(text))
            record, part_failed = compare_once(options, queues, lab, ui, f"{name}-{text.replace('/', '-')}", before)
            parts.append(record)
            failed = failed or part_failed
    finally:
        ui.say("\n== the lab restarted under its own settings")
        lab.up(services)
    combined = ArticleRecord(
        run=name,
        time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        command=command_line(queues, options),
        wall_s=round(time.monotonic() - started, 1),
        parts=parts,
    )
    store = Store(options.results_dir)
    combined.report = str(store.path(name, ".html"))
    paths = {
        "json": store.save(combined),
        "md": store.write_text(name, ".md", article_page.article_markdown(combined) + "\n"),
        "html": store.write_text(name, ".html", article_page.article_page(combined)),
    }
    ui.say(f"\n{article_page.article_markdown(combined)}\n")
    ui.say(f"report: {paths['html']}  (table: {paths['md']}, record: {paths['json']})")
    return EXIT_FAILED if failed else EXIT_OK
