"""The README and docs/ say what the code does: their links resolve, the
README's examples run, the commands they show exist with the options they
show, and the configuration reference, the schedule fields and the package
import rules match the code."""

from __future__ import annotations

import ast
import dataclasses
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- markdown --------------------------------------------------------------------------

FENCE = re.compile(r"^```(\w*)\s*$")


@dataclasses.dataclass
class Block:
    lang: str
    text: str
    line: int  # first line of the code, 1-based


def code_blocks(text: str) -> list[Block]:
    """Fenced blocks with their language, and indented (4-space) blocks as ``""``."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            blocks.append(Block(m.group(1), "\n".join(lines[start:j]), start + 1))
            i = j + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            start = i
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                i += 1
            blocks.append(Block("", "\n".join(s[4:] for s in lines[start:i]), start + 1))
            continue
        i += 1
    return blocks


def prose(text: str) -> str:
    """The text with fenced code blocks blanked (line numbers kept)."""
    out, inside = [], False
    for line in text.splitlines():
        if FENCE.match(line) or (inside and line.startswith("```")):
            inside = not inside
            out.append("")
            continue
        out.append("" if inside else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path, text: str | None = None) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose(path.read_text() if text is None else text).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]+\.md(?:#[\w-]+)?")


def links(path: Path, text: str | None = None) -> Iterator[tuple[int, str, Path]]:
    """(line, target, base directory) of every relative link in ``path`` (or in
    ``text`` placed at ``path``): markdown links (relative to the file) and
    ``docs/...md`` references (relative to the repository root, as the text
    means them)."""
    text = path.read_text() if text is None else text
    for n, line in enumerate(prose(text).splitlines(), 1):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            yield n, target, path.parent
    for n, line in enumerate(text.splitlines(), 1):
        for m in DOCS_PATH.finditer(line):
            yield n, m.group(0), ROOT


def broken_links(path: Path, text: str | None = None) -> list[str]:
    broken = []
    for n, target, base in links(path, text):
        file_part, _, anchor = target.partition("#")
        dest = (base / file_part).resolve() if file_part else path
        where = f"{doc_id(path)}:{n}: {target}"
        if file_part and not dest.exists():
            broken.append(f"{where} (no such file)")
        elif (
            anchor
            and dest.suffix == ".md"
            and anchor not in anchors(dest, text if dest == path else None)
        ):
            broken.append(f"{where} (no heading #{anchor} in {doc_id(dest)})")
    return broken


@pytest.mark.parametrize("path", doc_files(), ids=doc_id)
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_link_check_sees_a_broken_link_and_a_broken_anchor() -> None:
    page = DOCS / "probe.md"  # not written: the text is checked as if it were there
    broken = broken_links(
        page,
        (
            "# Probe\n\n[ok](configuration.md#settings) [file](nowhere.md) [self](#probe) "
            "[anchor](operations.md#no-such-heading) and `docs/missing.md`.\n"
        ),
    )
    assert [b.split(": ", 1)[1].split(" (")[0] for b in broken] == [
        "nowhere.md",
        "operations.md#no-such-heading",
        "docs/missing.md",
    ]


def test_the_readme_links_the_reference_and_stays_short() -> None:
    text = README.read_text()
    assert len(text.encode()) <= 12_100, "the README is for a new user: move detail to docs/"
    linked = {target.partition("#")[0] for _, target, _ in links(README)}
    for page in (
        "architecture",
        "configuration",
        "guarantees",
        "beat-ha",
        "simulator",
        "operations",
        "benchmarks",
        "deploy",
    ):
        assert f"docs/{page}.md" in linked, page


def code_files() -> list[Path]:
    """The project's code: the package (with its Lua scripts), tests, benchmarks,
    the example project and the CI script."""
    found = [ROOT / ".ci" / "run", ROOT / "pyproject.toml"]
    for folder in ("celery_dgs", "tests", "benchmarks", "example_project"):
        found += [p for p in (ROOT / folder).rglob("*") if p.suffix in {".py", ".lua"}]
    return sorted(found)


def test_no_doc_or_code_names_a_tracker_issue() -> None:
    """Docs and code say what the code does, not which ticket asked for it."""
    hits = [
        f"{doc_id(p)}:{n}: {line.strip()}"
        for p in [*doc_files(), ROOT / "Makefile", *code_files()]
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\bissues? #?\d", line, re.IGNORECASE)
    ]
    assert hits == []


# -- the README's Python examples run ----------------------------------------------------


def python_blocks(path: Path) -> list[Block]:
    return [b for b in code_blocks(path.read_text()) if b.lang == "python"]


def run_blocks(blocks: list[Block], namespace: dict[str, Any], path: Path) -> None:
    for block in blocks:
        code = compile(block.text, f"{doc_id(path)}:{block.line}", "exec")
        exec(code, namespace)


@pytest.fixture
def tour_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the examples in ``tmp_path`` (the tour's ``sqlite:///dgs.sqlite3`` lands
    there). ``@app.task`` registers shared tasks, which every Celery app finalized
    later would get too: they are kept to this test."""
    import celery._state

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(celery._state, "_on_app_finalizers", set(celery._state._on_app_finalizers))
    return tmp_path


