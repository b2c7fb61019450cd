"""``celery dgs add / remove / import / export``, and ``sync`` leaving runtime
schedules alone, on a real SQLite store."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from celery_dgs import runtime_schedules
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.embedded import free_port
from celery_dgs.keys import KeySpace
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.store.memory import MemoryScheduleStore
from celery_dgs.store.records import StoredSchedule
from celery_dgs.store.sql import SqlScheduleStore
from tests.cli.conftest import PREFIX, World, make_app, now


def tasks(app: Celery) -> None:
    for name in ("t.scrape", "t.code"):

        def noop(*args: object, **kwargs: object) -> None:
            pass

        app.task(name=name, shared=False)(noop)
    app.conf.dgs_schedules = {"t.code": {"period": 3600}}


def test_add_change_and_remove(world: World) -> None:
    tasks(world.app)
    result = world.invoke(
        "add",
        "t.scrape@a",
        "--period",
        "3600",
        "--args",
        '["https://a"]',
        "--kwargs",
        '{"depth": 2}',
        "--set",
        "tz=Europe/Paris",
        "--set",
        "cooldown=60",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "inserted runtime schedule t.scrape@a\n"
    spec = world.store.get("t.scrape@a").spec
    assert isinstance(spec, PeriodicSpec)
    assert (spec.args, spec.kwargs, spec.tz) == (("https://a",), {"depth": 2}, "Europe/Paris")
    again = world.invoke(
        "add",
        "t.scrape@a",
        "--period",
        "3600",
        "--args",
        '["https://a"]',
        "--kwargs",
        '{"depth": 2}',
        "--set",
        "tz=Europe/Paris",
        "--set",
        "cooldown=60",
    )
    assert again.stdout == "runtime schedule t.scrape@a unchanged: nothing written\n"
    cron = world.invoke("add", "t.scrape@a", "--cron", "0 * * * *", "--within", "600")
    # the whole schedule replaced: the line says what went back to its default
    assert cron.stdout == (
        'updated runtime schedule t.scrape@a: kind "periodic" -> "cron", tz "Europe/Paris" '
        '-> "UTC", args ["https://a"] -> [], kwargs {"depth": 2} -> {}, scheduling_period '
        "3600.0 -> (default), cooldown_duration 60.0 -> (default), cron_schedule (default) "
        '-> "0 * * * *", cron_max_schedule_duration (default) -> 600.0 (add replaces the '
        "whole schedule: give every field to keep)\n"
    )
    period = world.invoke("add", "t.scrape@a", "--cron", "0 * * * *", "--within", "900")
    assert period.stdout == (
        "updated runtime schedule t.scrape@a: cron_max_schedule_duration 600.0 -> 900.0\n"
    )
    removed = world.invoke("remove", "t.scrape@a", "t.scrape@zzz")
    assert removed.exit_code == 0, removed.output
    assert removed.stdout.splitlines() == [
        "removed runtime schedule t.scrape@a",
        "t.scrape@zzz: no such runtime schedule; nothing changed",
    ], "not the name it just removed"
    typo = world.invoke("remove", "t.scrape@aa", "t.scrape@a")
    assert typo.exit_code == 0, typo.output
    assert sorted(typo.stdout.splitlines()) == [
        "t.scrape@a: no such runtime schedule (or already removed); nothing changed",
        "t.scrape@aa: no such runtime schedule (did you mean t.scrape@a?); nothing changed",
    ]
    assert not world.store.get("t.scrape@a").active
    # A removed schedule's live run goes on: the line says so.
    assert world.invoke("add", "t.scrape@b", "--period", "3600").exit_code == 0
    world.hold_lease("t.scrape@b")
    running = world.invoke("remove", "t.scrape@b")
    assert running.stdout == (
        "removed runtime schedule t.scrape@b (its live run on w1@node1 goes on to its end: "
        "celery dgs cancel t.scrape@b stops it)\n"
    )
    assert not world.store.get("t.scrape@b").active


def test_add_reports_the_field_and_refuses_a_declared_schedule(world: World) -> None:
    tasks(world.app)
    bad = world.invoke("add", "t.scrape@a", "--period", "60", "--set", "cooldown=120")
    assert bad.exit_code == 1
    assert "schedule 't.scrape@a', field 'cooldown'" in bad.stderr
    assert world.invoke("sync").exit_code == 0
    refused = world.invoke("add", "t.code", "--period", "60")
    assert refused.exit_code == 1
    assert "schedule 't.code', field 'owner'" in refused.stderr
    assert "declared in code" in refused.stderr
    gone = world.invoke("remove", "t.code")
    assert gone.exit_code == 1
    assert "refused t.code" in gone.stderr
    assert world.store.get("t.code").active


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--args", '"u"', """must be a JSON list, got '"u"', a JSON string"""),
        ("--kwargs", "[1]", "must be a JSON object, got '[1]', a JSON list"),
        ("--args", "[1,", "must be a JSON list, got '[1,', which is not JSON (Expecting"),
    ],
)
def test_add_says_what_json_args_and_kwargs_take(
    world: World, option: str, value: str, message: str
) -> None:
    tasks(world.app)
    bad = world.invoke("add", "t.scrape@a", "--period", "60", option, value)
    assert bad.exit_code == 2
    assert message in " ".join(bad.output.split()), bad.output


def test_import_reports_rows_and_applies_the_good_ones(world: World, tmp_path: Path) -> None:
    tasks(world.app)
    world.invoke("sync")
    path = tmp_path / "sources.jsonl"
    path.write_text(
        '{"name": "t.scrape@a", "period": 3600, "args": ["https://a"]}\n'
        '{"name": "t.scrape@b", "period": "soon"}\n'
        '{"name": "t.code", "period": 60}\n'
        '{"name": "t.scrape@c", "cron": "0 * * * *", "within": 600}\n'
    )
    result = world.invoke("import", str(path))
    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert errors[0].startswith(f"ERROR {path}: line 2: schedule 't.scrape@b', field 'period'")
    assert errors[1].startswith(f"ERROR {path}: line 3: schedule 't.code', field 'owner'")
    assert result.stdout == (
        f"imported {path}: 2 inserted, 0 updated, 0 reactivated, 0 unchanged, 2 rows not applied\n"
    )
    again = world.invoke("import", str(path))
    assert "0 inserted, 0 updated, 0 reactivated, 2 unchanged" in again.stdout


def test_export_then_import_is_a_no_op(world: World, tmp_path: Path) -> None:
    tasks(world.app)
    world.invoke("sync")
    world.invoke("add", "t.scrape@a", "--period", "60", "--args", '["x"]')
    world.invoke("add", "t.scrape@b", "--cron", "*/5 * * * *", "--within", "60")
    out = world.invoke("export")
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [row["name"] for row in lines] == ["t.scrape@a", "t.scrape@b"], "declared: not"
    csv_path = tmp_path / "all.csv"
    written = world.invoke("export", "--format", "csv", "-o", str(csv_path))
    assert written.exit_code == 0, written.output
    assert "exported 2 runtime schedules" in written.stderr
    result = world.invoke("import", str(csv_path))
    assert result.exit_code == 0, result.output
    assert "0 inserted, 0 updated, 0 reactivated, 2 unchanged, 0 rows not applied" in (
        result.stdout
    )


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_reads_the_store_a_page_at_a_time(
    world: World,
    tmp_path: Path,
    fmt: str,
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages of 3 rows: every schedule written once, in name order, an
    invalid stored one skipped and said once (CSV reads the pages twice)."""
    monkeypatch.setattr(runtime_schedules, "LIST_PAGE", 3)
    tasks(world.app)
    world.invoke("sync")
    for i in range(8):
        world.invoke("add", f"t.scrape@s{i}", "--period", "60")
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
        db.execute(
            'UPDATE dgs_schedules SET spec = \'{"kind": "weekly"}\' WHERE name = ?', ["t.scrape@s4"]
        )
    db.close()
    reads: list[int | None] = []
    real = SqlScheduleStore.list_schedules

    def spy(self: SqlScheduleStore, *args: Any, **kwargs: Any) -> list[StoredSchedule]:
        got = real(self, *args, **kwargs)
        reads.append(len(got) if kwargs.get("limit") else None)
        return got

    monkeypatch.setattr(SqlScheduleStore, "list_schedules", spy)
    path = tmp_path / f"all.{fmt}"
    written = world.invoke("export", "--format", fmt, "-o", str(path))
    assert written.exit_code == 0, written.output
    one_pass = [3, 3, 2]
    assert reads == (one_pass * 2 if fmt == "csv" else one_pass), "pages, never every row"
    monkeypatch.setattr(SqlScheduleStore, "list_schedules", real)
    assert written.stderr.count("skipped t.scrape@s4: its stored spec is invalid") == 1
    assert "exported 7 runtime schedules" in written.stderr
    names = [f"t.scrape@s{i}" for i in range(8) if i != 4]
    text = path.read_text()
    if fmt == "csv":
        header, *rows = text.splitlines()
        assert header.startswith("name,")
        assert [r.split(",")[0] for r in rows] == names
    else:
        assert [json.loads(line)["name"] for line in text.splitlines()] == names
    api = RuntimeSchedules(world.store)
    assert [r.name for r in api.iter_list(page=2)] == [r.name for r in api.list()]
    memory = MemoryScheduleStore()
    memory.upsert_runtime([s.spec for s in api.list() if s.spec is not None], now())
    assert [r.name for r in RuntimeSchedules(memory).iter_list(page=2)] == names


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_with_the_removed_ones_imports_back_without_reviving_them(
    world: World, tmp_path: Path, fmt: str
) -> None:
    tasks(world.app)
    world.invoke("sync")
    world.invoke("add", "t.scrape@a", "--period", "60")
    world.invoke("add", "t.scrape@b", "--period", "60")
    assert world.invoke("remove", "t.scrape@b").exit_code == 0
    path = tmp_path / f"all.{fmt}"
    written = world.invoke("export", "--include-removed", "--format", fmt, "-o", str(path))
    assert written.exit_code == 0, written.output
    if fmt == "jsonl":
        rows = {r["name"]: r for r in map(json.loads, path.read_text().splitlines())}
        assert rows["t.scrape@b"]["removed"] is True
        assert "removed" not in rows["t.scrape@a"]
    result = world.invoke("import", str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(
        "0 inserted, 0 updated, 0 reactivated, 1 unchanged, 0 rows not applied, "
        "1 removed skipped (a removed schedule is not imported)\n"
    )
    assert not world.store.get("t.scrape@b").active
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "t.scrape@c", "period": 60, "removed": "yes"}\n')
    refused = world.invoke("import", str(bad))
    assert refused.exit_code == 1
    assert "schedule 't.scrape@c', field 'removed': must be true or false, got 'yes'" in (
        refused.stderr
    )


