"""``celery dgs status``: conditions, order, filters, JSON, colour, watch, exit status."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
import redis

from celery_dgs.cli.render import status_text
from celery_dgs.cli.status_command import SPEC_LINES_MAX
from celery_dgs.dgs import get_dgs
from celery_dgs.keys import KeySpace
from celery_dgs.leases.leader import RedisLeader
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.status import build_rows
from celery_dgs.store.sql_kept import refresh_kept
from tests.cli.conftest import PREFIX, World, now, spec

ANSI = re.compile(r"\x1b\[[0-9;]*m")
H = timedelta(hours=1)
M = timedelta(minutes=1)


@pytest.fixture
def crafted(world: World) -> datetime:
    """Six schedules (period 1 h) in known conditions, registered two hours ago."""
    t = now()
    world.sync(
        spec("t.ok"),
        spec("t.late"),
        spec("t.never"),
        spec("t.failed"),
        spec("t.running"),
        spec("t.paused", pool="slow"),
        at=t - 2 * H,
    )
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
    assert "1 schedule (" in pool.stdout
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
    assert list(doc) == [
        "now",
        "counts",
        "other_runs",
        "workers",
        "schedules",
        "beat_leader",
        "beat_dispatching",
        "beat_pace",
        "overload",
        "checks",
        "redis_restart_grace",
        "outcomes_kept_in_redis",
        "beat_leader_warning",
        "foreign_workers_warning",
        "queues",
        "invalid_declarations",
    ]
    assert doc["counts"] == {"ERROR": 2, "WARNING": 1, "OK": 3}
    rows = {r["name"]: r for r in doc["schedules"]}
    assert [r["name"] for r in doc["schedules"]][:3] == ["t.late", "t.never", "t.failed"]
    keys = list(rows["t.ok"])
    assert all(list(r) == keys for r in rows.values()), "every row has the same keys"
    assert keys[:8] == [
        "name",
        "task",
        "configuration",
        "kind",
        "pool",
        "condition",
        "reason",
        "message",
    ]
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


def test_a_pattern_says_what_each_selected_schedule_is(world: World) -> None:
    t = now()
    nightly = spec(
        "t.nightly",
        "cron",
        cron_schedule="0 0 * * *",
        tz="America/New_York",
        cron_max_schedule_duration=timedelta(hours=6),
    )
    world.sync(nightly, spec("t.hourly", cooldown_duration=10 * M), at=t - 2 * H)
    one = world.invoke("status", "t.nightly")
    assert one.exit_code in (0, 1), one.output
    assert "  t.nightly: cron 0 0 * * * America/New_York, done within 6h00m" in one.stdout
    assert "t.hourly" not in one.stdout
    both = world.invoke("status", "t.*")
    assert "  t.hourly: fresh within 1h00m; cooldown 10m00s" in both.stdout
    assert "  t.nightly: cron 0 0 * * *" in both.stdout
    unfiltered = world.invoke("status")
    assert ": fresh within" not in unfiltered.stdout  # the whole fleet: the table alone
    more = (spec(f"t.p{i:02d}") for i in range(SPEC_LINES_MAX - 1))  # one too many with the two
    world.sync(nightly, spec("t.hourly"), *more, at=t - 2 * H)
    many = world.invoke("status", "t.*")
    assert ": fresh within" not in many.stdout  # more rows than SPEC_LINES_MAX
    doc = json.loads(world.invoke("status", "--json", "t.nightly").stdout)
    (row,) = doc["schedules"]
    assert row["spec_summary"] == "cron 0 0 * * * America/New_York, done within 6h00m"


def test_invalid_stored_spec_is_an_error_row(world: World, sqlite_url: str) -> None:
    world.sync(spec("t.a"), spec("t.b"), at=now())
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE dgs_schedules SET spec = '{\"kind\": \"weekly\"}' WHERE name = 't.b'")
    db.close()
    with world.store.engine.begin() as conn:  # a hand edit: the store keeps its columns anew
        refresh_kept(conn, ["t.b"], now())
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

    monkeypatch.setattr("celery_dgs.cli.status_command.time.sleep", sleep)
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
    assert "Error: Redis at redis://127.0.0.1:9/0 (broker_url) is unreachable" in result.output
    assert "Traceback" not in result.output


def test_watch_survives_an_unreachable_redis(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.app.conf.broker_url = "redis://127.0.0.1:9/0"
    monkeypatch.setattr(
        "celery_dgs.cli.status_command.time.sleep",
        lambda s: (_ for _ in ()).throw(KeyboardInterrupt),
    )
    result = world.invoke("status", "--watch", "1")
    assert result.exit_code == 0
    assert "cannot read the state: Redis at redis://127.0.0.1:9/0 (broker_url)" in result.stdout


def test_empty_store(world: World, redis_client: redis.Redis) -> None:
    result = world.invoke("status")
    assert result.exit_code == 0
    assert "0 schedules" in result.stdout
    assert "no schedules match" in result.stdout
    assert "the store (sqlite:///" in result.stdout
    assert (
        ") holds no active schedule: runtime schedules are added with celery dgs add or import"
        in result.stdout
    )
    filtered = world.invoke("status", "t.*").stdout
    assert "no schedules match" in filtered
    assert "holds no active schedule" not in filtered, "a filter says nothing of the store"

    @get_dgs(world.app).periodic(period=timedelta(hours=1))
    @world.app.task(name="t.declared")
    def declared() -> None:
        pass

    hinted = world.invoke("status").stdout
    assert (
        "holds no active schedule: beat stores the app's 1 declared schedule when it starts "
        "(celery dgs sync stores them now); runtime schedules are added" in hinted
    )
    world.sync(spec("t.a"), at=now())
    assert "holds no active schedule" not in world.invoke("status").stdout


def register(client: redis.Redis, name: str, *queues: str) -> None:
    """A live worker ``name`` (``celery@<node>``) consuming ``queues``."""
    WorkerRegistry(client, KeySpace(PREFIX), ttl=300).register(
        WorkerInfo(
            name=name, node=name.split("@")[1], queues=queues, slots=2, pool="prefork", pid=1
        )
    )


def row_of(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if line.split()[1:2] == [name])


def cell(output: str, name: str, column: str) -> str:
    """The text of ``column`` in ``name``'s row (cells are aligned under headers)."""
    header = output.splitlines()[1]
    start = header.index(column)
    after = re.search(r"\s{2}\S", header[start:])
    end = None if after is None else start + after.end() - 1
    return row_of(output, name)[start:end].strip()


