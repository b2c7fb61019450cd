"""Self-fencing of a run's heartbeat (unit tests of RunSupervisor's logic).

The ping is a stand-in here (this is the supervisor's own logic); the end-to-end
evidence, with a real worker whose Redis traffic is blackholed, is in
``tests/e2e/test_fencing_e2e.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

import pytest

from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings
from celery_dgs.worker.supervisor import RunSupervisor, RunTerminated
from tests.worker.helpers import supervisor


def run_under(
    ping: Callable[[float | None], str],
    *,
    seconds: float,
    fence_after: float | None,
    kill_after: float | None = None,
    ignore: bool = False,
) -> tuple[RunSupervisor, RunTerminated | None, float, list[RunTerminated]]:
    """Run a task body on a thread for ``seconds`` under a supervisor; returns
    the supervisor, what stopped the body (if anything), how long it ran, and
    the calls of on_unresponsive."""
    box: dict[str, object] = {}
    unresponsive: list[RunTerminated] = []

    def body() -> None:
        sup = supervisor(
            ping=ping,
            ping_interval=0.05,
            termination_grace=5,
            on_unresponsive=unresponsive.append,
            fence_after=fence_after,
            kill_after=kill_after,
            granted_mono=time.monotonic(),
            started_at=datetime.now(timezone.utc),
        )
        box["sup"] = sup
        began = time.monotonic()
        sup.start()
        try:
            deadline = began + seconds
            while time.monotonic() < deadline:
                try:
                    time.sleep(0.01)
                except RunTerminated as exc:
                    if not ignore:
                        raise
                    box.setdefault("ignored", exc)
        except RunTerminated as exc:
            box["stop"] = exc
        finally:
            box["ran"] = time.monotonic() - began
            sup.finish()

    t = threading.Thread(target=body)
    t.start()
    t.join(timeout=30)
    stop = box.get("stop") or box.get("ignored")
    return box["sup"], stop, float(box["ran"]), unresponsive  # type: ignore[return-value]


def test_a_hanging_ping_fences_the_run_on_the_monotonic_clock() -> None:
    never = threading.Event()
    sup, stop, ran, _ = run_under(
        lambda p: "OK" if never.wait(60) else "", seconds=5, fence_after=0.4
    )
    never.set()
    assert stop is not None
    assert sup.interruption is not None
    assert sup.interruption.outcome == "self_fenced"
    assert "no successful ping" in sup.interruption.reason
    assert 0.4 <= ran < 0.4 + 1.0  # fenced on time, with slack for a loaded machine


def test_failing_pings_fence_too_and_healthy_pings_never_do() -> None:
    def broken(progress: float | None) -> str:
        raise ConnectionError("blackholed")

    sup, stop, ran, _ = run_under(broken, seconds=5, fence_after=0.3)
    assert sup.interruption is not None
    assert sup.interruption.outcome == "self_fenced"
    assert ran < 0.3 + 1.0
    # Pings every 0.05 s: a thread stall up to 0.55 s still leaves them in time.
    sup, stop, ran, _ = run_under(lambda p: "OK", seconds=1.8, fence_after=0.6)
    assert stop is None  # 3 x fence_after, never fenced
    assert sup.interruption is None


def test_without_fence_after_a_silent_owner_runs_on() -> None:
    """The mechanism switched off: what the tests above would see without it."""
    never = threading.Event()
    sup, stop, _, _ = run_under(
        lambda p: "OK" if never.wait(60) else "", seconds=0.8, fence_after=None
    )
    never.set()
    assert stop is None
    assert sup.interruption is None


def test_a_fenced_run_that_ignores_it_is_ended_by_kill_after() -> None:
    """termination_grace is 5 s, but a self-fenced process must be gone by
    kill_after (ping_timeout) after its last good ping: before any steal."""
    never = threading.Event()
    sup, _, _, unresponsive = run_under(
        lambda p: "OK" if never.wait(60) else "",
        seconds=2.0,
        fence_after=0.3,
        kill_after=0.6,
        ignore=True,
    )
    never.set()
    assert [u.outcome for u in unresponsive] == ["self_fenced"]
    assert sup.kill_deadline_left() <= 0.05


def test_settings_default_margin_and_relation() -> None:
    s = DgsSettings()
    assert (s.ping_interval, s.ping_timeout, s.steal_delay) == (30.0, 90.0, 60.0)
    assert s.self_fence_margin == 22.5
    assert s.fence_after == 67.5  # more than two ping intervals without a good ping
    assert s.fence_after < s.ping_timeout < s.ping_timeout + s.steal_delay
    tight = DgsSettings(ping_interval=1, ping_timeout=1.5)
    assert tight.self_fence_margin == 0.25  # capped at (ping_timeout - ping_interval) / 2
    assert DgsSettings(self_fence_margin=30).fence_after == 60
    with pytest.raises(SettingsError, match=r"dgs_self_fence_margin.*shorter than"):
        DgsSettings(self_fence_margin=60)
    with pytest.raises(SettingsError, match="dgs_self_fence_margin"):
        DgsSettings(self_fence_margin=-1)
    assert DgsSettings.from_conf({"dgs_self_fence_margin": 10}).fence_after == 80


@pytest.mark.parametrize("outcome", ["cancelled", "yielded", "terminated"])
def test_an_interrupted_runs_grace_ends_by_kill_after_when_redis_was_already_silent(
    outcome: str,
) -> None:
    """termination_grace (5 s) is longer than what is left of kill_after
    since the last good ping: the process must be gone before a take-over,
    whatever interrupted the run."""
    sup = supervisor(
        ping=lambda p: "OK",
        ping_interval=0.05,
        termination_grace=5,
        fence_after=8.0,
        kill_after=10.0,
        granted_mono=time.monotonic(),
        started_at=datetime.now(timezone.utc),
    )
    sup.interruption = RunTerminated(outcome, "test")
    assert sup._grace() == 5  # Redis answered just now: the whole grace
    sup.kill_after = 2.0
    assert sup._grace() == 5, "pings answered: the grace is not cut to kill_after"
    sup.kill_after = 10.0
    sup.last_ok_mono = time.monotonic() - 9.0  # silent for 9 s before the interruption
    assert 0.9 <= sup._grace() <= 1.0
    sup.last_ok_mono = time.monotonic() - 20.0  # past kill_after: half a ping interval
    assert sup._grace() == 0.025