def test_add_warns_of_a_schedule_no_capacity_serves(world: World) -> None:
    """A cron time inside its own blackout can never be served: ``add``
    stores it (it is valid) and says so, as ``check`` does for declarations."""
    tasks(world.app)
    result = world.invoke(
        "add",
        "t.scrape@bo",
        "--cron",
        "30 12 * * *",
        "--within",
        "30m",
        "--set",
        'blackouts=[["12:00","14:00"]]',
        "--set",
        "tz=America/New_York",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "inserted runtime schedule t.scrape@bo\n"
    assert (
        "WARNING schedule 't.scrape@bo' can never be served (cron_times_in_blackout): 1 of its "
        "1 cron times a day fall in or just before a blackout (12:00-14:00 America/New_York) "
        "and cannot finish within 30m (within)" in result.stderr
    )


def test_add_warns_of_a_pool_no_live_worker_consumes(world: World) -> None:
    """A misspelt pool is valid (a worker may consume it later), but while
    workers are live and none consumes it, ``add`` says so."""
    tasks(world.app)
    assert "pool" not in world.invoke("add", "t.scrape@p0", "--period", "1h").stderr
    registry = WorkerRegistry(world.leases.client, KeySpace(PREFIX), ttl=300)
    registry.register(
        WorkerInfo(name="w1@node1", node="node1", queues=("celery",), slots=1, pool="solo", pid=1)
    )
    result = world.invoke("add", "t.scrape@p1", "--period", "1h", "--set", "pool=reprots")
    assert result.exit_code == 0, result.output
    assert (
        "WARNING no live worker consumes pool 'reprots' (live workers consume 'celery'): "
        "it runs once one does" in result.stderr
    )
    assert "pool" not in world.invoke("add", "t.scrape@p2", "--period", "1h").stderr


def test_import_warns_as_add_does_once_per_warning(world: World, tmp_path: Path) -> None:
    """The same advice for many rows is one line naming how many and a few."""
    tasks(world.app)
    path = tmp_path / "rows.jsonl"
    rows = [f'{{"name": "t.scrape@s{i}", "period": 60}}' for i in range(5)]
    path.write_text("\n".join([*rows, '{"name": "t.scrape@fine", "period": 3600}']) + "\n")
    single = world.invoke("add", "t.scrape@one", "--period", "60")
    [advice] = [line for line in single.stderr.splitlines() if line.startswith("WARNING")]
    result = world.invoke("import", str(path))
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    rest = advice.removeprefix("WARNING schedule 't.scrape@one'")
    assert warnings == [f"WARNING 5 schedules (t.scrape@s0, t.scrape@s1, t.scrape@s2, ...){rest}"]


def test_sync_leaves_runtime_schedules_alone(world: World) -> None:
    tasks(world.app)
    world.invoke("add", "t.scrape@a", "--period", "60")
    world.invoke("add", "t.code", "--period", "60")  # before it is declared: runtime
    before = {n: world.store.get(n) for n in ("t.scrape@a", "t.code")}
    result = world.invoke("sync")
    assert result.exit_code == 1
    assert "refused:" in result.stderr
    assert "schedule 't.code' is a runtime schedule" in result.stderr
    assert "deactivated" not in result.stdout
    assert {n: world.store.get(n) for n in before} == before


def test_add_reads_durations_as_simulate_does_and_names_the_option(world: World) -> None:
    tasks(world.app)
    result = world.invoke("add", "t.scrape@a", "--period", "1h", "--set", "cooldown=5m")
    assert result.exit_code == 0, result.output
    spec = world.store.get("t.scrape@a").spec
    assert isinstance(spec, PeriodicSpec)
    assert spec.scheduling_period == timedelta(hours=1)
    assert spec.cooldown_duration == timedelta(minutes=5)
    cron = world.invoke("add", "t.scrape@b", "--cron", "0 * * * *", "--within", "1m30s")
    assert cron.exit_code == 0, cron.output
    assert world.store.get("t.scrape@b").spec.cron_max_schedule_duration == timedelta(seconds=90)  # type: ignore[union-attr]
    bad = world.invoke("add", "t.scrape@c", "--period", "abc")  # refused as --set's are
    assert bad.exit_code == 1
    assert (
        "schedule 't.scrape@c', option --period: 'abc' is not a duration: give seconds, or a "
        in (bad.stderr)
    )
    zero = world.invoke("add", "t.scrape@c", "--period", "0")
    assert zero.exit_code == 1
    assert "schedule 't.scrape@c', option --period: must be more than zero, got 0s" in zero.stderr
    tiny = world.invoke("add", "t.scrape@d", "--period", "1ms")
    assert tiny.exit_code == 0, tiny.output
    assert tiny.stdout == "inserted runtime schedule t.scrape@d\n"
    assert tiny.stderr.startswith(
        "WARNING schedule 't.scrape@d', field 'period': 0.001s is shorter than 1s: "
        "beat starts it again as soon as each run ends"
    )
    one_second = world.invoke("add", "t.scrape@d", "--period", "1s").stderr
    assert "is shorter than 1s" not in one_second
    # check's advice too: the first retry (5 min) comes after the deadline.
    assert "field 'period': the retry backoff after a failure (5m" in one_second
    assert world.invoke("add", "t.scrape@e", "--period", "1h").stderr == ""
    huge = world.invoke("add", "t.scrape@c", "--period", "99999999999999999")
    assert huge.exit_code == 1
    assert (
        "schedule 't.scrape@c', option --period: '99999999999999999' is too long a duration"
    ) in huge.stderr
    minute = world.invoke("add", "t.scrape@c", "--cron", "61 * * * *", "--within", "60")
    assert minute.exit_code == 1
    assert (
        "schedule 't.scrape@c', option --cron: '61 * * * *': the minute field '61' is not "
        "valid (it takes 0-59)"
    ) in minute.stderr


def test_import_reads_durations_as_text(world: World, tmp_path: Path) -> None:
    tasks(world.app)
    jsonl = tmp_path / "sources.jsonl"
    jsonl.write_text(
        '{"name": "t.scrape@a", "period": "1h", "cooldown": "10m"}\n'
        '{"name": "t.scrape@b", "cron": "0 * * * *", "within": "90s"}\n'
        '{"name": "t.scrape@c", "period": "an hour"}\n'
    )
    result = world.invoke("import", str(jsonl))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"ERROR {jsonl}: line 3: schedule 't.scrape@c', field 'period': 'an hour' is not a "
        "duration: give seconds, or a duration like 90s, 30m, 1h30m, 7d",
        "WARNING schedule 't.scrape@b', field 'within': the retry backoff after a failure "
        "(5m, dgs_retry_backoff) is not shorter than its within (1m30s): one failed run puts "
        "it in ERROR before it is retried",
    ]
    csv = tmp_path / "sources.csv"
    csv.write_text("name,period,cooldown\nt.scrape@a,1h,10m\nt.scrape@d,30m,\n")
    again = world.invoke("import", str(csv))
    assert again.exit_code == 0, again.output
    assert "1 inserted, 0 updated, 0 reactivated, 1 unchanged" in again.stdout
    spec = world.store.get("t.scrape@d").spec
    assert isinstance(spec, PeriodicSpec)
    assert spec.scheduling_period == timedelta(minutes=30)
    # An empty cell is no value: the error names the file's column.
    csv.write_text("name,period\nt.scrape@e,\n")
    empty = world.invoke("import", str(csv))
    assert empty.exit_code == 1
    assert empty.stderr.splitlines() == [
        f"ERROR {csv}: line 2: schedule 't.scrape@e', field 'period': is required for a "
        "periodic schedule"
    ]