def test_a_failing_schedule_says_when_it_retries(world: World, redis_client: redis.Redis) -> None:
    t = now()
    world.sync(spec("t.flaky"), spec("t.fine"), at=t - 3 * H)
    world.record("t.flaky", "success", t - 70 * M)  # ERROR since 10 min
    world.record("t.flaky", "failure", t - 20 * M)
    world.record("t.flaky", "failure", t - 2 * M, 60.0)  # ends 1 min ago: 1 h backoff (step 2)
    world.record("t.fine", "success", t - 90 * M)
    register(redis_client, "w1@node1", "celery")
    result = world.invoke("status")
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert row_of(out, "t.flaky").split()[:3] == ["ERROR", "t.flaky", "deadline_passed"]
    assert re.fullmatch(r"in 5[89]m\d\ds", cell(out, "t.flaky", "MAY RUN"))
    assert cell(out, "t.fine", "MAY RUN") == "now"
    assert re.search(
        r"^  held t\.flaky backing off: retry in 5[89]m\d\ds, failure 2 "
        r"\(retry step 2 of 3: 1h00m\)$",
        out,
        re.MULTILINE,
    ), out
    assert "held t.fine" not in out
    doc = json.loads(world.invoke("status", "--json").stdout)
    rows = {r["name"]: r for r in doc["schedules"]}
    flaky, fine = rows["t.flaky"], rows["t.fine"]
    (hold,) = flaky["holds"]
    assert (hold["reason"], hold["retry_step"], hold["retry_steps"], hold["retry_delay_s"]) == (
        "backoff",
        2,
        3,
        3600.0,
    )
    retry = datetime.fromisoformat(hold["until"])
    assert abs(retry - (t - M + H)) < timedelta(seconds=1)
    assert flaky["may_run_at"] == hold["until"]
    assert 58 * 60 < flaky["seconds_until_may_run"] <= 59 * 60
    assert 58 * 60 < hold["seconds_until"] <= 59 * 60
    assert "retry step 2 of 3 (3600s) ends at" in hold["message"]
    assert fine["holds"] == []
    assert fine["seconds_until_may_run"] == 0
    assert datetime.fromisoformat(fine["may_run_at"]) <= datetime.fromisoformat(doc["now"])


