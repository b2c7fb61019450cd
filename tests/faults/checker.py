"""The history checker: the invariants every fault scenario must keep.

Input: the events of :class:`~tests.faults.history.History` (runs' starts and
ends, injected faults, exits, resumes), optionally the store's run records, and
the timing bounds of the cluster. Output: a :class:`Report` listing every
violation as a sentence naming the schedule, the runs and the times.

Rules:

1. tokens: per schedule, in start order, tokens are integers that strictly increase;
2. exclusion: no two runs of a schedule are live at once, except after a steal
   from a paused (SIGSTOPped) owner, and then only until one ping interval
   (+ slack) after that owner was resumed; or after a forward step of the
   Redis server's clock (a ``redis_clock_step`` fault, which docs/guarantees.md
   G3 does not exclude): a run that started within the recovery bound after
   the step may overlap an older one for at most one ping interval plus the
   stolen run's grace (``ping_interval / 2``) and the slack (the owner reaches
   Redis, so its next ping reports NOT_OWNER);
3. fencing: a run whose own end came after a newer run of the schedule had
   started must not have its outcome accepted by the store: its record is
   either the taker's ``stolen`` or marked ``fenced``;
4. recovery: a run hit by a failing fault (its process killed, paused, cut off
   or shut down) is followed by a newer run of its schedule within
   ping_timeout + steal_delay + one beat tick (+ slack), or the bound the fault
   event names (``recovery_bound``: a Redis restart has its own);
5. records: every run in the history has a store record with the same run id
   and token, and a run that ended or was superseded is not still ``running``
   there; the store's current token is never below the history's newest;
6. dispatches: one dispatch (beat's dispatch id, carried by the message) starts
   at most one run, however often the broker delivers its message.

A run that never logged its end is closed at the first ``exited`` event of its
process after its start (the test logs one when it kills a process or sees it
exit); otherwise it is still live at ``now``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.faults.history import FAILING_FAULTS


@dataclass(frozen=True)
class Bounds:
    """Seconds. ``tick``: beat's loop interval; ``slack``: process start-up,
    message delivery, store writes."""

    ping_interval: float
    ping_timeout: float
    steal_delay: float
    tick: float = 1.0
    slack: float = 1.0

    @property
    def recovery(self) -> float:
        return self.ping_timeout + self.steal_delay + self.tick + self.slack

    @property
    def after_resume(self) -> float:
        return self.ping_interval + self.slack

    @property
    def after_clock_step(self) -> float:
        """The overlap G3 allows after a forward step of Redis's clock when the
        owner reaches Redis: its next ping, then at most the stolen grace."""
        return self.ping_interval * 1.5 + self.slack


@dataclass
class Run:
    schedule: str
    run_id: str
    token: Any
    pid: int
    host: str
    start: float
    end: float | None = None  # monotonic; None while live
    outcome: str | None = None  # the run's own outcome; "exited" when closed by an exit
    own_end: float | None = None  # when the run itself logged its end
    dispatch_id: str | None = None

    def end_or(self, now: float) -> float:
        return self.end if self.end is not None else now

    def __str__(self) -> str:
        return f"run {self.run_id} (token {self.token}, pid {self.pid} on {self.host})"


class StoredRun(Protocol):
    run_id: str
    token: int | None
    outcome: str
    fenced: bool


@dataclass
class Report:
    runs_checked: int = 0
    faults: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        return (
            f"runs checked: {self.runs_checked}, faults injected: {self.faults}, "
            f"violations found: {len(self.violations)}"
        )

    def __str__(self) -> str:
        return "\n".join([self.summary(), *(f"  - {v}" for v in self.violations)])


def build_runs(events: Sequence[Mapping[str, Any]]) -> list[Run]:
    """Runs from start/end events; un-ended runs closed by their process's exit."""
    runs: dict[str, Run] = {}
    exits: dict[int, list[float]] = defaultdict(list)
    for e in events:
        if e["kind"] == "start":
            rid = str(e.get("run_id") or f"?pid{e['pid']}@{e['t']}")
            runs[rid] = Run(
                e["schedule"],
                rid,
                e.get("token"),
                e["pid"],
                e.get("host", "?"),
                e["t"],
                dispatch_id=e.get("dispatch_id"),
            )
        elif e["kind"] == "end":
            run = runs.get(str(e.get("run_id")))
            if run is not None and run.end is None:
                run.end = run.own_end = e["t"]
                run.outcome = e["outcome"]
        elif e["kind"] == "exited":
            for pid in e["pids"]:
                exits[pid].append(e["t"])
    for run in runs.values():
        if run.end is None:
            after = [t for t in exits.get(run.pid, []) if t >= run.start]
            if after:
                run.end, run.outcome = min(after), "exited"
    return sorted(runs.values(), key=lambda r: r.start)


def _pauses(events: Sequence[Mapping[str, Any]]) -> dict[int, list[tuple[float, float]]]:
    """pid -> [(stopped at, resumed at or +inf)]."""
    open_: dict[int, float] = {}
    done: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["kind"] == "fault" and e["fault"] == "sigstop":
            for pid in e["pids"]:
                open_.setdefault(pid, e["t"])
        elif e["kind"] == "resumed":
            for pid in e["pids"]:
                if pid in open_:
                    done[pid].append((open_.pop(pid), e["t"]))
    for pid, t in open_.items():
        done[pid].append((t, math.inf))
    return done