BLOB = "x" * (10 * 1024 * 1024)  # the 10 MB value of the report


def scrape(url: str, depth: int = 1) -> None:
    """A task with a signature."""


def test_the_cli_holds_add_and_import_to_the_same_checks(world: World, tmp_path: Path) -> None:
    tasks(world.app)
    world.app.task(name="t.typed", shared=False)(scrape)
    bad = world.invoke(
        "add", "t.typed@a", "--period", "1h", "--args", '["https://a"]', "--kwargs", '{"blob": 1}'
    )
    assert bad.exit_code == 1
    assert "schedule 't.typed@a', option --kwargs: task 't.typed' cannot take" in bad.stderr
    missing = world.invoke("add", "t.typed@b", "--period", "1h")
    assert missing.exit_code == 1
    assert "schedule 't.typed@b', option --args: " in missing.stderr, "the option that gives it"
    no_period = world.invoke("add", "t.typed@b", "--args", '["https://b"]')
    assert "schedule 't.typed@b', option --period: is required" in no_period.stderr
    path = tmp_path / "rows.jsonl"
    path.write_text(
        '{"name": "t.scrape@a", "period": "1h", "args": ["https://a"]}\n'
        f'{{"name": "t.scrape@b", "period": "1h", "kwargs": {{"url": "{BLOB}"}}}}\n'
    )
    result = world.invoke("import", str(path))
    assert result.exit_code == 1
    [error] = result.stderr.splitlines()
    assert error.startswith(f"ERROR {path}: line 2: schedule 't.scrape@b', field 'kwargs': ")
    assert "1 inserted" in result.stdout
    assert [s.name for s in world.store.list_schedules()] == ["t.scrape@a"]
    assert "unexpected keyword" not in result.stderr, "t.scrape takes any arguments"
    assert "more than the 65536 allowed (dgs_max_argument_bytes)" in error