def test_paused_and_running_schedules_have_no_run_time(world: World, crafted: datetime) -> None:
    out = world.invoke("status").stdout
    assert cell(out, "t.paused", "MAY RUN") == "paused"
    assert cell(out, "t.running", "MAY RUN") == "running"
    assert (
        "  held t.paused is paused: beat dispatches it again once resumed "
        "(celery dgs resume t.paused)" in out
    )
    # No worker is registered: said once, not on each of the six schedules.
    assert out.count("no live worker is registered") == 1
    assert (
        "  held every schedule: no live worker is registered (and dgs_capacity is not "
        "set): nothing runs until one registers" in out
    )
    assert cell(out, "t.ok", "MAY RUN") == "no worker"
    rows = {r["name"]: r for r in json.loads(world.invoke("status", "--json").stdout)["schedules"]}
    assert [h["reason"] for h in rows["t.paused"]["holds"]] == ["paused", "no_worker"]
    assert rows["t.paused"]["holds"][0]["until"] is None
    assert rows["t.paused"]["may_run_at"] is None
    assert rows["t.running"]["may_run_at"] is None
    assert rows["t.running"]["seconds_until_may_run"] is None


def test_schedules_no_live_worker_can_run(world: World, redis_client: redis.Redis) -> None:
    world.sync(
        spec("t.slow", pool="slow"),
        spec("t.pinned", dont_run_on_nodes=["node1", "node2"]),
        spec("t.half", dont_run_on_nodes=["node1"]),
        spec("t.fine"),
        at=now(),
    )
    register(redis_client, "w1@node1", "celery")
    register(redis_client, "w2@node2", "celery", "reports")
    result = world.invoke("status")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert cell(out, "t.slow", "MAY RUN") == "no worker"
    assert cell(out, "t.pinned", "MAY RUN") == "no worker"
    assert cell(out, "t.half", "MAY RUN") == "now"
    assert cell(out, "t.fine", "MAY RUN") == "now"
    assert (
        "  held t.slow: no live worker consumes its pool 'slow' (live workers consume: "
        "celery, reports): it cannot run until one can" in out
    )
    assert (
        "  held t.pinned: dont_run_on_nodes excludes every live worker of its pool "
        "'celery' (nodes: node1, node2): it cannot run until one can" in out
    )
    rows = {r["name"]: r for r in json.loads(world.invoke("status", "--json").stdout)["schedules"]}
    assert [h["reason"] for h in rows["t.slow"]["holds"]] == ["no_worker"]
    assert rows["t.slow"]["may_run_at"] is None
    assert rows["t.half"]["holds"] == []
    # A worker of the pool registers: t.slow may run.
    register(redis_client, "w3@node3", "slow")
    assert cell(world.invoke("status").stdout, "t.slow", "MAY RUN") == "now"


def test_fixed_capacity_without_workers_holds_nothing(world: World, crafted: datetime) -> None:
    """With dgs_capacity beat publishes to the pool's queue without registered workers."""
    schedules = world.store.list_schedules()
    rows = build_rows(schedules, {}, crafted, workers=[], settings=DgsSettings(capacity=4))
    # t.failed's 5-minute backoff after its failure 5 minutes ago ends a second later.
    assert sorted((r.name, h.reason) for r in rows for h in r.holds) == [
        ("t.failed", "backoff"),
        ("t.paused", "paused"),
    ]
    rows = build_rows(schedules, {}, crafted, workers=[], settings=DgsSettings())
    assert all("no_worker" in [h.reason for h in r.holds] for r in rows)


def test_a_blackout_window_is_a_hold_until_its_end(world: World, redis_client: redis.Redis) -> None:
    t = now()
    window = ((t - H).strftime("%H:%M"), (t + H).strftime("%H:%M"))
    world.sync(spec("t.dark", blackout_periods=[window]), at=t - 2 * H)
    register(redis_client, "w1@node1", "celery")
    out = world.invoke("status").stdout
    assert re.fullmatch(r"in (5\dm\d\ds|1h00m)", cell(out, "t.dark", "MAY RUN"))
    assert re.search(
        r"^  held t\.dark in a blackout window: it ends in (5\dm\d\ds|1h00m)$", out, re.MULTILINE
    ), out
    (row,) = json.loads(world.invoke("status", "--json").stdout)["schedules"]
    assert [h["reason"] for h in row["holds"]] == ["blackout"]
    assert row["holds"][0]["until"] == row["may_run_at"]


def test_a_plain_word_matches_anywhere_and_a_glob_the_whole_name(
    world: World, crafted: datetime
) -> None:
    def listed(*patterns: str) -> list[str]:
        doc = json.loads(world.invoke("status", "--json", *patterns).stdout)
        return sorted(r["name"] for r in doc["schedules"])

    assert listed("unn") == ["t.running"]
    assert listed("a") == ["t.failed", "t.late", "t.paused"]
    assert listed("ok", "never") == ["t.never", "t.ok"]
    assert listed("OK") == []  # case-sensitive
    assert listed("t.?ate") == ["t.late"]
    assert listed("r*") == []  # a glob matches the whole name
    assert listed("*r*") == ["t.never", "t.running"]
    assert "flaky" in world.invoke("status", "--help").stdout


