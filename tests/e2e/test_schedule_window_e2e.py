"""End to end: beat holds a window of 100 schedules of a fleet of 1,000
(``dgs_schedule_window_size``) and serves the whole fleet in the deadline order,
none forgotten, none twice, and a lister's changes reach it within one poll.

A real beat (the deadline order: no relative laxity, no look-ahead, so the
order the window reads the store in), two real workers of 4 thread slots
each, 1,000 never-run runtime schedules of a short task registered together
with ``upsert_many`` before beat starts. Their periods (from 1 h to 2 h 40 min,
a hundred distinct values) make their ``should_start_by`` a permutation of
their names with ties, which go by ``next_can_start_at``, then name.

What is shown, and why it holds:

* **Deadline order.** Every schedule is eligible from the start, and each
  round pops the most urgent eligible schedules; the window holds the most
  urgent eligible one of the fleet, or reads on. So beat's *dispatch* order
  (its ``after_task_publish`` signal, in beat's own thread) of the fleet's
  first runs is exactly the order of the kept ``(should_start_by,
  next_can_start_at, name)`` the store held before beat started. The worker's
  *start* order may differ by what 8 parallel slots allow: beat dispatches a
  run only while fewer than 8 are dispatched or running, so when the
  fleet's ``j``-th schedule (1-based, in that order) starts its run, at least
  ``j - 8`` of the fleet's schedules have had a run end (checked on the run
  history's times).
* **None forgotten, none twice.** The run history holds exactly one
  successful run of each schedule, and its body ran once (a cooldown of 50
  minutes keeps a second one away). Beat dispatches a schedule again only
  after a run that fenced itself before its body (a machine too slow to write
  the run's start in time; the generous ping timeout makes that rare): each
  such run is in the history, not a success.
* **Far fewer held than the fleet.** Beat logged that it loaded at most 100,
  and every slice it read (its DEBUG line ``schedule window: ... holding N``)
  left it holding at most twice the window, while it read enough slices to
  page through the whole fleet.
* **A lister's changes.** While the backlog is served, a lister adds a new
  schedule of period 2 s, shortens the period of the schedule that came last
  in the order (far outside the window), and removes one near the end of the
  order. The new and the changed one are dispatched within a poll (plus a
  round) and again and again; the removed one never runs, although beat went
  past its place in the order. Then the new one is removed, and a schedule
  added after it: once beat dispatched that one, its poll had read the
  removal, and the removed one is never dispatched after it, while the
  changed one goes on running.
"""

from __future__ import annotations

import json
import re
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from celery_dgs.beat_pace import PaceBoard
from celery_dgs.keys import KeySpace
from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.store import OWNER_RUNTIME
from tests.e2e.harness import Cluster, beat_args, deadline_window_env, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

FLEET = 1_000
WINDOW = 100
#: Seconds ahead the window reaches: far less than any first deadline.
HORIZON_S = 60
#: Two workers of 4 thread slots each: a worker's own work per run (its lease,
#: its start and end written) takes most of a core.
WORKERS, THREADS = 2, 4
SLOTS = WORKERS * THREADS
POLL_S = 0.3
#: What a change may take beyond one poll to be dispatched: beat's round and
#: the publish, on a loaded two-core machine.
ROUND_SLACK_S = 1.2
#: A schedule of the fleet: a run a few milliseconds long, once an hour or so.
COOLDOWN_S = 3000
SHORT = {"period": 2, "cooldown": 1, "kwargs": {"seconds": 0}}
NEW = "e2e.scrape@new"
LATER = "e2e.scrape@later"


def fleet_rows() -> list[dict[str, Any]]:
    return [
        {
            "name": f"e2e.scrape@r{i:04d}",
            "period": 3600 + 60 * ((i * 37) % 101),
            "cooldown": COOLDOWN_S,
            "args": [f"r{i:04d}"],
            "kwargs": {"seconds": 0},
        }
        for i in range(FLEET)
    ]


class WindowCluster(Cluster):
    """The e2e cluster with beat logging at DEBUG (the window's reads)."""

    def start_beat(self, key: str = "beat", scheduler: str = "celery_dgs:DeadlineScheduler") -> Any:
        args = beat_args(self.tmp, key, scheduler)
        args[args.index("INFO")] = "DEBUG"
        return self._start(key, args)


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    made = WindowCluster(
        tmp_path,
        redis_url,
        ["scrape"],  # no declared schedule: the runtime ones only
        **deadline_window_env(WINDOW, HORIZON_S, POLL_S),
    )
    yield made
    made.stop_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(made.logs())


