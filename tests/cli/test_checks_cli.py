"""``celery dgs checks`` and the deferred-check line of ``celery dgs status``,
on a real SQLite store (and PostgreSQL for the grouped and ordered reads)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import redis
from click.testing import CliRunner

from celery_dgs.core.spec import CheckSpec
from celery_dgs.dgs import get_dgs
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.store.check_types import NewCheck
from celery_dgs.store.sql import SqlScheduleStore
from tests.cli.conftest import PREFIX, World, make_app, now, spec

M = timedelta(minutes=1)
ORDER = "shop.check_order"
PAYMENT = "shop.check_payment"


def check(task: str, key: str) -> CheckSpec:
    return CheckSpec(task=task, key=key, kwargs={"key": key}, max_checks=4)


def add(world: World, task: str, key: str, at: datetime, added: datetime) -> str:
    spec_ = check(task, key)
    world.store.add_checks([NewCheck(spec_, at)], added)
    return spec_.name


def run_check(
    world: World,
    name: str,
    at: datetime,
    verdict: object,
    outcome: str = "success",
) -> None:
    run_id = world.record(name, "running", at)
    world.store.record_run_end(
        run_id=run_id,
        outcome=outcome,
        ended_at=at + 2 * M / 60,
        verdict=verdict,
        error="boom" if outcome == "failure" else None,
    )


@pytest.fixture
def checks_world(world: World) -> World:
    """Three pending checks of two tasks (two overdue), a declared schedule,
    and one ended check."""
    t = now()
    world.sync(spec("t.periodic"), at=t)
    add(world, ORDER, "42", t - 30 * M, t - 60 * M)
    add(world, ORDER, "43", t + 30 * M, t - 60 * M)
    add(world, PAYMENT, "p-1", t - 5 * M, t - 60 * M)
    done = add(world, ORDER, "7", t - 50 * M, t - 60 * M)
    run_check(world, done, t - 50 * M, None)  # None: the check is done
    return world


def test_summary_per_task_with_totals(checks_world: World) -> None:
    result = checks_world.invoke("checks")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].endswith("3 pending, 2 overdue")
    assert lines[1].split() == ["TASK", "PENDING", "OVERDUE", "OLDEST", "DUE", "LATENESS"]
    order, payment = lines[2].split(), lines[3].split()
    assert order[:3] == [ORDER, "2", "1"]
    assert order[-1] == "late"
    assert order[-2].startswith("30m")  # 30m0Xs late
    assert payment[:3] == [PAYMENT, "1", "1"]
    doc = json.loads(checks_world.invoke("checks", "--json").stdout)
    assert list(doc) == ["now", "pending", "overdue", "oldest_due_at", "oldest_lateness_s", "tasks"]
    assert (doc["pending"], doc["overdue"]) == (3, 2)
    assert 30 * 60 <= doc["oldest_lateness_s"] < 31 * 60
    assert [(t["task"], t["pending"], t["overdue"]) for t in doc["tasks"]] == [
        (ORDER, 2, 1),
        (PAYMENT, 1, 1),
    ]
    assert list(doc["tasks"][0]) == [
        "task",
        "pending",
        "overdue",
        "oldest_due_at",
        "oldest_lateness_s",
    ]


def test_no_checks(world: World) -> None:
    result = world.invoke("checks")
    assert result.exit_code == 0
    assert "0 pending, 0 overdue" in result.stdout
    assert "no pending checks" in result.stdout
    assert json.loads(world.invoke("checks", "--json").stdout)["tasks"] == []


def test_overdue_lists_the_overdue_oldest_first_with_limit_and_task(checks_world: World) -> None:
    result = checks_world.invoke("checks", "--overdue")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "overdue checks, oldest first (2 shown, --limit 20)"
    assert lines[1].split() == ["TASK", "KEY", "DUE", "LATENESS", "CHECKS", "FAILS"]
    assert [line.split()[:2] for line in lines[2:]] == [[ORDER, "42"], [PAYMENT, "p-1"]]
    assert lines[2].split()[-2:] == ["0", "0"]
    one = checks_world.invoke("checks", "--overdue", "--limit", "1").stdout.splitlines()
    assert len(one) == 3
    assert one[2].split()[1] == "42"
    doc = json.loads(checks_world.invoke("checks", "--overdue", "--task", PAYMENT, "--json").stdout)
    assert [c["name"] for c in doc["checks"]] == [f"{PAYMENT}@check:p-1"]
    assert list(doc["checks"][0]) == [
        "name",
        "task",
        "key",
        "due_at",
        "lateness_s",
        "check_count",
        "failure_count",
        "paused",
    ]
    assert 5 * 60 <= doc["checks"][0]["lateness_s"] < 6 * 60
    pending = checks_world.invoke("checks", "--task", ORDER).stdout.splitlines()
    assert pending[0] == f"pending checks of {ORDER}, earliest first (2 shown, --limit 20)"
    assert [line.split()[1] for line in pending[2:]] == ["42", "43"]
    assert "due in 29m" in pending[3] or "due in 30m" in pending[3]


def test_unknown_task_is_a_usage_error(checks_world: World) -> None:
    result = checks_world.invoke("checks", "--overdue", "--task", "shop.nope")
    assert result.exit_code == 2
    assert "Invalid value for '--task': no deferred checks of task 'shop.nope'" in result.output
    assert f"tasks with checks: {ORDER}, {PAYMENT}" in result.output
    result = checks_world.invoke("checks", "shop.nope", "1")
    assert result.exit_code == 2
    assert "Invalid value for 'TASK': no deferred checks of task 'shop.nope'" in result.output


def test_unknown_key_of_a_known_task_is_a_usage_error(checks_world: World) -> None:
    result = checks_world.invoke("checks", ORDER, "999")
    assert result.exit_code == 2
    assert f"no check '{ORDER}@check:999'" in result.output
    assert "Traceback" not in result.output
    result = checks_world.invoke("checks", "t.periodic")
    assert result.exit_code == 2
    assert "is not a check's name" in result.output
    alone = checks_world.invoke("checks", ORDER)  # the task alone: --task lists its checks
    assert f"(--task {ORDER} lists its checks)" in alone.output
    result = checks_world.invoke("checks", "t.periodic@check:1")
    assert result.exit_code == 2


def test_a_task_declared_deferred_with_no_checks_is_known(world: World) -> None:
    dgs = get_dgs(world.app)

    @dgs.deferred(within=timedelta(minutes=2))
    @world.app.task(name="shop.check_refund")
    def check_refund(key: str) -> None:
        return None

    result = world.invoke("checks", "--task", "shop.check_refund")
    assert result.exit_code == 0, result.output
    assert "none" in result.stdout
    result = world.invoke("checks", "shop.check_refund", "r-1")
    assert result.exit_code == 2
    assert "no check 'shop.check_refund@check:r-1'" in result.output


def test_one_pending_check_with_its_runs(checks_world: World) -> None:
    t = now()
    name = f"{ORDER}@check:42"
    run_check(checks_world, name, t - 20 * M, t + 10 * M)  # checked once, again in 10 min
    for args in ((ORDER, "42"), (name,)):
        result = checks_world.invoke("checks", *args)
        assert result.exit_code == 0, result.output
        out = result.stdout
        assert out.splitlines()[0] == f"check {name} (task {ORDER}, key 42)"
        assert "state:       pending" in out
        assert "checks run:  1 of at most 4" in out
        assert "due in 9m" in out or "due in 10m" in out
        assert f"runs of {name}, newest first (1 shown)" in out
        assert "success" in out
    doc = json.loads(checks_world.invoke("checks", ORDER, "42", "--json").stdout)
    assert list(doc) == [
        "name",
        "task",
        "key",
        "state",
        "paused",
        "due_at",
        "lateness_s",
        "check_count",
        "max_checks",
        "first_check_at",
        "failure_count",
        "added_at",
        "runs",
        "history",
    ]
    assert (doc["state"], doc["check_count"], doc["max_checks"]) == ("pending", 1, 4)
    assert -11 * 60 < doc["lateness_s"] < -9 * 60
    assert [r["outcome"] for r in doc["runs"]] == ["success"]
    assert doc["history"] == []
    assert doc["paused"] is False
    assert checks_world.invoke("pause", name).exit_code == 0
    paused = checks_world.invoke("checks", name).stdout
    assert f"state:       pending, paused (celery dgs resume {name})" in paused
    assert json.loads(checks_world.invoke("checks", name, "--json").stdout)["paused"] is True
    listed = checks_world.invoke("checks", "--task", ORDER)
    assert ", paused" in listed.stdout
    listed_json = json.loads(checks_world.invoke("checks", "--task", ORDER, "--json").stdout)
    assert any(c["paused"] for c in listed_json["checks"]), listed_json


def test_one_ended_check_shows_its_history(checks_world: World) -> None:
    name = f"{ORDER}@check:7"
    result = checks_world.invoke("checks", name)
    assert result.exit_code == 0, result.output
    assert "state:       ended: done" in result.stdout
    assert f"history of {name}, latest end first (1 shown)" in result.stdout
    doc = json.loads(checks_world.invoke("checks", ORDER, "7", "--json").stdout)
    assert doc["state"] == "ended"
    assert doc["due_at"] is None
    assert [(h["outcome"], h["check_count"]) for h in doc["history"]] == [("done", 1)]
    assert list(doc["history"][0]) == [
        "outcome",
        "reason",
        "check_count",
        "failure_count",
        "added_at",
        "first_check_at",
        "last_check_at",
        "ended_at",
    ]


def test_pause_or_resume_of_an_ended_check_is_refused(checks_world: World) -> None:
    name = f"{ORDER}@check:7"
    for command, verb in (("pause", "pause"), ("resume", "resume")):
        result = checks_world.invoke(command, name)
        assert result.exit_code == 1, result.output
        assert (
            f"cannot {verb} {name}: the deferred check has ended: beat never dispatches it "
            "again; nothing changed"
        ) in result.output
    assert not checks_world.store.get(name).paused


def test_cancel_says_what_it_changed(checks_world: World) -> None:
    name = f"{PAYMENT}@check:p-1"
    result = checks_world.invoke("checks", PAYMENT, "p-1", "--cancel")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"cancelled check {name}: its history records it cancelled"
    ]
    assert not checks_world.store.get(name).active
    again = checks_world.invoke("checks", name, "--cancel")
    assert again.exit_code == 0
    assert again.stdout.strip() == f"no pending check {name}; nothing changed"
    doc = json.loads(checks_world.invoke("checks", name, "--cancel", "--json").stdout)
    assert doc == {
        "name": name,
        "cancelled": False,
        "lines": [f"no pending check {name}; nothing changed"],
    }
    shown = json.loads(checks_world.invoke("checks", name, "--json").stdout)
    assert [h["outcome"] for h in shown["history"]] == ["cancelled"]
    unknown = checks_world.invoke("checks", "shop.nope", "1", "--cancel")
    assert unknown.exit_code == 2
    assert "no deferred checks of task 'shop.nope'" in unknown.output
    usage = checks_world.invoke("checks", "--cancel")
    assert usage.exit_code == 2
    assert "--cancel needs the check" in usage.output


def test_cancel_of_a_running_check_says_its_run_keeps_going(checks_world: World) -> None:
    name = f"{ORDER}@check:42"
    checks_world.hold_lease(name)
    result = checks_world.invoke("checks", ORDER, "42", "--cancel")
    assert result.exit_code == 0, result.output
    assert "note: its run on w1@node1 keeps going" in result.stdout
    assert f"`celery dgs cancel {name}` stops it" in result.stdout


def test_status_counts_checks_in_one_line_and_never_lists_them(checks_world: World) -> None:
    result = checks_world.invoke("status")
    # Both overdue checks are past their within (5m): the health check fails.
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert "1 schedule " in out
    assert "shop.check_order@check:42 is" not in out.splitlines()[0]
    [line, *past] = [x for x in out.splitlines() if "deferred checks" in x]
    assert line.startswith("deferred checks: 3 pending, 2 overdue (oldest 30m")
    assert line.endswith("late); details: celery dgs checks")
    # The CLI reads the clock a moment after the fixture did: a slow machine
    # adds seconds to the lateness ("30m1s"), which the minutes are checked without.
    past = [re.sub(r"(\d+m)\d+s late", r"\1 late", x) for x in past]
    assert (
        past
        == [
            f"ERROR deferred checks of {ORDER} past their within: {ORDER}@check:42 is 30m late "
            "(within 5m)",
            f"ERROR deferred checks of {PAYMENT} past their within: {PAYMENT}@check:p-1 is 5m late "
            "(within 5m)",
        ][: len(past)]
    )
    doc = json.loads(checks_world.invoke("status", "--json").stdout)
    assert [s["name"] for s in doc["schedules"]] == ["t.periodic"]
    assert list(doc["checks"]) == [
        *("pending", "overdue", "oldest_due_at", "oldest_lateness_s", "past_within"),
    ]
    assert (doc["checks"]["pending"], doc["checks"]["overdue"]) == (3, 2)
    assert ORDER in doc["checks"]["past_within"]


def test_overdue_checks_within_their_within_keep_the_health_check_green(world: World) -> None:
    t = now()
    world.sync(spec("t.periodic"), at=t)
    add(world, ORDER, "late-but-on-time", t - 2 * M, t - 60 * M)  # within 5m: not past it
    result = world.invoke("status")
    assert result.exit_code == 0, result.output
    assert "past their within" not in result.stdout


def test_status_without_checks_has_no_check_line(world: World) -> None:
    world.sync(spec("t.periodic"), at=now())
    result = world.invoke("status")
    assert "deferred checks" not in result.stdout
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["checks"] == {
        "pending": 0,
        "overdue": 0,
        "oldest_due_at": None,
        "oldest_lateness_s": None,
        "past_within": [],
    }


@pytest.fixture
def pg_world(pg_url: str, redis_url: str, redis_client: redis.Redis) -> Iterator[World]:
    app = make_app(pg_url, redis_url)
    store = SqlScheduleStore.open(pg_url)
    leases = RedisLeases(redis_client, KeySpace(PREFIX), ping_timeout=5.0, steal_delay=2.0)
    yield World(app=app, store=store, leases=leases, runner=CliRunner())
    store.close()
    app.close()


@pytest.mark.postgres
def test_summary_and_overdue_on_postgresql(pg_world: World) -> None:
    t = now()
    for i in range(30):  # due every minute from 24m30s ago: 25 overdue, 5 ahead
        due = t + (i - 25) * M + M / 2
        add(pg_world, ORDER if i % 3 else PAYMENT, f"k{i:02d}", due, t - 60 * M)
    doc = json.loads(pg_world.invoke("checks", "--json").stdout)
    assert (doc["pending"], doc["overdue"]) == (30, 25)
    assert {x["task"]: (x["pending"], x["overdue"]) for x in doc["tasks"]} == {
        ORDER: (20, 16),
        PAYMENT: (10, 9),
    }
    over = json.loads(pg_world.invoke("checks", "--overdue", "--limit", "5", "--json").stdout)
    assert [c["key"] for c in over["checks"]] == ["k00", "k01", "k02", "k03", "k04"]
    late = [c["lateness_s"] for c in over["checks"]]
    assert late == sorted(late, reverse=True)
    result = pg_world.invoke("checks", ORDER, "k01", "--cancel")
    assert result.stdout.startswith(f"cancelled check {ORDER}@check:k01")
    status = json.loads(pg_world.invoke("status", "--json").stdout)
    assert (status["checks"]["pending"], status["checks"]["overdue"]) == (29, 24)