def test_the_header_counts_workers_and_slots_in_words(
    world: World, redis_client: redis.Redis
) -> None:
    world.sync(spec("t.fine"), at=now())
    register(redis_client, "w1@node1", "celery")
    assert world.invoke("status").stdout.splitlines()[0].endswith("; 1 live worker, 2 slots")
    register(redis_client, "w2@node2", "celery")
    assert world.invoke("status").stdout.splitlines()[0].endswith("; 2 live workers, 4 slots")


def test_fixed_capacity_is_shown_and_holds_nothing(world: World, crafted: datetime) -> None:
    """Without registered workers beat uses dgs_capacity slots: the header says
    so (not "0 slots") and no schedule is held for want of a worker."""
    world.app.conf.dgs_capacity = 4
    out = world.invoke("status").stdout
    assert out.splitlines()[0].endswith(
        "1 running; no live workers registered, dgs_capacity 4 slots"
    )
    assert "no live worker is registered" not in out
    assert "no worker" not in out
    assert cell(out, "t.late", "MAY RUN") == "now"


def test_a_schedule_no_worker_can_run_takes_no_slot_in_the_projection(
    world: World, redis_client: redis.Redis
) -> None:
    """t.slow (no worker of its pool) is more urgent than t.a: were it projected
    onto the one slot, t.a would be projected to start 10 min later, after its
    should_start_by, and shown projected_late."""
    t = now()
    ten = timedelta(minutes=10)
    world.sync(spec("t.slow", pool="slow", duration_override=ten), at=t - 46 * M)
    world.sync(
        spec("t.slow", pool="slow", duration_override=ten),
        spec("t.a", duration_override=ten),
        at=t - 45 * M,
    )
    WorkerRegistry(redis_client, KeySpace(PREFIX), ttl=300).register(
        WorkerInfo(
            name="w1@node1", node="node1", queues=("celery",), slots=1, pool="prefork", pid=1
        )
    )
    rows = {r["name"]: r for r in json.loads(world.invoke("status", "--json").stdout)["schedules"]}
    assert [h["reason"] for h in rows["t.slow"]["holds"]] == ["no_worker"]
    assert (rows["t.a"]["condition"], rows["t.a"]["reason"]) == ("OK", "ok")


def test_a_run_request_may_run_now_despite_its_backoff(
    world: World, redis_client: redis.Redis
) -> None:
    """Beat dispatches a requested run at once (backoff and blackouts do not
    apply to it): MAY RUN must not say "in 59m"."""
    t = now()
    world.sync(spec("t.flaky"), at=t - 3 * H)
    world.record("t.flaky", "success", t - 30 * M)
    world.record("t.flaky", "failure", t - 2 * M, 60.0)  # 5 min backoff until t + 4 min
    register(redis_client, "w1@node1", "celery")
    assert re.fullmatch(r"in [34]m\d\ds", cell(world.invoke("status").stdout, "t.flaky", "MAY RUN"))
    world.store.request_run("t.flaky", t)
    out = world.invoke("status").stdout
    assert cell(out, "t.flaky", "MAY RUN") == "now"
    assert cell(out, "t.flaky", "FLAGS") == "run-requested"
    assert "held t.flaky" not in out
    (row,) = json.loads(world.invoke("status", "--json").stdout)["schedules"]
    assert row["holds"] == []
    assert row["may_run_at"] == row["run_requested_at"]
    assert row["seconds_until_may_run"] == 0


def test_the_no_worker_hold_names_its_cause(world: World) -> None:
    world.sync(spec("t.a"), spec("t.b", dont_run_on_nodes=["n1"]), at=now())
    schedules = world.store.list_schedules()

    def why(*workers: WorkerInfo) -> dict[str, list[str]]:
        rows = build_rows(schedules, {}, now(), workers=list(workers))
        return {r.name: [h.message for h in r.holds] for r in rows}

    def worker(node: str, slots: int, *queues: str) -> WorkerInfo:
        name = f"celery@{node}"  # registered with its own direct queue, which is no pool
        return WorkerInfo(
            name=name,
            node=node,
            queues=(*queues, f"{name}.dq2"),
            slots=slots,
            pool="prefork",
            pid=1,
        )

    assert why(worker("n1", 2, "celery"), worker("n2", 0, "celery")) == {
        "t.a": [],
        "t.b": ["t.b: the live workers of its pool 'celery' it may run on have no slots"],
    }
    assert why(worker("n1", 2, "other")) == {
        "t.a": ["t.a: no live worker consumes its pool 'celery' (live workers consume: other)"],
        "t.b": ["t.b: no live worker consumes its pool 'celery' (live workers consume: other)"],
    }
    assert why() == {
        "t.a": ["t.a: no live worker is registered (and dgs_capacity is not set)"],
        "t.b": ["t.b: no live worker is registered (and dgs_capacity is not set)"],
    }
    old_code = replace(worker("n1", 2, "celery"), tasks=frozenset({"t.b"}))
    assert why(old_code, worker("n2", 2, "other")) == {
        "t.a": [
            "t.a: no live worker of its pool 'celery' it may run on has its task 't.a' "
            "(celery@n1: deploy the code with the task to them, or restart them)"
        ],
        "t.b": [
            "t.b: dont_run_on_nodes excludes every live worker of its pool 'celery' (nodes: n1)"
        ],
    }
    # A registration that does not list its tasks (an older version's) has any.
    assert why(worker("n2", 2, "celery"))["t.a"] == []