def check(
    events: Sequence[Mapping[str, Any]],
    bounds: Bounds,
    *,
    now: float,
    stored: Iterable[StoredRun] | None = None,
    current_tokens: Mapping[str, int | None] | None = None,
) -> Report:
    runs = build_runs(events)
    faults = [e for e in events if e["kind"] == "fault"]
    report = Report(runs_checked=len(runs), faults=len(faults))
    by_schedule: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_schedule[run.schedule].append(run)
    v = report.violations

    # 1. tokens strictly increase per schedule
    for schedule, rs in by_schedule.items():
        last: Run | None = None
        for run in rs:
            if not isinstance(run.token, int) or isinstance(run.token, bool) or run.token <= 0:
                v.append(f"{schedule}: {run} has no valid fencing token")
                continue
            if last is not None and run.token <= last.token:
                v.append(f"{schedule}: token did not increase: {run} started after {last}")
            last = run

    # 2. exclusion, with the bounded windows after a steal from a paused owner
    # and after a forward step of the Redis server's clock
    pauses = _pauses(events)
    steps = [f["t"] for f in faults if f["fault"] == "redis_clock_step"]
    for schedule, rs in by_schedule.items():
        for i, a in enumerate(rs):
            for b in rs[i + 1 :]:
                if a.end_or(now) <= b.start:
                    continue
                overlap = a.end_or(now) - b.start
                if any(0 <= b.start - t <= bounds.recovery for t in steps):
                    if overlap <= bounds.after_clock_step:
                        continue
                    v.append(
                        f"{schedule}: two live runs: {a} and {b} overlapped "
                        f"{overlap:.2f}s after a step of the Redis clock "
                        f"(allowed {bounds.after_clock_step:.2f}s)"
                    )
                    continue
                window = next(((s, c) for s, c in pauses.get(a.pid, []) if s <= b.start < c), None)
                if window is not None and a.end_or(now) <= window[1] + bounds.after_resume:
                    continue
                why = (
                    "its owner was not paused when the other started"
                    if window is None
                    else f"the paused owner ran on {a.end_or(now) - window[1]:.2f}s after "
                    f"its resume (allowed {bounds.after_resume:.2f}s)"
                )
                v.append(
                    f"{schedule}: two live runs: {a} and {b} overlapped "
                    f"{a.end_or(now) - b.start:.2f}s; {why}"
                )

    # 3. a superseded run's own late outcome is not accepted
    rows = {r.run_id: r for r in stored} if stored is not None else None
    if rows is not None:
        for schedule, rs in by_schedule.items():
            for a in rs:
                if a.own_end is None:
                    continue
                newer = next(
                    (
                        b
                        for b in rs
                        if isinstance(b.token, int)
                        and isinstance(a.token, int)
                        and b.token > a.token
                        and b.start < a.own_end
                    ),
                    None,
                )
                row = rows.get(a.run_id)
                if newer is None or row is None:
                    continue
                if row.outcome != "stolen" and not row.fenced:
                    v.append(
                        f"{schedule}: stale write accepted: {a} ended "
                        f"{a.own_end - newer.start:.2f}s after {newer} started, and the "
                        f"store took its outcome {row.outcome!r} unfenced"
                    )

    # 4. recovery after a failing fault
    for fault in faults:
        if fault["fault"] not in FAILING_FAULTS or not fault.get("expect_recovery", True):
            continue
        t, pids, hosts = fault["t"], set(fault["pids"]), set(fault["hosts"])
        bound = float(fault.get("recovery_bound") or bounds.recovery)
        for a in runs:
            if not (a.start <= t <= a.end_or(math.inf)):
                continue
            if a.pid not in pids and a.host not in hosts:
                continue
            if a.outcome == "success":
                continue  # it finished its work despite the fault
            nxt = next((b for b in by_schedule[a.schedule] if b.start > t), None)
            if nxt is None:
                v.append(
                    f"{a.schedule}: not recovered: {a} was hit by {fault['fault']} and "
                    f"no newer run started"
                )
            elif nxt.start - t > bound:
                v.append(
                    f"{a.schedule}: late recovery: {a} was hit by {fault['fault']}; the "
                    f"next run started {nxt.start - t:.2f}s later "
                    f"(bound {bound:.2f}s)"
                )

    # 5. no run record lost
    if rows is not None:
        for schedule, rs in by_schedule.items():
            for i, a in enumerate(rs):
                row = rows.get(a.run_id)
                if row is None:
                    v.append(f"{schedule}: record lost: {a} is not in the store")
                    continue
                if row.token != a.token:
                    v.append(f"{schedule}: {a} is stored with token {row.token}")
                superseded = i + 1 < len(rs)
                if row.outcome == "running" and (a.own_end is not None or superseded):
                    v.append(
                        f"{schedule}: {a} ended ({a.outcome or 'superseded'}) but the "
                        "store still says running"
                    )
    # 6. one dispatch, one run
    seen: dict[str, Run] = {}
    for run in runs:
        if run.dispatch_id:
            if run.dispatch_id in seen:
                v.append(
                    f"{run.schedule}: dispatch {run.dispatch_id} started twice: "
                    f"{seen[run.dispatch_id]} and {run}"
                )
            seen.setdefault(run.dispatch_id, run)
    if current_tokens is not None:
        for schedule, rs in by_schedule.items():
            top = max((r.token for r in rs if isinstance(r.token, int)), default=None)
            stored_token = current_tokens.get(schedule)
            if top is not None and (stored_token is None or stored_token < top):
                v.append(
                    f"{schedule}: the store's current token {stored_token} is below "
                    f"the newest granted token {top}"
                )
    return report
