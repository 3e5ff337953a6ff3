"""The README and the reference docs follow the lab, not its past.

* Every list of queues names every queue of the queue table (lab/queues.py's
  BROKER_NAMES, plus `background`): a table whose first header cell is
  `queue` has a row for each, and any paragraph, list item, table row or
  code line that names three or more queues names every broker queue
  (`background`, which is no broker, may be left out of a list of the
  brokers). A list that is partial on purpose says so with
  `<!-- partial-queue-list -->` on the line before it.
* Every relative link resolves: the file exists, and a `#anchor` into a
  markdown file is one of its headings.
* Every repository path and `python -m` module the docs name in backticks
  exists, so a moved file cannot leave its old path behind.
* Every Makefile target is in the README as `make <target>`, and the README
  stays a guide: at most MAX_README_LINES lines.

The dated records in docs/results/ are history: their links must resolve,
but their queue lists and paths are those of their day.
Pure file reading: no process, no network.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 320
PARTIAL = "<!-- partial-queue-list -->"
# Top-level folders whose paths the docs name in backticks (`lab/ledger.py`).
REPO_DIRS = (
    "lab",
    "workers",
    "services",
    "labctl",
    "locust",
    "tests",
    "grafana",
    "prometheus",
    "docs",
    ".ci",
    "cluster",
)


def queue_names() -> tuple[str, tuple[str, ...]]:
    """("background", the broker queues), from the queue table wherever it lives."""
    try:
        from lab.queues import BROKER_NAMES
    except ModuleNotFoundError:
        from workers.registry import BROKER_NAMES
    return "background", tuple(BROKER_NAMES)


def guides() -> list[Path]:
    """The documents that describe the lab as it is now."""
    return [README, ROOT / "grafana" / "README.md", *sorted(DOCS.glob("*.md"))]


def every_doc() -> list[Path]:
    return [*guides(), *sorted((DOCS / "results").glob("*.md"))]


# --- markdown units -------------------------------------------------------------
def units(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, text, partial) of every paragraph, list item, heading,
    table row and fenced code line; `partial` when the line before it (or before
    its table) is the PARTIAL marker."""
    lines = text.splitlines()
    out: list[tuple[int, str, bool]] = []
    i = 0
    in_code = False

    def marked(start: int) -> bool:
        return start > 0 and lines[start - 1].strip() == PARTIAL

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            i += 1
            continue
        if in_code:
            out.append((i + 1, line, marked(i)))
            i += 1
            continue
        if not stripped or stripped.startswith("<!--"):
            i += 1
            continue
        if stripped.startswith("|"):
            start = i
            while i < len(lines) and lines[i].strip().startswith("|"):
                if not re.fullmatch(r"\|[\s:|-]*\|?", lines[i].strip()):  # not the separator row
                    out.append((i + 1, lines[i], marked(start)))
                i += 1
            continue
        if stripped.startswith("#"):
            out.append((i + 1, line, marked(i)))
            i += 1
            continue
        # a paragraph, or a list item with its indented continuation lines
        start = i
        item = bool(re.match(r"\s*([-*+]|\d+\.)\s", line))
        i += 1
        while i < len(lines):
            nxt = lines[i]
            s = nxt.strip()
            if not s or s.startswith(("```", "|", "#", "<!--")):
                break
            if re.match(r"\s*([-*+]|\d+\.)\s", nxt) and (item or not nxt.startswith(" ")):
                break  # the next list item
            i += 1
        out.append((start + 1, "\n".join(lines[start:i]), marked(start)))
    return out


def tables(text: str) -> list[tuple[int, list[list[str]], bool]]:
    """(line number, rows of cells without the separator, partial) of every table."""
    lines = text.splitlines()
    found = []
    i = 0
    in_code = False
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("```"):
            in_code = not in_code
        if in_code or not s.startswith("|"):
            i += 1
            continue
        start = i
        rows = []
        while i < len(lines) and lines[i].strip().startswith("|"):
            row = lines[i].strip()
            if not re.fullmatch(r"\|[\s:|-]*\|?", row):
                rows.append([c.strip() for c in re.split(r"(?<!\\)\|", row.strip("|"))])
            i += 1
        found.append((start + 1, rows, start > 0 and lines[start - 1].strip() == PARTIAL))
    return found


def named_queues(text: str, names: tuple[str, ...]) -> set[str]:
    """The queue names a piece of text names, as words (`lab-celery` names
    celery, `workers.arq_queue` names no queue); FastAPI's `BackgroundTasks`
    names `background`."""
    found = set()
    for name in names:
        pattern = r"\bbackground(?:tasks)?\b" if name == "background" else rf"\b{re.escape(name)}\b"
        if re.search(pattern, text, re.IGNORECASE):
            found.add(name)
    return found


def queue_list_problems(text: str, background: str, brokers: tuple[str, ...]) -> list[str]:
    names = (background, *brokers)
    problems = []
    for line, rows, partial in tables(text):
        if partial or not rows or rows[0][0].strip("` *").lower() != "queue":
            continue
        covered = set().union(*(named_queues(r[0], names) for r in rows[1:])) if rows[1:] else set()
        if missing := [n for n in names if n not in covered]:
            problems.append(f"line {line}: the queue table has no row for {missing}")
    for line, unit, partial in units(text):
        found = named_queues(unit, names)
        if partial or len(found) < 3:
            continue
        if missing := [n for n in brokers if n not in found]:
            problems.append(f"line {line}: a list of queues without {missing}: {unit.strip()[:100]!r}")
    return problems