def test_import_and_export_name_a_file_they_cannot_use(world: World, tmp_path: Path) -> None:
    """One line and an exit status, never a traceback, and nothing imported."""
    tasks(world.app)
    missing = world.invoke("import", str(tmp_path / "missing.jsonl"))
    assert missing.exit_code == 2, missing.output
    assert "does not exist" in missing.stderr
    assert "Traceback" not in missing.output

    latin1 = tmp_path / "latin1.jsonl"
    good = json.dumps({"name": "t.scrape@a", "period": 60}).encode()
    latin1.write_bytes(good + b"\n" + '{"name": "t.scrape@\xe9", "period": 60}'.encode("latin-1"))
    result = world.invoke("import", str(latin1))
    assert result.exit_code == 1, result.output
    assert "latin1.jsonl: not UTF-8 text (invalid continuation byte, byte 0xe9)" in result.stderr
    assert "nothing imported" in result.stderr
    assert world.store.list_schedules(include_inactive=True) == []

    empty = world.invoke("export")
    assert (empty.exit_code, empty.stdout) == (0, "")
    assert empty.stderr == "no runtime schedules to export\n"

    unwritable = world.invoke("export", "-o", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert unwritable.exit_code == 1, unwritable.output
    assert "Could not open file" in unwritable.stderr
    assert "No such file or directory" in unwritable.stderr


def test_a_row_nested_too_deeply_is_a_row_error(world: World, tmp_path: Path) -> None:
    tasks(world.app)
    path = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(json.dumps({"name": "t.scrape@a", "period": 60}) + "\n" + deep + "\n")
    result = world.invoke("import", str(path))
    assert result.exit_code == 1, result.output
    assert "line 2" in result.stderr, result.stderr
    assert "nested too deeply" in result.stderr, result.stderr
    assert [s.name for s in world.store.list_schedules()] == ["t.scrape@a"]


def test_a_csv_with_a_byte_order_mark_imports(world: World, tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts with a BOM: it is not part of the first column's name."""
    tasks(world.app)
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffname,period\r\nt.scrape@a,60\r\nt.scrape@b,1h\r\n".encode())
    result = world.invoke("import", str(path))
    assert result.exit_code == 0, result.output
    assert "2 inserted" in result.stdout
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes("\ufeff".encode() + b'{"name": "t.scrape@c", "period": 60}\n')
    assert world.invoke("import", str(jsonl)).exit_code == 0
    assert {s.name for s in world.store.list_schedules()} == {
        "t.scrape@a",
        "t.scrape@b",
        "t.scrape@c",
    }


def test_add_with_redis_unreachable_writes_and_says_the_pools_were_not_checked(
    world: World, sqlite_url: str
) -> None:
    """The schedule is the store's; only the pool check reads Redis, after
    the write, so the command succeeds and says what it could not check."""
    offline = replace(world, app=make_app(sqlite_url, f"redis://127.0.0.1:{free_port()}/0"))
    try:
        tasks(offline.app)
        added = offline.invoke("add", "t.scrape@a", "--period", "1h")
        assert added.exit_code == 0, added.output
        assert added.stdout == "inserted runtime schedule t.scrape@a\n"
        assert added.stderr.startswith(
            "WARNING live workers not read, so the pools were not checked: "
        )
        assert world.store.get("t.scrape@a").spec is not None
    finally:
        offline.app.close()