def tour_namespace() -> dict[str, Any]:
    """Globals for the README's examples: a module called ``proj``, as in the
    tour's commands (``celery -A proj``), so its tasks are ``proj.<name>``."""
    return {"__name__": "proj"}


def test_readme_tour_runs_and_declares_its_schedules(tour_dir: Path) -> None:
    from celery_dgs.dgs import DGS
    from celery_dgs.store.sql import SqlScheduleStore

    blocks = python_blocks(README)
    assert len(blocks) >= 2, "the tour and the dgs_schedules example"
    ns = tour_namespace()
    run_blocks(blocks, ns, README)  # the broker URL is never contacted

    dgs = ns["dgs"]
    assert isinstance(dgs, DGS)
    decl = dgs.all_declarations(import_modules=False)
    assert {n: str(e) for n, e in decl.errors.items()} == {}
    assert set(decl.specs) == {
        "proj.scrape_bills",
        "proj.nightly_votes",
        "proj.scrape_bills@senate",
        "proj.nightly_votes@house",
    }
    bills, votes = decl.specs["proj.scrape_bills"], decl.specs["proj.nightly_votes"]
    assert bills.kind == "periodic"
    assert votes.kind == "cron"
    assert votes.tz == "America/New_York"
    assert votes.dont_run_on_nodes == {"scraper-3"}
    assert decl.specs["proj.scrape_bills@senate"].args == ("senate",)
    assert ns["app"].conf.worker_direct is True

    # The declarations are storable as beat stores them, in the configured file.
    store = SqlScheduleStore.open(dgs.settings.database_url)
    try:
        from datetime import datetime, timezone

        store.sync(list(decl.specs.values()), datetime.now(timezone.utc))
        assert {s.name for s in store.list_schedules()} == set(decl.specs)
    finally:
        store.close()
    assert (tour_dir / "dgs.sqlite3").exists()


def test_configuration_reference_example_runs_after_the_tour(tour_dir: Path) -> None:
    ns = tour_namespace()
    run_blocks(python_blocks(README)[:1], ns, README)
    config = python_blocks(DOCS / "configuration.md")
    assert config, "docs/configuration.md shows a dgs_schedules example"
    run_blocks(config, ns, DOCS / "configuration.md")
    decl = ns["dgs"].all_declarations(import_modules=False)
    assert {n: str(e) for n, e in decl.errors.items()} == {}
    assert len(decl.specs) > 2


@pytest.mark.parametrize("path", doc_files(), ids=doc_id)
def test_every_celery_dgs_import_in_a_python_example_exists(path: Path) -> None:
    for block in python_blocks(path):
        tree = ast.parse(block.text, f"{doc_id(path)}:{block.line}")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                if module and module.split(".")[0] == "celery_dgs":
                    exec(compile(ast.Module([node], []), doc_id(path), "exec"), {})


# -- the commands shown exist ----------------------------------------------------------


def command_lines(path: Path) -> Iterator[tuple[int, str]]:
    for block in code_blocks(path.read_text()):
        for offset, line in enumerate(block.text.splitlines()):
            yield block.line + offset, line.split("  #")[0].split(" # ")[0].strip()


def check_command(command: click.Command, words: list[str]) -> list[str]:
    """Problems with ``words`` (a usage line after the command's name): unknown
    options, a value missing after an option that takes one, too few or too
    many positional arguments."""
    options = {
        opt: param
        for param in command.params
        if isinstance(param, click.Option)
        for opt in (*param.opts, *param.secondary_opts)
    }
    problems, positional = [], 0
    tokens = [t.strip("[]") for t in words if t.strip("[]") not in ("", "...")]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("-"):
            name, _, inline = token.partition("=")
            param = options.get(name)
            if param is None:
                problems.append(f"no option {name}")
            elif not param.is_flag and not inline:
                if i + 1 >= len(tokens) or tokens[i + 1].startswith("-"):
                    problems.append(f"{name} needs a value")
                i += 1
        else:
            positional += 1
        i += 1
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    required = sum(1 for a in arguments if a.required)
    unlimited = any(a.nargs == -1 for a in arguments)
    most = sum(max(a.nargs, 0) for a in arguments)
    if positional < required:
        problems.append(f"{required} argument(s) expected, {positional} shown")
    if not unlimited and positional > most:
        problems.append(f"at most {most} argument(s), {positional} shown")
    return problems