class Events:
    """The test's event list (``e2e:events``), read on from where it was left."""

    def __init__(self, cluster: Cluster) -> None:
        self.redis, self.seen = cluster.redis, list[dict[str, Any]]()

    def read(self) -> list[dict[str, Any]]:
        new = self.redis.lrange("e2e:events", len(self.seen), -1)
        self.seen += [json.loads(e) for e in new]
        return self.seen

    def published(self) -> list[dict[str, Any]]:
        """Beat's publishes, in beat's order (the schedule's full name)."""
        return [e for e in self.read() if e["kind"] == "published"]

    def names_published(self, name: str) -> list[float]:
        """When beat published a run of ``name``, in order."""
        return [e["t"] for e in self.published() if e["name"] == name]

    def at_least(self, name: str, count: int = 1) -> list[float] | None:
        """:meth:`names_published` once there are ``count``; ``None`` before."""
        times = self.names_published(name)
        return times if len(times) >= count else None


def test_a_window_of_100_serves_1000_in_deadline_order(cluster: Cluster) -> None:
    store = cluster.store()
    api = RuntimeSchedules(store)
    started = time.monotonic()
    try:
        report = api.upsert_many(fleet_rows())
        assert report.ok, report.errors
        assert len(report.applied.inserted) == FLEET
        stored = store.list_schedules(owner=OWNER_RUNTIME)
        assert all(s.kept_should_start_by and s.kept_can_start_at for s in stored)
        order = [
            s.name
            for s in sorted(
                stored, key=lambda s: (s.kept_should_start_by, s.kept_can_start_at, s.name)
            )
        ]
        assert order != sorted(order), "the deadline order is not the names' order"
        changed, removed = order[-1], order[-100]
        expected = [n for n in order if n not in (changed, removed)]
        registered = time.monotonic()

        for w in range(1, WORKERS + 1):
            cluster.start_worker(f"w{w}", f"node{w}", pool="threads", concurrency=THREADS)
        cluster.start_beat()
        events = Events(cluster)

        def first_runs() -> list[str]:
            return [
                e["name"]
                for e in events.published()
                if e["name"].startswith("e2e.scrape@r") and e["name"] != changed
            ]

        # The lister, while the backlog is served: one new, one changed, one removed.
        wait_for(lambda: len(first_runs()) >= FLEET // 5, 90, "a fifth of the fleet dispatched")
        assert removed not in first_runs()
        assert changed not in first_runs()
        before_change = time.time()
        report = api.upsert_many(
            [
                {"name": NEW, "args": ["new"], **SHORT},
                {"name": changed, "args": [changed.split("@")[1]], **SHORT},
            ]
        )
        assert report.ok, report
        assert (report.applied.inserted, report.applied.updated) == ([NEW], [changed])
        assert api.remove(removed) is True
        at_change = len(first_runs())
        for name in (NEW, changed):
            first = wait_for(partial(events.at_least, name), 10, f"{name} dispatched")[0]
            print(f"{name}: dispatched {first - before_change:.3f} s after the lister's commit")
            assert first - before_change < POLL_S + ROUND_SLACK_S, name
        print(f"the lister's changes came after {at_change} of the fleet's first runs")
        # After the lister's changes: waiting for the pace (written every 5 s)
        # before them let the fleet run past the removed schedule's turn.
        check_pace_window(cluster)

        # The whole fleet served once, in the deadline order.
        wait_for(
            lambda: len(set(first_runs())) >= len(expected),
            150,
            "every schedule of the fleet dispatched",
        )
        served = time.monotonic()
        dispatches = first_runs()
        assert removed not in dispatches, "a schedule removed before its turn was dispatched"
        firsts = list(dict.fromkeys(dispatches))
        assert Counter(firsts) == Counter(expected), "a schedule forgotten"
        assert firsts == expected, "the first runs left the deadline order"
        for name in (NEW, changed):
            wait_for(partial(events.at_least, name, 3), 15, f"{name} again and again")

        # The new one removed, then one more added: once that one is dispatched,
        # beat's poll has read the removal.
        before_new_removal = time.time()
        assert api.remove(NEW) is True
        report = api.upsert_many([{"name": LATER, "args": ["later"], **SHORT}])
        assert report.ok, report
        [later_at, *_] = wait_for(partial(events.at_least, LATER), 10, "the later one")
        # Two more dispatches of the changed schedule (the removed one ran as often).
        wait_for(
            lambda: len([t for t in events.names_published(changed) if t > later_at]) >= 2,
            15,
            "the changed schedule twice after the later one",
        )
        assert not [t for t in events.names_published(NEW) if t > later_at], (
            "the removed schedule was dispatched after a poll that read its removal"
        )
        print(
            f"removal of {NEW}: committed {later_at - before_new_removal:.1f} s before "
            f"{LATER}'s dispatch; "
            f"{len(events.names_published(NEW))} dispatches of it in all"
        )

        check_history(events, store, expected, removed)
        check_holding(cluster)
        print(
            f"{FLEET} registered in {registered - started:.1f} s, served "
            f"{served - registered:.1f} s after (beat and worker start included); "
            f"the test took {time.monotonic() - started:.1f} s"
        )
    finally:
        store.close()


def check_pace_window(cluster: Cluster) -> None:
    """The leader's pace, as ``celery dgs status`` reads it, says what its
    window holds: of 100, reading on up to 11 times that (the default
    read-on of 10 window sizes)."""
    board = PaceBoard(cluster.redis, KeySpace("e2e"))
    pace = wait_for(
        lambda: (p := board.read()) is not None and p.window is not None and p, 15, "the pace"
    )
    window = pace.window
    print(f"beat's window in its pace: {window}")
    assert (window.size, window.room) == (WINDOW, 11 * WINDOW)
    assert window.held <= 2 * WINDOW


def check_history(events: Events, store: Any, expected: list[str], removed: str) -> None:
    """Each schedule of ``expected`` ran once, a success, in an order the slots
    allow (see the module doc); ``removed`` never ran. A schedule dispatched
    again had a run whose body did not run (it fenced itself, the machine too
    slow to write its start in time)."""
    assert store.runs(removed) == []
    assert not store.get(removed).active

    def ended() -> dict[str, Any] | None:
        runs = {name: store.runs(name) for name in expected}
        if any(r.outcome == "running" for rs in runs.values() for r in rs):
            return None
        return runs

    runs = wait_for(ended, 20, "every run's end stored", interval=0.5)
    fleet = set(expected)
    dispatches = Counter(e["name"] for e in events.published() if e["name"] in fleet)
    bodies = Counter(
        f"e2e.{e['name']}"
        for e in events.read()
        if e["kind"] == "start" and f"e2e.{e['name']}" in fleet
    )
    assert bodies == Counter(expected), "a body ran other than once"
    successes = {name: [r for r in rs if r.outcome == "success"] for name, rs in runs.items()}
    assert all(len(ok) == 1 for ok in successes.values()), "a schedule ran other than once"
    assert {n: len(rs) for n, rs in runs.items()} == {n: dispatches[n] for n in expected}, (
        "a dispatch without a run, or a run without a dispatch"
    )
    again = {n: [r.outcome for r in rs] for n, rs in runs.items() if len(rs) > 1}
    print(f"dispatched again (a run that did not run its body): {again}")
    # Each schedule's first end, whatever its outcome: its lease gone after it.
    ends = sorted(min(r.ended_at for r in rs) for rs in runs.values())
    late = []
    for j, name in enumerate(expected, start=1):
        start = successes[name][0].started_at
        if bisect_left(ends, start) < j - SLOTS:
            late.append((j, name))
    assert not late, f"started before j - {SLOTS} runs had ended: {late[:5]}"
    starts = sorted(expected, key=lambda n: successes[n][0].started_at)
    place = {name: i for i, name in enumerate(starts)}
    shift = max(abs(place[name] - i) for i, name in enumerate(expected))
    print(f"start order vs the deadline order: at most {shift} places apart")


def check_holding(cluster: Cluster) -> None:
    """Beat loaded, and held after each slice it read, far fewer than the fleet."""
    log = cluster.log_since("beat", 0)
    [loaded] = [int(n) for n in re.findall(r"loaded (\d+) schedules", log)]
    held = [
        int(n) for n in re.findall(r"schedule window: read \d+, let go of \d+, holding (\d+)", log)
    ]
    assert 0 < loaded <= WINDOW, f"beat loaded {loaded} schedules"
    assert len(held) >= FLEET // WINDOW, f"{len(held)} slices read: fewer than the fleet takes"
    print(f"beat loaded {loaded}, read {len(held)} slices, held at most {max(held)}")
    assert max(held) <= 2 * WINDOW
