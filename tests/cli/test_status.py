"""``celery dgs status``: conditions, order, filters, JSON, colour, watch, exit status."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime, timedelta

import pytest
import redis

from celery_dgs.cli.render import status_text
from celery_dgs.status import build_rows
from tests.cli.conftest import World, now, spec

ANSI = re.compile(r"\x1b\[[0-9;]*m")
H = timedelta(hours=1)
M = timedelta(minutes=1)


@pytest.fixture
def crafted(world: World) -> datetime:
    """Six schedules (period 1 h) in known conditions, registered two hours ago."""
    t = now()
    world.sync(
        spec("t.ok"), spec("t.late"), spec("t.never"), spec("t.failed"),
        spec("t.running"), spec("t.paused", pool="slow"),
        at=t - 2 * H,
    )  # fmt: skip
    world.record("t.ok", "success", t - 10 * M, 2.0)
    world.record("t.late", "success", t - 150 * M)  # ERROR since 90 min
    world.record("t.failed", "success", t - 30 * M)
    world.record("t.failed", "failure", t - 5 * M, error="boom\nsecond line")
    world.record("t.running", "success", t - 20 * M)
    world.record("t.running", "running", t - 10 * M)
    world.hold_lease("t.running", progress=0.5)
    world.record("t.paused", "success", t - 40 * M)
    world.store.set_paused("t.paused", True)
    return t


def test_table_lists_every_schedule_most_urgent_first_and_fails_the_health_check(
    world: World, crafted: datetime
) -> None:
    result = world.invoke("status")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("celery-dgs status at ")
    assert "6 schedules (2 ERROR, 1 WARNING, 3 OK); 1 running" in lines[0]
    header, *rows = lines[1:8]
    assert header.split()[:3] == ["CONDITION", "SCHEDULE", "REASON"]
    names = [row.split()[1] for row in rows]
    # ERROR by error_at (t.late: 90 min ago, t.never: 60 min ago), then WARNING,
    # then OK by should_start_by (last good start + 1 h: -40, -20, -10 min).
    assert names == ["t.late", "t.never", "t.failed", "t.paused", "t.running", "t.ok"]
    by_name = dict(zip(names, rows, strict=True))
    assert by_name["t.never"].split()[:3] == ["ERROR", "t.never", "never_succeeded"]
    assert by_name["t.late"].split()[:3] == ["ERROR", "t.late", "deadline_passed"]
    assert "last_run_failed" in by_name["t.failed"]
    assert "w1@node1 (" in by_name["t.running"]
    assert "50%" in by_name["t.running"]
    assert "paused" in by_name["t.paused"]
    # Aligned: every row's SCHEDULE column starts where the header's does.
    col = header.index("SCHEDULE")
    assert all(row[col - 2 : col] == "  " and row[col] == "t" for row in rows)
    # Non-OK rows explain themselves below the table.
    notes = lines[9:]
    assert any("t.late missed its deadline" in n for n in notes)
    assert any("t.failed: the last run failed (1 consecutive failures)" in n for n in notes)
    assert not ANSI.search(result.output), "no colour when stdout is not a terminal"


def test_filters_and_exit_status(world: World, crafted: datetime) -> None:
    ok = world.invoke("status", "--condition", "OK")
    assert ok.exit_code == 0, ok.output
    assert "3 schedules (0 ERROR, 0 WARNING, 3 OK)" in ok.stdout
    bad = world.invoke("status", "--condition", "error", "--condition", "WARNING")
    assert bad.exit_code == 1
    assert "3 schedules (2 ERROR, 1 WARNING, 0 OK)" in bad.stdout
    pattern = world.invoke("status", "t.r*", "t.p*")
    assert pattern.exit_code == 0
    assert "t.running" in pattern.stdout
    assert "t.paused" in pattern.stdout
    assert "t.late" not in pattern.stdout
    pool = world.invoke("status", "--pool", "slow")
    assert pool.exit_code == 0
    assert "1 schedules" in pool.stdout
    assert "t.paused" in pool.stdout
    default_pool = world.invoke("status", "--pool", "celery", "--condition", "OK")
    assert "t.ok" in default_pool.stdout
    assert "t.paused" not in default_pool.stdout
    none = world.invoke("status", "nothing.*")
    assert none.exit_code == 0
    assert "no schedules match" in none.stdout
    wrong = world.invoke("status", "--condition", "FINE")
    assert wrong.exit_code == 2
    assert "FINE" in wrong.output


def test_json_has_stable_keys_iso_times_and_seconds(world: World, crafted: datetime) -> None:
    result = world.invoke("status", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert list(doc) == ["now", "counts", "workers", "schedules", "beat_leader"]
    assert doc["counts"] == {"ERROR": 2, "WARNING": 1, "OK": 3}
    rows = {r["name"]: r for r in doc["schedules"]}
    assert [r["name"] for r in doc["schedules"]][:3] == ["t.late", "t.never", "t.failed"]
    keys = list(rows["t.ok"])
    assert all(list(r) == keys for r in rows.values()), "every row has the same keys"
    assert keys[:8] == ["name", "task", "configuration", "kind", "pool", "condition", "reason",
                        "message"]  # fmt: skip
    ok = rows["t.ok"]
    assert ok["condition"] == "OK"
    assert ok["reason"] == "ok"
    assert ok["failure_count"] == 0
    assert ok["average_duration_s"] == 2.0
    for key in ("can_start_by", "should_start_by", "error_at", "last_good_start_at"):
        moment = datetime.fromisoformat(ok[key])
        assert moment.utcoffset() == timedelta(0), key
    assert abs(datetime.fromisoformat(ok["last_good_start_at"]) - (crafted - 10 * M)) < M / 60
    assert 0 < ok["seconds_until_error"] <= 50 * 60
    assert ok["running"] is None
    assert ok["paused"] is False
    never = rows["t.never"]
    assert never["reason"] == "never_succeeded"
    assert never["last_good_start_at"] is None
    assert never["average_duration_s"] is None
    assert never["failure_count"] is None
    running = rows["t.running"]["running"]
    assert running["owner_name"] == "w1@node1"
    assert running["owner_node"] == "node1"
    assert running["progress"] == 0.5
    assert running["cancel_requested"] is False
    assert rows["t.paused"]["paused"] is True
    assert rows["t.paused"]["pool"] == "slow"
    assert rows["t.failed"]["failure_count"] == 1


def test_invalid_stored_spec_is_an_error_row(world: World, sqlite_url: str) -> None:
    world.sync(spec("t.a"), spec("t.b"), at=now())
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE dgs_schedules SET spec = '{\"kind\": \"weekly\"}' WHERE name = 't.b'")
    db.close()
    result = world.invoke("status", "--json")
    assert result.exit_code == 1
    first = json.loads(result.stdout)["schedules"][0]
    assert (first["name"], first["condition"], first["reason"]) == ("t.b", "ERROR", "invalid_spec")
    assert "weekly" in first["message"]
    assert first["error_at"] is None


def test_colour_only_when_asked_and_alignment_kept(world: World, crafted: datetime) -> None:
    rt_rows = build_rows(world.store.list_schedules(), {}, crafted)
    coloured = status_text(rt_rows, crafted, [], color=True)
    plain = status_text(rt_rows, crafted, [], color=False)
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == plain
    # Celery's --no-color / a non-terminal stdout: plain text.
    assert not ANSI.search(world.invoke("status", color=True).output)


def test_watch_redraws_until_ctrl_c(
    world: World, crafted: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr("celery_dgs.cli.show.time.sleep", sleep)
    result = world.invoke("status", "--watch", "0.5", "t.ok")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("celery-dgs status at") == 3
    assert sleeps == [0.5, 0.5, 0.5]
    sleeps.clear()
    assert world.invoke("status", "--watch", "1").exit_code == 1  # ERROR in the last frame


def test_unreachable_redis_is_exit_status_3(world: World) -> None:
    world.app.conf.broker_url = "redis://127.0.0.1:9/0"
    result = world.invoke("status")
    assert result.exit_code == 3
    assert "Error: Redis:" in result.output
    assert "Traceback" not in result.output


def test_watch_survives_an_unreachable_redis(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.app.conf.broker_url = "redis://127.0.0.1:9/0"
    monkeypatch.setattr(
        "celery_dgs.cli.show.time.sleep", lambda s: (_ for _ in ()).throw(KeyboardInterrupt)
    )
    result = world.invoke("status", "--watch", "1")
    assert result.exit_code == 0
    assert "cannot read the state: Redis:" in result.stdout


def test_empty_store(world: World, redis_client: redis.Redis) -> None:
    result = world.invoke("status")
    assert result.exit_code == 0
    assert "0 schedules" in result.stdout
    assert "no schedules match" in result.stdout