CELERY_DGS = re.compile(r"^celery (?:-A|--app)[ =](\S+) dgs(?: (.*))?$")
PYTHON_SIM = re.compile(r"^python -m celery_dgs\.sim(?: (.*))?$")


def cli_problems(path: Path) -> list[str]:
    from celery_dgs.cli import dgs

    problems = []
    for n, line in command_lines(path):
        words: list[str] | None = None
        m = CELERY_DGS.match(line)
        if m:
            words = shlex.split(m.group(2) or "")
            if not words:
                continue
            verb, words = words[0], words[1:]
            command = dgs.commands.get(verb)
            if command is None:
                problems.append(f"{doc_id(path)}:{n}: no command `dgs {verb}`")
                continue
        else:
            m = PYTHON_SIM.match(line)
            if not m:
                continue
            command, words = dgs.commands["simulate"], shlex.split(m.group(1) or "")
        problems += [f"{doc_id(path)}:{n}: {line}: {p}" for p in check_command(command, words)]
    return problems


@pytest.mark.parametrize("path", doc_files(), ids=doc_id)
def test_every_celery_dgs_command_shown_exists_with_its_options(path: Path) -> None:
    assert cli_problems(path) == []


def test_the_readme_shows_every_dgs_command() -> None:
    from celery_dgs.cli import dgs

    shown = {
        m.group(2).split()[0]
        for _, line in command_lines(README)
        if (m := CELERY_DGS.match(line)) and m.group(2)
    }
    assert shown == set(dgs.commands)


def test_the_command_check_finds_unknown_commands_options_and_arguments() -> None:
    from celery_dgs.cli import dgs

    assert check_command(dgs.commands["runs"], ["NAME", "--limit", "N"]) == []
    assert check_command(dgs.commands["runs"], ["--limits"]) == [
        "no option --limits",
        "1 argument(s) expected, 0 shown",
    ]
    assert check_command(dgs.commands["cancel"], ["NAME", "--token"]) == ["--token needs a value"]
    assert check_command(dgs.commands["sync"], ["NAME"]) == ["at most 0 argument(s), 1 shown"]
    assert check_command(dgs.commands["status"], ["A", "B", "--json"]) == []


def test_the_beat_scheduler_and_make_targets_shown_exist() -> None:
    from celery.beat import Scheduler
    from celery.utils.imports import symbol_by_name

    targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    for path in doc_files():
        for n, line in command_lines(path):
            for m in re.finditer(r"\bcelery .*\bbeat\b.*-S (\S+)", line):
                assert issubclass(symbol_by_name(m.group(1)), Scheduler), f"{doc_id(path)}:{n}"
            for m in re.finditer(r"^(?:\S+=\S+ )*make ([\w-]+)", line):
                assert m.group(1) in targets, f"{doc_id(path)}:{n}: make {m.group(1)}"


# -- the configuration reference is the settings ---------------------------------------


def table_rows(path: Path, heading: str) -> list[list[str]]:
    """The cells of the first table under ``## heading`` (header and rule dropped)."""
    rows: list[list[str]] = []
    inside = False
    for line in prose(path.read_text()).splitlines():
        if line.startswith("#"):
            if inside and rows:
                break
            inside = line.lstrip("#").strip() == heading
            continue
        if inside and line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif inside and rows:
            break
    assert len(rows) > 2, f"no table under '{heading}' in {doc_id(path)}"
    return rows[2:]


def backticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


#: Defaults the table describes in words rather than as a value.
DESCRIBED_DEFAULTS: dict[str, Any] = {"dgs_redis_url": None}

UNPARSED = object()


def parse_default(cell: str) -> Any:
    if cell == "none":
        return None
    if m := re.fullmatch(r"`([^`]*)`", cell):
        try:
            return ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            return m.group(1)
    if m := re.fullmatch(r"(\d+(?:\.\d+)?)( s| days)?", cell):
        value = float(m.group(1))
        return value * 86400 if m.group(2) == " days" else value
    if m := re.search(r"\((\d+(?:\.\d+)?) s\)", cell):  # a derived default, its value
        return float(m.group(1))
    return UNPARSED


def settings_table() -> dict[str, str]:
    rows = table_rows(DOCS / "configuration.md", "Settings")
    return {backticked(r[0])[0]: r[1] for r in rows}


def test_configuration_reference_lists_exactly_the_settings() -> None:
    from celery_dgs.settings import DgsSettings

    documented = settings_table()
    assert sorted(documented) == DgsSettings.valid_keys()
    named = set(re.findall(r"\bdgs_\w+", (DOCS / "configuration.md").read_text()))
    assert named - set(DgsSettings.valid_keys()) == set(), "settings named but not existing"