def test_queue_list_check_catches_a_stale_list():
    brokers = ("arq", "saq", "celery", "streaq")
    ok = "Queues: `background`, `arq`, `saq`, `celery` and `streaq`.\n"
    assert queue_list_problems(ok, "background", brokers) == []
    # wrapped over two lines, it is one paragraph
    assert queue_list_problems("BackgroundTasks, arq, SAQ,\nCelery and streaq\n", "background", brokers) == []
    stale = "worker=background|arq|saq|celery\n"
    assert queue_list_problems(stale, "background", brokers) != []
    assert queue_list_problems(f"{PARTIAL}\n{stale}", "background", brokers) == []
    assert queue_list_problems("- arq\n- saq and celery: brokers\n", "background", brokers) == []  # items apart
    assert queue_list_problems("module workers.arq_queue, saq_queue, celery_queue\n", "background", brokers) == []
    table = "| queue | x |\n|---|---|\n| `background` | a |\n| `arq` | b |\n| `saq` | c |\n"
    assert "no row for ['celery', 'streaq']" in queue_list_problems(table, "background", brokers)[0]
    assert queue_list_problems(f"{PARTIAL}\n{table}", "background", brokers) == []
    code = "```\nmake load worker=arq  # or saq, celery\n```\n"
    assert queue_list_problems(code, "background", brokers) != []


@pytest.mark.parametrize("path", guides(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_list_of_queues_names_every_queue(path: Path):
    background, brokers = queue_names()
    assert len(brokers) >= 7, brokers  # the table was read, not an empty stand-in
    problems = queue_list_problems(path.read_text(), background, brokers)
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_readme_has_the_queue_table():
    headers = [rows[0] for _, rows, _ in tables(README.read_text()) if rows and rows[0][0].lower() == "queue"]
    assert headers, "README.md has no table whose first column is `queue`"


# --- links -----------------------------------------------------------------------
def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading.strip().lstrip("#").strip()).lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.strip().startswith("```"):
            in_code = not in_code
        if in_code or not re.match(r"#{1,6}\s", line):
            continue
        slug = github_slug(line)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def without_code(text: str) -> str:
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def link_problems(path: Path) -> list[str]:
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", without_code(path.read_text())):
        if re.match(r"[a-z][a-z+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {dest.name}")
    return problems


def test_link_check_catches_a_broken_link(tmp_path: Path):
    (tmp_path / "b.md").write_text("# Title\n\n## Delivery on a worker's death\n")
    (tmp_path / "a.md").write_text(
        "[ok](b.md) [ok](b.md#delivery-on-a-workers-death) [web](https://example.org/x)\n"
        "[gone](c.md) [bad anchor](b.md#nowhere) `[in code](d.md)`\n"
    )
    assert [p.split(":")[0] for p in link_problems(tmp_path / "a.md")] == ["c.md", "b.md#nowhere"]


@pytest.mark.parametrize("path", every_doc(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path):
    problems = link_problems(path)
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


# --- paths and modules named in backticks -----------------------------------------
def named_paths(text: str) -> list[str]:
    dirs = "|".join(re.escape(d) for d in REPO_DIRS)
    paths = re.findall(rf"`((?:{dirs})/[\w./-]*)`", text)
    return [p for p in paths if "..." not in p]


def named_modules(text: str) -> list[str]:
    """Modules of ours run with `python -m`: lab.ledger, services.api, workers.arq_queue."""
    tops = "|".join(d for d in REPO_DIRS if not d.startswith("."))
    return re.findall(rf"python -m ((?:{tops})(?:\.\w+)+)", text)


def module_exists(module: str) -> bool:
    base = ROOT.joinpath(*module.split("."))
    return base.with_suffix(".py").exists() or (base / "__main__.py").exists()


@pytest.mark.parametrize("path", guides(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_path_and_module_exists(path: Path):
    text = path.read_text()
    gone = [p for p in named_paths(text) if not (ROOT / p).exists()]
    gone += [f"python -m {m}" for m in named_modules(text) if not module_exists(m)]
    assert not gone, f"{path.relative_to(ROOT)} names what does not exist: {gone}"


def test_path_check_sees_paths_and_modules():
    text = "see `lab/queues.py`, `services/api/`, `docs/<x>.md`... and `python -m lab.ledger show`"
    assert named_paths(text) == ["lab/queues.py", "services/api/"]
    assert named_modules(text) == ["lab.ledger"]
    assert not module_exists("services.no_such_module")


# --- the README as a guide ---------------------------------------------------------
def makefile_targets() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    return sorted(set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", text, re.MULTILINE)))


def test_the_readme_names_every_make_target():
    targets = makefile_targets()
    assert {"up", "load", "test"} <= set(targets), targets
    readme = README.read_text()
    missing = [t for t in targets if not re.search(rf"\bmake {re.escape(t)}(?![\w-])", readme)]
    assert not missing, f"README.md never says `make <target>` for {missing}"


def test_the_readme_is_a_short_guide():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: reference material goes to docs/"
    assert lines[0].startswith("# ")
    headings = [line for line in lines if line.startswith("## ")]
    assert headings and headings[0] == "## Quick start", headings[:1]
