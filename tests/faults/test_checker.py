"""The checker itself can fail: one hand-made history per rule it enforces.

Pure logic, no processes: the histories are written as the tasks and the
fault tests would write them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.faults.checker import Bounds, build_runs, check

B = Bounds(ping_interval=0.5, ping_timeout=1.5, steal_delay=1.0, tick=1.0, slack=0.5)


def start(
    t: float,
    token: Any,
    run_id: str,
    pid: int = 1,
    host: str = "n1",
    schedule: str = "s",
    dispatch_id: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": "start",
        "t": t,
        "schedule": schedule,
        "token": token,
        "run_id": run_id,
        "pid": pid,
        "host": host,
        "dispatch_id": dispatch_id,
    }


def end(t: float, run_id: str, outcome: str = "success", pid: int = 1) -> dict[str, Any]:
    return {
        "kind": "end",
        "t": t,
        "schedule": "s",
        "run_id": run_id,
        "pid": pid,
        "outcome": outcome,
    }


def fault(t: float, kind: str, pids: list[int], hosts: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"kind": "fault", "t": t, "fault": kind, "pids": pids, "hosts": list(hosts)}


def exited(t: float, pids: list[int]) -> dict[str, Any]:
    return {"kind": "exited", "t": t, "pids": pids}


def resumed(t: float, pids: list[int]) -> dict[str, Any]:
    return {"kind": "resumed", "t": t, "pids": pids, "hosts": []}


@dataclass
class Row:
    run_id: str
    schedule: str
    token: int | None
    outcome: str
    fenced: bool = False


def one(report_violations: list[str], needle: str) -> None:
    assert len(report_violations) == 1, report_violations
    assert needle in report_violations[0], report_violations


def test_clean_sequential_history_passes() -> None:
    ev = [start(0, 1, "a"), end(1, "a"), start(2, 2, "b"), end(3, "b")]
    rows = [Row("a", "s", 1, "success"), Row("b", "s", 2, "success")]
    report = check(ev, B, now=10, stored=rows, current_tokens={"s": 2})
    assert report.ok, report
    assert report.summary() == "runs checked: 2, faults injected: 0, violations found: 0"


@pytest.mark.parametrize(
    ("second_token", "needle"),
    [(1, "did not increase"), (0, "no valid fencing token"), (None, "no valid fencing token")],
)
def test_tokens_must_strictly_increase(second_token: Any, needle: str) -> None:
    ev = [start(0, 1, "a"), end(1, "a"), start(2, second_token, "b"), end(3, "b")]
    one(check(ev, B, now=10).violations, needle)


def test_overlap_without_a_pause_is_reported() -> None:
    ev = [start(0, 1, "a"), start(2, 2, "b", pid=2), end(2.5, "a"), end(3, "b", pid=2)]
    one(check(ev, B, now=10).violations, "two live runs")


def test_overlap_of_a_live_run_is_reported() -> None:
    ev = [start(0, 1, "a"), start(2, 2, "b", pid=2)]
    one(check(ev, B, now=10).violations, "overlapped 8.00s")


def test_overlap_after_a_steal_from_a_paused_owner_is_allowed_briefly() -> None:
    ev = [
        start(0, 1, "a"),
        fault(1, "sigstop", [1]),
        start(3.5, 2, "b", pid=2),
        resumed(5, [1]),
        end(5.6, "a", "RunTerminated"),
    ]
    rows = [Row("a", "s", 1, "stolen"), Row("b", "s", 2, "running")]
    assert check(ev, B, now=10, stored=rows, current_tokens={"s": 2}).ok


def test_paused_owner_running_on_after_its_resume_is_reported() -> None:
    ev = [
        start(0, 1, "a"),
        fault(1, "sigstop", [1]),
        start(3.5, 2, "b", pid=2),
        resumed(5, [1]),
        end(6.2, "a", "RunTerminated"),
    ]
    one(check(ev, B, now=10).violations, "ran on 1.20s after its resume")


def test_a_stale_outcome_accepted_by_the_store_is_reported() -> None:
    ev = [
        start(0, 1, "a"),
        fault(1, "sigstop", [1]),
        start(3.5, 2, "b", pid=2),
        resumed(5, [1]),
        end(5.2, "a", "success"),
    ]
    rows = [Row("a", "s", 1, "success"), Row("b", "s", 2, "running")]
    one(check(ev, B, now=10, stored=rows).violations, "stale write accepted")
    rows[0].fenced = True
    assert check(ev, B, now=10, stored=rows).ok


def test_killed_run_is_closed_at_its_exit_and_must_be_recovered_in_time() -> None:
    ev = [start(0, 1, "a"), fault(1, "sigkill", [1]), exited(1, [1]), start(3.9, 2, "b", pid=2)]
    assert [r.outcome for r in build_runs(ev)] == ["exited", None]
    assert check(ev, B, now=10).ok  # 2.9 s <= 1.5 + 1 + 1 + 0.5
    late = [*ev[:3], start(5.1, 2, "b", pid=2)]
    one(check(late, B, now=10).violations, "late recovery")
    one(check(ev[:3], B, now=10).violations, "not recovered")


def test_a_partitioned_host_is_a_failing_fault_by_host() -> None:
    ev = [
        start(0, 1, "a", host="n1"),
        fault(1, "partition", [], hosts=("n1",)),
        end(2.5, "a", "RunTerminated"),
    ]
    one(check(ev, B, now=10).violations, "not recovered")


def test_a_run_that_finished_despite_the_fault_needs_no_recovery() -> None:
    ev = [start(0, 1, "a"), fault(1, "partition", [], hosts=("n1",)), end(1.2, "a")]
    assert check(ev, B, now=10).ok


def test_lost_and_unfinished_records_are_reported() -> None:
    ev = [start(0, 1, "a"), end(1, "a"), start(2, 2, "b"), end(3, "b")]
    one(check(ev, B, now=10, stored=[Row("a", "s", 1, "success")]).violations, "record lost")
    rows = [Row("a", "s", 1, "running"), Row("b", "s", 2, "success")]
    one(check(ev, B, now=10, stored=rows).violations, "still says running")
    rows = [Row("a", "s", 1, "success"), Row("b", "s", 3, "success")]
    one(check(ev, B, now=10, stored=rows).violations, "stored with token 3")


def test_store_current_token_below_the_history_is_reported() -> None:
    ev = [start(0, 5, "a"), end(1, "a")]
    one(check(ev, B, now=10, current_tokens={"s": 4}).violations, "below the newest")


def test_a_dispatch_that_started_two_runs_is_reported() -> None:
    ev = [
        start(0, 1, "a", dispatch_id="d1"),
        end(1, "a"),
        start(2, 2, "b", dispatch_id="d1"),
        end(3, "b"),
    ]
    one(check(ev, B, now=10).violations, "dispatch d1 started twice")


def test_a_fault_may_name_its_own_recovery_bound() -> None:
    ev = [
        start(0, 1, "a"),
        {**fault(1, "redis_restart", [], hosts=("n1",)), "recovery_bound": 9.0},
        end(1.5, "a", "RunTerminated"),
        start(9.5, 2, "b"),
    ]
    assert check(ev, B, now=10).ok
    ev[1]["recovery_bound"] = 8.0
    one(check(ev, B, now=10).violations, "bound 8.00s")