def test_configuration_reference_defaults_are_the_code_defaults() -> None:
    from celery_dgs.core.revisit_groups import GroupShares, parse_group_shares
    from celery_dgs.settings import DgsSettings

    defaults = DgsSettings()
    wrong = {}
    for key, cell in settings_table().items():
        actual = getattr(defaults, key.removeprefix("dgs_"))
        shown = DESCRIBED_DEFAULTS[key] if key in DESCRIBED_DEFAULTS else parse_default(cell)
        assert shown is not UNPARSED, f"{key}: cannot read the default {cell!r}"
        if isinstance(actual, GroupShares):  # shown as the mapping a user writes
            shown = parse_group_shares(shown)
        if shown != actual:
            wrong[key] = (cell, actual)
    assert wrong == {}


def test_the_default_parser_reads_each_form() -> None:
    assert parse_default("30 s") == 30.0
    assert parse_default("30 days") == 30 * 86400.0
    assert parse_default("`(300, 3600, 14400)`") == (300, 3600, 14400)
    assert parse_default("`dgs`") == "dgs"
    assert parse_default("none") is None
    assert parse_default("`ping_timeout / 4` (22.5 s), at most x") == 22.5
    assert parse_default("whatever") is UNPARSED


def test_configuration_reference_lists_exactly_the_schedule_fields() -> None:
    from celery_dgs.core.spec import CronSpec, PeriodicSpec
    from celery_dgs.declarations import FIELD_ALIASES

    fields = {f.name for spec in (PeriodicSpec, CronSpec) for f in dataclasses.fields(spec)}
    fields.discard("task")  # the decorated task, or the dgs_schedules key
    rows = table_rows(DOCS / "configuration.md", "Schedule fields")
    documented = {name for r in rows for name in backticked(r[0])}
    assert documented == fields
    aliases = {alias: backticked(r[0])[0] for r in rows for alias in backticked(r[1])}
    assert aliases == FIELD_ALIASES


# -- the package import rules in docs/architecture.md ------------------------------------

PACKAGE = ROOT / "celery_dgs"


def unit_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imports_of(path: Path, source: str | None = None) -> set[str]:
    """The units of ``celery_dgs`` that ``path`` (or ``source`` placed at ``path``)
    imports, and the other top-level modules (prefixed ``ext:``)."""
    package = list(path.relative_to(PACKAGE).parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            parts = base + (node.module.split(".") if node.module else [])
            found |= {parts[0]} if parts else {a.name for a in node.names}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom):
                names = [node.module]
            else:
                names = [a.name for a in node.names]
            for name in names:
                if name is None:
                    continue
                top, _, rest = name.partition(".")
                found.add(rest.split(".")[0] if top == "celery_dgs" else f"ext:{top}")
    return found


def import_rules() -> dict[str, set[str]]:
    rules: dict[str, set[str]] = {}
    for row in table_rows(DOCS / "architecture.md", "The packages on one screen"):
        allowed_cell = row[1].split(";")[0]
        allowed = set() if allowed_cell == "nothing" else set(backticked(allowed_cell))
        for unit in backticked(row[0]):
            rules[unit] = allowed
    return rules


def test_every_package_imports_only_what_the_architecture_allows() -> None:
    rules = import_rules()
    units = {unit_of(p) for p in PACKAGE.rglob("*.py")}
    assert units - set(rules) == set(), "a package the table does not name"
    broken = []
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = unit_of(path)
        allowed = rules[unit] | {unit}
        if path.relative_to(PACKAGE).as_posix() == "sim/__main__.py":
            allowed = allowed | {"cli"}
        for name in sorted(imports_of(path)):
            if not name.startswith("ext:") and name not in allowed:
                broken.append(f"{path.relative_to(ROOT)} imports {name}")
    assert broken == []


def test_core_imports_no_celery_redis_or_sqlalchemy_and_only_three_import_celery() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    celery_users = set()
    for path in PACKAGE.rglob("*.py"):
        outside = {n[4:] for n in imports_of(path) if n.startswith("ext:")} - stdlib
        if unit_of(path) == "core":
            assert outside <= {"croniter"}, path
        if "celery" in outside:
            celery_users.add(unit_of(path))
    assert celery_users <= {"dgs", "beat", "worker"}


def test_the_import_check_sees_a_forbidden_import() -> None:
    probe = PACKAGE / "core" / "probe.py"  # not written: the source is read as if there
    found = imports_of(
        probe,
        "from ..store import base\nfrom celery_dgs.beat import engine\n"
        "from . import spec\nimport celery\n",
    )
    assert found == {"store", "beat", "core", "ext:celery"}
    assert {"store", "beat"} - (import_rules()["core"] | {"core"}) == {"store", "beat"}