def test_the_pace_line_says_when_beat_not_the_slots_limits(
    world: World, crafted: datetime, redis_client: redis.Redis
) -> None:
    quiet = world.invoke("status")
    assert "beat pace" not in quiet.stdout, "no leading beat wrote a pace"
    key = KeySpace(PREFIX).beat_pace()
    slots_limit = {"window_s": 60, "rounds": 600, "dispatches": 2400}
    redis_client.set(key, json.dumps({**slots_limit, "busy_share": 0.1, "capped_rounds": 0}))
    result = world.invoke("status")
    assert "beat pace: 40.0 dispatches/s over the last 1m (600 rounds, busy 10% of" in result.stdout
    assert "limits the runs per second" not in result.stdout
    redis_client.set(key, json.dumps({**slots_limit, "busy_share": 0.85, "capped_rounds": 0}))
    busy = world.invoke("status")
    assert (
        "WARNING: beat, not the slots, limits the runs per second: its rounds take 85% of its time"
        in busy.stdout
    )
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["beat_pace"]["beat_limited"] is True
    assert doc["beat_pace"]["dispatches_per_s"] == 40.0
    # A leader elected a moment ago: a count, not a rate over no time.
    just = {"window_s": 0.4, "rounds": 1, "dispatches": 18, "busy_share": 0.5}
    redis_client.set(key, json.dumps({**just, "capped_rounds": 0}))
    assert (
        "beat pace: 18 dispatches in the 0.4s it has led (1 round; too short for a rate)"
        in world.invoke("status").stdout
    )


def test_the_pace_line_says_what_beats_window_holds(
    world: World, crafted: datetime, redis_client: redis.Redis
) -> None:
    key = KeySpace(PREFIX).beat_pace()
    pace = {"window_s": 60, "rounds": 600, "dispatches": 2400, "busy_share": 0.1}

    def status_with(window: dict[str, object]) -> str:
        redis_client.set(key, json.dumps({**pace, "capped_rounds": 0, "window": window}))
        return str(world.invoke("status").stdout)

    reading = {"held": 2345, "size": 1000, "full": True, "room": 11000}
    assert "window: holds 2,345 schedules of 1,000 (full; reads on up to 11,000)" in status_with(
        reading
    )
    at_room = {**reading, "held": 11000}
    assert "(full, read on to its room of 11,000)" in status_with(at_room)
    past_room = {**reading, "held": 11040}
    assert "(full, read on to its room of 11,000; the rest are due now)" in status_with(past_room)
    unchecked = {**reading, "held": 1200, "room": 1000}
    assert "holds 1,200 schedules of 1,000 (full; the rest are due now)" in status_with(unchecked)
    not_full = {**reading, "held": 40, "full": False}
    assert "holds 40 schedules of 1,000 (every one that can start within it)" in status_with(
        not_full
    )
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["beat_pace"]["window"] == not_full
    redis_client.set(key, json.dumps({**pace, "capped_rounds": 0, "window": "much"}))
    assert "beat pace" not in world.invoke("status").stdout, "a malformed pace is not shown"


def test_status_says_when_the_restart_grace_holds_schedules(world: World) -> None:
    """A schedule that ran has a token above Redis's counter (the server lost
    it) and a grant has just seen the server: one line says what is held and
    until when; a first use (the counter is the token) says nothing."""
    world.sync(spec("t.ran"), spec("t.new"), *(spec(f"t.fresh{i}") for i in range(40)), at=now())
    world.hold_lease("t.new")  # a first use: its counter is its recorded token
    world.record("t.new", "running", now())
    assert "Redis restart grace" not in world.invoke("status").stdout
    # It ran before the server was first seen: recorded token 1, no counter in Redis.
    world.record("t.ran", "success", now() - timedelta(minutes=5))
    for i in range(40):  # schedules that never ran start since: granted at once
        world.hold_lease(f"t.fresh{i}")
        world.record(f"t.fresh{i}", "running", now())
    out = world.invoke("status").stdout
    [line] = [x for x in out.splitlines() if x.startswith("Redis restart grace:")]
    assert "(restarted, failed over or first used)" in line
    assert re.search(r"until \d\d:\d\d:\d\d UTC \(in [\d.]+s: ping_timeout \+ steal_delay\)", line)
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert 0 < doc["redis_restart_grace"]["seconds_left"] <= 7.0


