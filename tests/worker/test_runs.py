"""Defects of ``supervised_run`` found by review, each reproduced with a real
Redis-compatible server and a real SQLite store (the single-run and fencing invariants).

The task body runs on a thread of the test, as in a threads pool.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.embedded import RedisServerProcess
from celery_dgs.runtime import Runtime
from celery_dgs.worker import run_records
from celery_dgs.worker import runs as runs_module
from celery_dgs.worker.runs import supervised_run
from celery_dgs.worker.supervisor import RunTerminated, current_supervisor
from tests.worker.helpers import SPEC, Request, in_thread, make_runtime, only_run, supervisor


def test_a_start_recorded_after_the_fence_time_never_runs_the_body(
    rt: Runtime,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Another writer holds SQLite's write lock for longer than fence_after (0.75 s):
    # record_run_start waits on the busy timeout, the lease could be taken meanwhile.
    blocker = sqlite3.connect(db_path, timeout=5, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    threading.Timer(1.3, blocker.rollback).start()

    # The local wall clock jumps a day ahead: the recorded end must not follow it.
    class JumpedClock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) + timedelta(days=1)

    monkeypatch.setattr(run_records, "datetime", JumpedClock)
    ran: list[bool] = []
    box = in_thread(lambda: supervised_run(rt, SPEC, Request(), lambda: ran.append(True), (), {}))
    blocker.close()
    assert "raised" not in box
    assert ran == []  # the body never started
    run = only_run(rt)
    assert run.outcome == "self_fenced"
    assert run.error is not None
    assert "did not run" in run.error
    assert run.ended_at is not None
    assert timedelta(seconds=0.75) <= run.ended_at - run.started_at < timedelta(seconds=5)


def test_a_prompt_start_runs_the_body(redis_url: str, db_path: Path) -> None:
    # Fenced after 9.75 s: a loaded machine has taken over a second to record
    # a start, which the 0.75 s of the other tests' runtime would fence.
    rt = make_runtime(redis_url, db_path, ping_timeout=10.0)
    try:
        box = in_thread(lambda: supervised_run(rt, SPEC, Request(), lambda: 42, (), {}))
        assert box.get("value") == 42
        assert only_run(rt).outcome == "success"
    finally:
        rt.close()


def test_an_interruption_racing_the_return_is_recorded_and_releases_the_lease(
    rt: Runtime,
) -> None:
    """interrupt() passed its check of ``_done``, then the body returned and
    finish() ran before the asynchronous exception was set: it must not surface
    in the recording of the end (row left running, lease kept, exception escaping)."""
    may_return = threading.Event()
    recorded = threading.Event()

    class Stall(logging.Handler):
        # interrupt() logs between its check and the delivery: stall it there
        # until the body has returned and its end has been recorded (or 1 s).
        def emit(self, record: logging.LogRecord) -> None:
            if "stopping run" in record.getMessage():
                may_return.set()
                recorded.wait(1.0)

    def body() -> str:
        sup = current_supervisor()
        assert sup is not None
        rt.leases.request_cancel(SPEC.name, owner_tag=sup.run_id)  # next ping: interrupt
        while not may_return.is_set():
            time.sleep(0.001)
        return "done"

    def run() -> Any:
        try:
            value = supervised_run(rt, SPEC, Request(), body, (), {})
        finally:
            recorded.set()
        for _ in range(300):  # a stray interruption would surface here, after the run
            time.sleep(0.001)
        return value

    handler = Stall()
    logging.getLogger("celery_dgs.worker").addHandler(handler)
    try:
        box = in_thread(run)
    finally:
        logging.getLogger("celery_dgs.worker").removeHandler(handler)
    assert "raised" not in box, box.get("raised")
    assert box["value"] == "done"
    run_row = only_run(rt)
    assert run_row.outcome != "running"
    assert rt.leases.all() == []


def test_a_redis_failure_at_acquire_records_a_skip(
    fresh_redis_server: RedisServerProcess,
    fresh_rt: Runtime,
) -> None:
    fresh_redis_server.stop()
    box = in_thread(lambda: supervised_run(fresh_rt, SPEC, Request(), lambda: 1, (), {}))
    assert "raised" not in box, box.get("raised")
    assert box["value"] is None
    run = only_run(fresh_rt)
    assert run.outcome == "skipped"
    assert run.error is not None
    assert "acquiring the lease failed" in run.error
    assert abs(run.started_at - datetime.now(timezone.utc)) < timedelta(seconds=30)


def test_a_redis_failure_taking_back_an_excluded_dispatch_records_the_skip(
    fresh_redis_server: RedisServerProcess,
    fresh_rt: Runtime,
) -> None:
    spec = PeriodicSpec(
        task="s", scheduling_period=timedelta(hours=1), dont_run_on_nodes=("node-a",)
    )
    fresh_redis_server.stop()

    class Dispatched(Request):
        dgs_dispatch_id = "d1"

    box = in_thread(lambda: supervised_run(fresh_rt, spec, Dispatched(), lambda: 1, (), {}))
    assert "raised" not in box, box.get("raised")
    run = only_run(fresh_rt)
    assert run.outcome == "skipped"
    assert run.error is not None
    assert "excluded" in run.error


def test_an_interruption_from_another_thread_never_lands_after_finish() -> None:
    """As at warm shutdown (hooks.py interrupts from the worker's thread, not
    the heartbeat's): interrupt() checked ``_done``, then the run finished,
    then the exception was set. It must be delivered before finish() or not at
    all; one pending when finish() takes over is cleared."""
    checked = threading.Event()

    class Stall(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "stopping run" in record.getMessage():
                checked.set()
                time.sleep(0.5)  # the run finishes meanwhile (old code)

    box: dict[str, Any] = {}

    def task_thread() -> None:
        sup = supervisor(ping_interval=10, termination_grace=10)
        box["sup"] = sup
        sup.start()
        try:
            box["ready"].set()
            checked.wait(5)  # the body returns as the interruption is on its way
            runs_module._stop_heartbeat(sup)
            for _ in range(1000):  # a late interruption would surface here
                time.sleep(0.001)
            box["clean"] = True
        except RunTerminated as exc:
            box["late"] = exc

    box["ready"] = threading.Event()
    handler = Stall()
    logging.getLogger("celery_dgs.worker").addHandler(handler)
    try:
        t = threading.Thread(target=task_thread)
        t.start()
        box["ready"].wait(5)
        box["sup"].interrupt("yielded", "the worker is shutting down")
        t.join(timeout=10)
    finally:
        logging.getLogger("celery_dgs.worker").removeHandler(handler)
    assert box.get("clean") is True, box.get("late")


def test_a_stolen_run_that_ignores_its_interruption_is_ended_within_half_a_ping() -> None:
    """docs/guarantees.md G3: a resumed, taken-over owner is stopped within
    ``ping_interval / 2`` of its interruption, not after ``termination_grace``."""
    ended: list[float] = []
    box: dict[str, Any] = {}

    def task_thread() -> None:
        sup = supervisor(
            ping=lambda p: "NOT_OWNER",
            ping_interval=0.4,
            termination_grace=10,
            on_unresponsive=lambda stop: ended.append(time.monotonic()),
        )
        box["sup"] = sup
        sup.start()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not ended:
            try:
                time.sleep(0.01)
            except RunTerminated:
                box.setdefault("interrupted", time.monotonic())  # ignored
        sup.finish()

    t = threading.Thread(target=task_thread)
    t.start()
    t.join(timeout=10)
    sup = box["sup"]
    assert sup.interruption is not None
    assert sup.interruption.outcome == "stolen"
    assert ended, "the unresponsive stolen run was not ended"
    # Half the ping interval by design; the slack is for a loaded machine's
    # thread wake-ups, far below the termination grace the run would wait out.
    assert ended[0] - box["interrupted"] < 0.4 / 2 + 0.8


def _yielding_run_that_ignores_it(
    answers: list[str], ended: list[RunTerminated], box: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A run on a thread (as in a threads pool) told to yield, which ignores
    it for 1.5 s past a 0.3 s grace; its pings answer ``answers`` in turn
    (the last one repeated). Returns ``box`` with the supervisor (set as soon
    as it exists) and the pings sent."""
    box = {} if box is None else box
    box["pings"] = 0

    def ping(progress: float | None) -> str:
        box["pings"] += 1
        return answers[min(box["pings"], len(answers)) - 1]

    def task_thread() -> None:
        sup = supervisor(
            ping=ping,
            ping_interval=0.1,
            termination_grace=0.3,
            fence_after=0.5,
            on_unresponsive=ended.append,
        )
        box["sup"] = sup
        sup.start()
        deadline = time.monotonic() + 1.8
        while time.monotonic() < deadline and not ended:
            try:
                sup.interrupt("yielded", "the worker is shutting down")  # once: then a no-op
                time.sleep(0.01)
            except RunTerminated:
                pass  # ignored, as a blocking call would
        box["pings_before_finish"] = box["pings"]
        sup.finish()

    t = threading.Thread(target=task_thread)
    t.start()
    t.join(timeout=10)
    return box


def test_a_yielding_run_sharing_its_process_is_waited_for_its_lease_pinged() -> None:
    """At a warm shutdown, a run on a thread of the threads pool that does not
    stop within the grace is waited for, as Celery waits for its other tasks
    (ending the process would lose them), and its lease is pinged meanwhile."""
    ended: list[RunTerminated] = []
    box = _yielding_run_that_ignores_it(["OK"], ended)
    assert ended == [], "its process was ended"
    # 1.5 s past the grace at a ping every 0.1 s; the slack is a loaded machine's.
    assert box["pings_before_finish"] >= 5, box


def test_a_yielding_run_waited_for_ends_its_process_once_the_shutdown_turns_cold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warm shutdown waits for the run; a cold one (a second Ctrl-C, or the
    soft shutdown's timeout) does not: its process ends, the run yielded."""
    from celery_dgs.worker import shutdown

    monkeypatch.setattr(shutdown, "_cold", threading.Event())
    monkeypatch.setattr(shutdown, "_leaving", threading.Event())
    ended: list[RunTerminated] = []

    def turn_cold() -> None:
        time.sleep(0.6)  # past the 0.3 s grace: waited for
        assert not ended
        shutdown.mark_cold_shutdown()
        box["sup"].interrupt("yielded", "the worker is shutting down")  # as stop_runs does

    box: dict[str, Any] = {}
    threading.Thread(target=turn_cold, daemon=True).start()
    box.update(_yielding_run_that_ignores_it(["OK"], ended, box))
    assert [stop.outcome for stop in ended] == ["yielded"]


def test_a_yielding_run_whose_redis_went_silent_before_the_yield_ends_by_kill_after() -> None:
    """Redis was unreachable before the warm shutdown came: the run waited
    for at shutdown fences itself ``fence_after`` after its last good ping,
    not after the wait began, so its process is gone by ``kill_after``
    (before a take-over is possible)."""
    ended: list[tuple[float, RunTerminated]] = []
    box: dict[str, Any] = {}

    def task_thread() -> None:
        sup = supervisor(
            ping=lambda progress: "FAILED",
            ping_interval=0.1,
            termination_grace=0.1,
            fence_after=1.0,
            kill_after=1.2,
            on_unresponsive=lambda stop: ended.append((time.monotonic(), stop)),
        )
        box["sup"], box["start"] = sup, time.monotonic()
        sup.start()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not ended:
            try:
                if time.monotonic() - box["start"] > 0.4:
                    sup.interrupt("yielded", "the worker is shutting down")
                time.sleep(0.01)
            except RunTerminated:
                pass  # ignored, as a blocking call would
        sup.finish()

    t = threading.Thread(target=task_thread)
    t.start()
    t.join(timeout=10)
    assert ended, "the process was never ended"
    at, stop = ended[0]
    assert stop.outcome == "self_fenced", stop
    # fence_after (1.0 s) after the grant, before kill_after (1.2 s); counted from the
    # wait's start (0.5 s) it would be 1.5 s. The slack is a loaded machine's wake-ups.
    assert at - box["start"] < 1.2 + 0.2, at - box["start"]


def test_a_yielding_run_waited_for_whose_lease_is_taken_ends_its_process() -> None:
    """The run waited for at shutdown stays its lease's one live copy: once a
    ping finds another owner, its process ends (the stolen interruption)."""
    ended: list[RunTerminated] = []
    _yielding_run_that_ignores_it(["OK", "OK", "NOT_OWNER"], ended)
    assert [stop.outcome for stop in ended] == ["stolen"]


def test_a_yielding_run_waited_for_that_cannot_ping_is_fenced() -> None:
    """No successful ping for ``fence_after`` while it is waited for: another
    owner may take the lease over, so its process ends (self-fenced)."""
    ended: list[RunTerminated] = []
    _yielding_run_that_ignores_it(["OK", "FAILED"], ended)
    assert [stop.outcome for stop in ended] == ["self_fenced"]


def test_the_takers_stolen_record_is_retried(
    rt: Runtime,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The taker records the previous run as ``stolen``; a transient store
    error on the first attempt must not leave that run ``running``. (The one
    failing attempt is injected: the unit under test is the retry.)"""
    old = rt.leases.acquire(
        SPEC.name, owner_node="node-b", owner_name="celery@node-b", owner_tag="old-run"
    )
    assert old.granted
    assert old.token is not None
    assert old.started_at is not None
    rt.store.record_run_start(
        schedule=SPEC.name,
        run_id="old-run",
        dispatch_id=None,
        owner_node="node-b",
        owner_name="celery@node-b",
        owner_tag="old-run",
        token=old.token,
        started_at=old.started_at,
    )
    real_end = rt.store.record_run_end
    failures: list[str] = []

    def flaky_end(**kwargs: Any) -> Any:
        if kwargs.get("outcome") == "stolen" and not failures:
            failures.append(kwargs["run_id"])
            raise OSError("the store connection dropped")
        return real_end(**kwargs)

    monkeypatch.setattr(rt.store, "record_run_end", flaky_end)
    # The old owner stopped pinging: takeable after ping_timeout + steal_delay (2 s).
    deadline = time.monotonic() + 10
    box: dict[str, Any] = {}
    while time.monotonic() < deadline:
        box = in_thread(lambda: supervised_run(rt, SPEC, Request(), lambda: "new", (), {}))
        if box.get("value") == "new":
            break
        time.sleep(0.2)
    assert box.get("value") == "new"
    assert failures == ["old-run"]
    by_id = {r.run_id: r for r in rt.store.runs(SPEC.name)}
    assert by_id["old-run"].outcome == "stolen"


def test_a_self_fenced_end_is_dated_on_the_monotonic_clock(
    fresh_redis_server: RedisServerProcess,
    fresh_rt: Runtime,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis goes away mid-run: the run fences itself after fence_after (0.75 s)
    and its end is dated from the grant's Redis time plus the monotonic time
    since, not by the local wall clock (which here has jumped a day ahead)."""

    class JumpedClock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) + timedelta(days=1)

    def body() -> None:
        fresh_redis_server.stop()
        monkeypatch.setattr(run_records, "datetime", JumpedClock)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.01)

    box = in_thread(lambda: supervised_run(fresh_rt, SPEC, Request(), body, (), {}))
    assert "self_fenced" in str(box.get("raised"))
    run = only_run(fresh_rt)
    assert run.outcome == "self_fenced"
    assert run.ended_at is not None
    assert timedelta(seconds=0.75) <= run.ended_at - run.started_at < timedelta(seconds=3)
