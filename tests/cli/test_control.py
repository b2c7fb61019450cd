"""``run``, ``pause``, ``resume``, ``cancel``: each says what it changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from celery_dgs.embedded import free_port
from celery_dgs.leases import LeaseInfo, PingStatus, RedisLeases
from celery_dgs.store.sql import SqlScheduleStore
from tests.cli.conftest import World, make_app, now, spec


@pytest.fixture
def synced(world: World) -> World:
    world.sync(spec("t.a"), spec("t.b"), at=now() - timedelta(minutes=5))
    return world


def test_run_requests_an_ad_hoc_run_once(synced: World) -> None:
    first = synced.invoke("run", "t.a")
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("requested a run of t.a at ")
    assert "ahead of scheduled work" in first.stdout
    assert "note:" not in first.stdout
    requested = synced.store.get("t.a").run_requested_at
    assert requested is not None
    assert abs(requested - now()) < timedelta(seconds=5)
    again = synced.invoke("run", "t.a")
    assert again.exit_code == 0
    assert "was already requested" in again.stdout
    assert "nothing changed" in again.stdout
    assert synced.store.get("t.a").run_requested_at == requested


def test_run_with_a_priority_is_served_in_that_class(synced: World) -> None:
    result = synced.invoke("run", "t.a", "--priority", "70")
    assert result.exit_code == 0, result.output
    assert "in priority class 70" in result.stdout
    row = synced.store.get("t.a")
    assert row.run_requested_priority == 70
    moved = synced.invoke("run", "t.a")  # asked again without: the default class 0
    assert moved.exit_code == 0, moved.output
    assert "now served in priority class 0" in moved.stdout
    assert synced.store.get("t.a").run_requested_priority is None
    assert synced.store.get("t.a").run_requested_at == row.run_requested_at
    bad = synced.invoke("run", "t.b", "--priority", "100")
    assert bad.exit_code == 2
    assert "--priority" in bad.output
    assert synced.store.get("t.b").run_requested_at is None


def test_run_of_a_running_or_paused_schedule_says_when_it_starts(synced: World) -> None:
    synced.hold_lease("t.a")
    synced.store.set_paused("t.a", True)
    result = synced.invoke("run", "t.a")
    assert result.exit_code == 0
    assert "note: t.a is running on w1@node1; the requested run starts after that run ends" in (
        result.stdout
    )
    assert "note: t.a is paused; the requested run starts once it is resumed" in result.stdout


def test_run_of_an_inactive_schedule_is_refused(synced: World) -> None:
    synced.store.sync([spec("t.b")], now())  # t.a no longer declared
    result = synced.invoke("run", "t.a")
    assert result.exit_code == 1
    assert "t.a is inactive" in result.output
    assert "nothing changed" in result.output
    assert synced.store.get("t.a").run_requested_at is None


def test_pause_and_resume(synced: World) -> None:
    paused = synced.invoke("pause", "t.a")
    assert paused.exit_code == 0
    assert paused.stdout.startswith("paused t.a (was not running)")
    assert synced.store.get("t.a").paused
    assert synced.invoke("pause", "t.a").stdout == "t.a was already paused; nothing changed\n"
    resumed = synced.invoke("resume", "t.a")
    assert resumed.stdout == "resumed t.a: beat schedules it again\n"
    assert not synced.store.get("t.a").paused
    assert synced.invoke("resume", "t.a").stdout == "t.a was not paused; nothing changed\n"
    synced.invoke("pause", "t.a")
    synced.invoke("run", "t.a")
    assert synced.invoke("resume", "t.a").stdout == (
        "resumed t.a: beat schedules it again; its requested run starts at the next free slot\n"
    )


def test_pause_while_running_keeps_the_run(synced: World) -> None:
    synced.hold_lease("t.b")
    result = synced.invoke("pause", "t.b")
    assert "paused t.b (was running: w1@node1 keeps its current run)" in result.stdout
    lease = synced.leases.get("t.b")
    assert lease is not None
    assert not lease.cancel_requested


def test_pause_and_run_with_redis_unreachable_say_the_change_is_made(
    synced: World, sqlite_url: str
) -> None:
    # The pause and the run request are the store's; only the note on the
    # live run reads Redis.
    offline = replace(synced, app=make_app(sqlite_url, f"redis://127.0.0.1:{free_port()}/0"))
    try:
        paused = offline.invoke("pause", "t.a")
        assert paused.exit_code == 0, paused.output
        assert paused.stdout.startswith("paused t.a (whether it was running is unknown); ")
        assert "note: its live run could not be read (Redis: " in paused.stdout
        assert "the change is made" in paused.stdout
        assert synced.store.get("t.a").paused
        ran = offline.invoke("run", "t.b")
        assert ran.exit_code == 0, ran.output
        assert ran.stdout.startswith("requested a run of t.b at ")
        assert "note: its live run could not be read (Redis: " in ran.stdout
        assert synced.store.get("t.b").run_requested_at is not None
    finally:
        offline.app.close()


def test_cancel(synced: World) -> None:
    none = synced.invoke("cancel", "t.a")
    assert none.exit_code == 0
    assert none.stdout == "t.a has no live run; nothing to cancel\n"
    token = synced.hold_lease("t.a")
    done = synced.invoke("cancel", "t.a")
    assert done.exit_code == 0
    assert done.stdout.startswith(
        f"requested cancel of t.a's run tag-t.a on w1@node1 (token {token})"
    )
    assert "the worker stops it at its next ping (every 1.0s) and records it cancelled" in (
        done.stdout
    )
    assert "a run that ends before that ping is recorded as it ends" in done.stdout
    assert "the schedule is not paused: beat dispatches it again when it is due" in done.stdout
    assert "celery dgs pause t.a keeps it from running" in done.stdout
    lease = synced.leases.get("t.a")
    assert lease is not None
    assert lease.cancel_requested
    again = synced.invoke("cancel", "t.a")
    assert "was already requested; nothing changed" in again.stdout


def test_cancel_by_token_or_run_id_of_a_run_that_is_not_live(synced: World) -> None:
    token = synced.hold_lease("t.a")
    for option in (["--token", str(token + 1)], ["--run-id", "run-1"]):
        missed = synced.invoke("cancel", "t.a", *option)
        assert missed.exit_code == 0
        assert missed.stdout.endswith(
            f"is not running (the live run is tag-t.a on w1@node1, token {token}); "
            "nothing cancelled\n"
        ), missed.stdout
    lease = synced.leases.get("t.a")
    assert lease is not None
    assert not lease.cancel_requested
    hit = synced.invoke("cancel", "t.a", "--token", str(token), "--run-id", "tag-t.a")
    assert hit.stdout.startswith(
        f"requested cancel of t.a's run tag-t.a on w1@node1 (token {token})"
    )


def _run_swapped_after_read(
    synced: World, monkeypatch: pytest.MonkeyPatch, *, start_next: bool
) -> None:
    """The CLI reads the lease; before its cancel lands, that run ends (and
    with ``start_next`` another starts), on the real Redis."""
    real_get = RedisLeases.get

    def get_then_swap(self: RedisLeases, schedule: str) -> LeaseInfo | None:
        lease = real_get(self, schedule)
        if lease is not None:
            assert synced.leases.release(schedule, lease.owner_tag)
            if start_next:
                assert synced.leases.acquire(
                    schedule, owner_node="node2", owner_name="w2@node2", owner_tag="run-2"
                ).granted
        return lease

    monkeypatch.setattr(RedisLeases, "get", get_then_swap)


def test_cancel_read_run_1_but_run_2_started_cancels_nothing(
    synced: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = synced.hold_lease("t.a")
    _run_swapped_after_read(synced, monkeypatch, start_next=True)
    result = synced.invoke("cancel", "t.a")
    monkeypatch.undo()
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"t.a's run tag-t.a on w1@node1 (token {token}) ended meanwhile and run run-2 "
        f"(token {token + 1}) started; nothing cancelled (run the command again to cancel "
        "the new run)\n"
    )
    lease = synced.leases.get("t.a")
    assert lease is not None
    assert (lease.owner_tag, lease.cancel_requested) == ("run-2", False)
    assert synced.leases.ping("t.a", "run-2").status is PingStatus.OK


def test_cancel_read_a_run_that_ended_meanwhile(
    synced: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = synced.hold_lease("t.a")
    _run_swapped_after_read(synced, monkeypatch, start_next=False)
    result = synced.invoke("cancel", "t.a")
    monkeypatch.undo()
    assert result.stdout == (
        f"t.a's run tag-t.a on w1@node1 (token {token}) ended meanwhile; nothing to cancel\n"
    )


@pytest.mark.parametrize("command", ["run", "pause", "resume", "cancel", "runs"])
def test_unknown_schedule_is_exit_status_2(synced: World, command: str) -> None:
    result = synced.invoke(command, "t.c")
    assert result.exit_code == 2
    assert "Invalid value for 'NAME': no schedule named 't.c'" in result.output


def test_unknown_schedule_in_an_empty_store_says_how_to_fill_it(world: World) -> None:
    result = world.invoke("pause", "t.a")
    assert result.exit_code == 2
    assert "the store has no schedules: run `celery dgs sync` or start beat" in result.output


def test_a_declared_schedule_not_stored_yet_says_how_to_store_it(world: World) -> None:
    world.app.conf.dgs_schedules = {"t.new": {"period": 3600}}

    def new() -> None:
        pass

    world.app.task(name="t.new", shared=False)(new)
    result = world.invoke("pause", "t.new")
    assert result.exit_code == 2
    assert (
        "no schedule named 't.new' in the store: this app declares it, but it is not stored "
        "yet (beat stores the declarations at its start; or run `celery dgs sync`)"
    ) in " ".join(result.output.split())


def test_several_names_are_acted_on_each_and_said_each(synced: World) -> None:
    paused = synced.invoke("pause", "t.a", "t.b", "t.a")
    assert paused.exit_code == 0, paused.output
    assert paused.output.splitlines() == [
        "paused t.a (was not running); beat dispatches no new run until resumed",
        "paused t.b (was not running); beat dispatches no new run until resumed",
    ]
    again = synced.invoke("resume", "t.b", "t.a")
    assert again.exit_code == 0, again.output
    assert [line.split(":")[0] for line in again.output.splitlines()] == [
        "resumed t.b",
        "resumed t.a",
    ]


def test_an_unknown_name_among_several_changes_nothing(synced: World) -> None:
    result = synced.invoke("pause", "t.a", "t.c")
    assert result.exit_code == 2
    assert "no schedule named 't.c'" in result.output
    assert "nothing changed (of 2 names)" in result.output, "it says t.a was left alone"
    assert not synced.store.get("t.a").paused


def test_a_refused_name_among_several_is_an_error_and_the_others_are_acted_on(
    synced: World,
) -> None:
    synced.sync(spec("t.b"), at=now())  # t.a is no longer declared: inactive
    result = synced.invoke("run", "t.a", "t.b")
    assert result.exit_code == 1
    assert "Error: t.a is inactive" in result.output
    assert "requested a run of t.b" in result.output
    assert synced.store.get("t.b").run_requested_at is not None


def test_cancel_by_token_or_run_id_takes_one_name(synced: World) -> None:
    result = synced.invoke("cancel", "t.a", "t.b", "--token", "3")
    assert result.exit_code == 2
    assert "--token and --run-id name one run: give one NAME with them" in result.output


def test_a_misspelt_name_is_matched_without_reading_every_schedule(
    synced: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def every_row(*args: object, **kwargs: object) -> None:
        raise AssertionError("the suggestions read every schedule")

    monkeypatch.setattr(SqlScheduleStore, "list_schedules", every_row)
    result = synced.invoke("pause", "t.aa")
    assert result.exit_code == 2
    assert "no schedule named 't.aa'; did you mean t.a" in result.output


def test_a_misspelt_name_suggests_the_closest_of_its_task_not_every_one() -> None:
    from celery_dgs.ops.lookup import close_names

    known = [f"tz.scrape@src{i:05d}" for i in range(295, 300)] + ["tz.other@x"]
    assert close_names("tz.scrape@nosuch", known) == []  # a shared task is no likeness
    assert close_names("tz.scrape@src00299x", known)[0] == "tz.scrape@src00299"
    assert close_names("tz.scrap@src00299", known)[0] == "tz.scrape@src00299"
    assert close_names("t.scrape", ["t.scrap", "t.other"]) == ["t.scrap"]