def test_status_warns_when_the_leading_beat_serves_another_store(
    world: World, redis_client: redis.Redis
) -> None:
    world.sync(spec("t.a"), at=now())
    leader = RedisLeader(redis_client, KeySpace(PREFIX), timeout=30)
    leader.elect(owner_tag="x", owner_node="host9", owner_pid=7, store=world.store.store_id())
    assert "WARNING the leading beat" not in world.invoke("status").stdout
    leader.resign("x")
    leader.elect(owner_tag="y", owner_node="host9", owner_pid=8, store="another-store")
    result = world.invoke("status")
    assert result.exit_code == 1, "no beat dispatches this store's schedules"
    out = result.stdout
    [line] = [x for x in out.splitlines() if x.startswith("WARNING the leading beat")]
    assert line.startswith("WARNING the leading beat (host9/8) serves another schedule store")
    assert f"key prefix {PREFIX!r}" in line
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["beat_dispatching"] is False
    assert doc["beat_leader"]["store"] == "another-store"
    assert doc["beat_leader_warning"] == line.removeprefix("WARNING ")


def test_a_run_whose_owner_stopped_pinging_says_when_it_can_be_taken_over(
    world: World, redis_client: redis.Redis
) -> None:
    """The owner is silent past dgs_ping_timeout (5 s here): the RUNNING cell
    says so, and a note says when the schedule can run again."""
    world.sync(spec("t.slow"), at=now())
    world.hold_lease("t.slow", progress=0.48)
    key = KeySpace(PREFIX).lease("t.slow")
    assert "silent" not in world.invoke("status").stdout
    ms = int(redis_client.hget(key, "last_ping_at") or 0)
    redis_client.hset(key, "last_ping_at", ms - 4_000)
    out = world.invoke("status").stdout
    assert "silent" not in out  # within ping_timeout
    redis_client.hset(key, "last_ping_at", ms - 6_000)
    out = world.invoke("status").stdout
    assert re.search(r"w1@node1 \([\d.]+s, 48%, silent 6\.\ds\)", out), out
    [note] = [x.strip() for x in out.splitlines() if "has not pinged" in x]
    assert re.fullmatch(
        r"t\.slow: its owner w1@node1 has not pinged for 6\.\ds \(dgs_ping_timeout 5\.0s\): "
        r"it may have died; its lease can be taken over in [01]\.\ds \(ping_timeout \+ "
        r"steal_delay after its last ping\); the schedule may run again from then, when beat's "
        r"order reaches it",
        note,
    ), note
    redis_client.hset(key, "steal_start_at", ms - 3_000)  # a sweep marked it 3 s ago
    out = world.invoke("status").stdout
    assert "taken over at beat's next round (steal_delay after beat marked it)" in out


def test_a_silent_owners_schedule_runs_again_when_it_can_start_not_at_the_takeover(
    world: World,
) -> None:
    """The lease of a dead owner's run (asked for with ``run``) can be taken
    over after ping_timeout + steal_delay, but the schedule starts again only
    once its cooldown after the last good run has passed: the note gives
    that moment."""
    world.dead_owners_run("t.cool")
    out = world.invoke("status").stdout
    [note] = [x.strip() for x in out.splitlines() if "has not pinged" in x]
    assert "its lease can be taken over at beat's next round" in note, note
    assert re.search(
        r"; the schedule may run again from when it can start, in (8m5\d|9m00)s \(\d{4}-\d\d-\d\d "
        r"[\d:]{8}Z\), when beat's order reaches it, and the run is recorded stolen then$",
        note,
    ), note


def test_a_run_whose_worker_restarted_under_its_name_is_said_to_have_ended(
    world: World, redis_client: redis.Redis
) -> None:
    """``kill -9`` and a process manager restarting ``w1@node1``: its new
    instance registers after the run's last ping, so the run ended with the
    earlier one, before the ping timeout tells."""
    world.sync(spec("t.slow"), at=now())
    world.hold_lease("t.slow")  # w1@node1's run, pinged now
    key = KeySpace(PREFIX).lease("t.slow")
    ms = int(redis_client.hget(key, "last_ping_at") or 0)
    redis_client.hset(key, "last_ping_at", ms - 2_000)  # within dgs_ping_timeout (5 s)
    out = world.invoke("status").stdout
    assert "owner restarted" not in out
    assert "has not pinged" not in out
    registry = WorkerRegistry(redis_client, KeySpace(PREFIX), ttl=300)
    registry.register(
        WorkerInfo(
            name="w1@node1", node="node1", queues=("celery",), slots=2, pool="prefork", pid=2
        )
    )
    out = world.invoke("status").stdout
    assert re.search(r"w1@node1 \([\d.]+s, owner restarted\)", out), out
    [note] = [x.strip() for x in out.splitlines() if "restarted" in x and "t.slow:" in x]
    assert re.match(
        r"t\.slow: its owner w1@node1 restarted (now|[\d.]+s ago), after the run's last "
        r"ping: the run ended with its earlier process; its lease can be taken over in [\d.]+s "
        r"\(ping_timeout \+ steal_delay after its last ping\); the schedule may run again from "
        r"then, when beat's order reaches it$",
        note,
    ), note


def test_limit_zero_gives_the_counts_alone(world: World) -> None:
    world.sync(spec("t.a"), spec("t.b"), at=now())
    out = world.invoke("status", "--limit", "0").stdout.splitlines()
    assert "2 schedules (0 ERROR, 0 WARNING, 2 OK)" in out[0]
    assert out[1].startswith("beat leader:")  # no "not listed": none was asked for
    one = world.invoke("status", "--limit", "1").stdout.splitlines()
    assert "1 more not listed (--limit N, a PATTERN or --condition; --json lists all)" in one
    nothing = world.invoke("status", "nothing").stdout.splitlines()
    assert nothing[1] == "no schedules match"
    assert nothing[2].startswith("beat leader:"), "a plain word needs no hint"
    glob = world.invoke("status", "a*", "t.[").stdout.splitlines()
    assert glob[1:3] == [
        "no schedules match",
        "a pattern with *, ? or [ is a glob on the whole name (proj.scrape@*, *@src1?); a "
        "plain word matches anywhere in it; in 't.[' a [ without ] is a plain character",
    ]
    matched = world.invoke("status", "t.[ab]").stdout
    assert "2 schedules" in matched
    assert "a pattern with" not in matched, "said only when nothing matched"


def test_another_stores_workers_are_not_counted_and_are_named(
    world: World, redis_client: redis.Redis
) -> None:
    """Two projects on one key prefix: the header counts this store's workers
    (those beat places on); the others are named in a warning, with or
    without --project."""
    world.sync(spec("t.a"), at=now())
    registry = WorkerRegistry(redis_client, KeySpace(PREFIX), ttl=300)
    for name, store in (("celery@ours", world.store.store_id()), ("celery@theirs", "other")):
        registry.register(
            WorkerInfo(
                name=name,
                node=name[7:],
                queues=("celery",),
                slots=3,
                pool="solo",
                pid=1,
                store=store,
            )
        )
    for args in ((), ("--project",)):
        out = world.invoke("status", *args).stdout
        assert "1 live worker, 3 slots" in out, (args, out)
        assert "WARNING 1 live worker(s) (celery@theirs) serve another schedule store" in out
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert "(celery@theirs) serve another schedule store" in doc["foreign_workers_warning"]


def test_the_runs_the_running_count_leaves_out_are_named(world: World, crafted: datetime) -> None:
    """A removed schedule's last run and a deferred check's run hold leases
    (and slots) outside the fleet's active schedules: the whole fleet's page
    says so below its header; a filtered page counts only what it selects."""
    world.store.sync([spec(n) for n in ("t.ok", "t.late", "t.failed", "t.running")], crafted)
    world.hold_lease("t.never")  # removed from the declarations, its run goes on
    world.hold_lease("t.check@check:order-1")
    out = world.invoke("status").stdout
    assert "1 running;" in out.splitlines()[0]
    assert (
        "also running: 1 deferred check, 1 schedule removed or no longer declared; "
        "celery dgs leases lists every run" in out
    )
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["other_runs"] == {"checks": 1, "inactive": 1}
    filtered = world.invoke("status", "t.ok")
    assert "also running" not in filtered.stdout
    assert json.loads(world.invoke("status", "--json", "t.ok").stdout)["other_runs"] is None
    world.store.sync(
        [spec(n) for n in ("t.ok", "t.late", "t.failed", "t.running", "t.never")], crafted
    )
    assert "also running: 1 deferred check;" in world.invoke("status").stdout


def test_each_queues_slots_and_busy_ones_are_shown_and_a_pool_filter_counts_its_own(
    world: World, redis_client: redis.Redis
) -> None:
    """A pool whose slots are all busy serves nothing more until one ends:
    with workers of several queues, the header says each queue's slots and
    how many are busy; ``--pool`` counts that pool's workers."""
    world.sync(spec("t.a"), spec("t.gpu", pool="gpu"), at=now())
    registry = WorkerRegistry(redis_client, KeySpace(PREFIX), ttl=300)
    store_id = world.store.store_id()
    for name, queues, slots in (("w1@cpu", ("celery",), 2), ("w1@gpunode", ("gpu",), 1)):
        registry.register(
            WorkerInfo(
                name=name,
                node=name[3:],
                queues=(*queues, f"{name}.dq2"),  # as a worker registers: its direct queue too
                slots=slots,
                pool="threads",
                pid=1,
                store=store_id,
            )
        )
    world.hold_lease("t.gpu", node="gpunode")
    lines = world.invoke("status").stdout.splitlines()
    assert "2 live workers, 3 slots" in lines[0]
    assert "queues: celery 2 slots (0 busy); gpu 1 slot (all busy)" in lines
    gpu = world.invoke("status", "--pool", "gpu").stdout.splitlines()
    assert "1 schedule (" in gpu[0]
    assert "1 live worker, 1 slot" in gpu[0], "the pool's own"
    assert "queues: gpu 1 slot (all busy)" in gpu
    assert "no live worker consumes 'tpu'" in world.invoke("status", "--pool", "tpu").stdout
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["queues"] == [
        {"queue": "celery", "workers": 1, "slots": 2, "busy": 0},
        {"queue": "gpu", "workers": 1, "slots": 1, "busy": 1},
    ]


def test_the_projection_replays_each_pool_on_its_own_slots(world: World) -> None:
    """Twenty 10-minute gpu schedules due within the hour on the gpu pool's one
    slot cannot all start on time, though the fleet's 21 slots could run them:
    the replay puts each pool on its own workers' slots."""
    t = now()
    gpu = [
        spec(f"t.gpu{i:02d}", pool="gpu", duration_override=timedelta(minutes=10))
        for i in range(20)
    ]
    world.sync(*gpu, spec("t.cpu"), at=t - timedelta(minutes=20))
    schedules = world.store.list_schedules()

    def worker(node: str, slots: int, queue: str) -> WorkerInfo:
        return WorkerInfo(
            name=f"celery@{node}", node=node, queues=(queue,), slots=slots, pool="solo", pid=1
        )

    workers = [worker("g", 1, "gpu"), worker("c", 20, "celery")]
    rows = build_rows(schedules, {}, now(), slots=21, workers=workers)
    late = [r for r in rows if r.reason == "projected_late"]
    assert late, "the gpu pool's one slot cannot start them all on time"
    assert all(r.name.startswith("t.gpu") for r in late)
    assert "on 1 slot of pool 'gpu' is projected to start it at" in late[0].message
    one_pool = build_rows(schedules, {}, now(), slots=21, workers=workers[:1])
    assert not [r for r in one_pool if r.reason == "projected_late"], "one pool: the 21 slots"


def test_a_silent_owner_alone_in_its_pool_leaves_the_schedule_to_wait_for_a_worker(
    world: World, redis_client: redis.Redis
) -> None:
    """The dead owner was the only worker consuming the schedule's pool (its
    registration lives on until dgs_worker_ttl): the note does not promise
    the schedule runs again at the takeover, as no live worker can run it."""
    registry = WorkerRegistry(redis_client, KeySpace(PREFIX), ttl=300)
    for name, queue in (("w1@node1", "celery"), ("w2@node2", "reports")):
        registry.register(
            WorkerInfo(name=name, node=name[3:], queues=(queue,), slots=1, pool="prefork", pid=1)
        )
        # registered before the run's last ping: not a restart
        redis_client.hset(KeySpace(PREFIX).worker(name), "registered_at", 0)
    world.dead_owners_run("t.cool")
    out = world.invoke("status").stdout
    [note] = [x.strip() for x in out.splitlines() if "has not pinged" in x]
    assert note.endswith(
        "its lease can be taken over at beat's next round (steal_delay after beat marked "
        "it), but no other live worker consumes its pool 'celery': the schedule may run again "
        "once one does (its owner restarted, or another started)"
    ), note
    registry.register(
        WorkerInfo(name="w3@node3", node="node3", queues=("celery",), slots=1, pool="solo", pid=3)
    )
    out = world.invoke("status").stdout
    [note] = [x.strip() for x in out.splitlines() if "has not pinged" in x]
    assert "no other live worker" not in note
    assert "the run is recorded stolen then" in note
