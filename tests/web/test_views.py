"""The status page's parts: the snapshot cache (re-read when stale, the
previous snapshot served meanwhile; one per table page), the spec in words,
the freshness buckets, the run chart's geometry, and the benchmark at a
small size."""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from celery_dgs.core.spec_build import make_spec
from celery_dgs.ops.spec_words import spec_words
from celery_dgs.ops.state import Live
from celery_dgs.status import StatusRow, build_rows
from celery_dgs.store.memory import MemoryScheduleStore
from celery_dgs.web import overview, views
from celery_dgs.web.cache import KeyedCaches, SnapshotCache
from celery_dgs.web.scrub import scrub, secrets_of
from celery_dgs.web.snapshot import TIME_TO_ERROR_BOUNDS, Snapshot

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
H = timedelta(hours=1)


def snapshot(store: MemoryScheduleStore, now: datetime = T0) -> Snapshot:
    """The overview's snapshot of ``store`` at ``now``: no run, no worker."""
    return Snapshot(
        live=Live({}, [], now),
        reasons={},
        urgent=[],
        time_to_error=store.time_to_error_counts(now, TIME_TO_ERROR_BOUNDS),
        leader=None,
        pending_dispatches=0,
        read_seconds=0.0,
    )


def row(store: MemoryScheduleStore, name: str, now: datetime = T0) -> StatusRow:
    (found,) = build_rows([store.get(name)], {}, now)
    return found


def wait_until(check: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.005)


def test_the_cache_rereads_when_stale_and_serves_the_old_one_meanwhile() -> None:
    store = MemoryScheduleStore()
    reads: list[float] = []
    took: list[float] = []
    gate = threading.Event()

    def read() -> Any:
        started = time.monotonic()
        reads.append(started)
        if len(reads) == 2:
            gate.wait(5)  # the second read is slow
        snap = snapshot(store)
        took.append(time.monotonic() - started)
        return snap

    cache = SnapshotCache(read, max_age=0.5)
    first = cache.get()
    assert cache.get() is first
    assert len(reads) == 1
    time.sleep(max(0.5, 4 * took[0]) + 0.05)  # stale: older than max_age and 4 read times
    assert cache.get() is first  # the request finding it stale does not wait
    wait_until(lambda: len(reads) == 2)
    assert len(reads) == 2, "the stale cache was not read again"
    assert cache.get() is first  # served at once while the background read goes on
    gate.set()
    wait_until(lambda: cache.get() is not first)
    assert cache.get() is not first
    assert len(reads) == 2


def test_a_quick_re_read_is_what_the_request_that_found_it_stale_gets() -> None:
    """A page looked at again after a while shows the present, not the state
    of the last look, when the re-read takes less than a tenth of a second."""
    count = iter(range(1_000))
    cache: SnapshotCache[int] = SnapshotCache(lambda: next(count), max_age=0.2)
    assert cache.get() == 0
    assert cache.get() == 0
    time.sleep(0.3)
    assert cache.get() == 1
    slow: SnapshotCache[int] = SnapshotCache(
        lambda: (time.sleep(0.5), next(count))[1], max_age=0.0, cost_factor=0.0
    )
    first = slow.get()
    started = time.monotonic()
    assert slow.get() == first, "a slow re-read is not waited for"
    assert time.monotonic() - started < 0.4


def test_a_slow_read_is_repeated_at_most_every_four_read_times() -> None:
    reads: list[float] = []
    ended: list[float] = []

    def read() -> Any:
        reads.append(time.monotonic())
        time.sleep(0.1)
        snap = snapshot(MemoryScheduleStore())
        ended.append(time.monotonic())
        return snap

    cache = SnapshotCache(read, max_age=0.0)
    cache.get()
    took = ended[0] - reads[0]
    deadline = ended[0] + 2 * took  # well inside four read times (at least 0.4 s)
    while time.monotonic() < deadline:
        cache.get()
    assert len(reads) == 1
    time.sleep(max(0.0, ended[0] + 4 * took - time.monotonic()) + 0.05)
    cache.get()
    wait_until(lambda: len(reads) == 2)
    assert len(reads) == 2


def test_a_slow_overview_is_read_again_within_its_longest_age() -> None:
    """However long its read, a cache with ``longest`` is stale once older than it."""
    reads: list[float] = []

    def read() -> Any:
        reads.append(time.monotonic())
        time.sleep(0.3)
        return object()

    cache: SnapshotCache[Any] = SnapshotCache(read, max_age=0.0, longest=0.5)
    cache.get()
    time.sleep(0.6)  # older than longest, well inside four read times (1.2 s)
    cache.get()
    wait_until(lambda: len(reads) == 2)
    assert len(reads) == 2


def test_each_table_page_is_kept_apart_and_the_least_used_dropped() -> None:
    reads: list[str] = []

    def read(key: str) -> str:
        reads.append(key)
        return f"page {key} read {reads.count(key)}"

    pages: KeyedCaches[str, str] = KeyedCaches(read, max_age=60.0, size=2)
    assert pages.get("a") == "page a read 1"
    assert pages.get("b") == "page b read 1"
    assert pages.get("a") == "page a read 1"  # kept: not read again
    assert pages.get("c") == "page c read 1"  # drops b, the least recently used
    assert pages.get("a") == "page a read 1"
    assert pages.get("b") == "page b read 2"
    pages.forget()
    assert pages.get("a") == "page a read 2"
    assert reads == ["a", "b", "c", "b", "a"]


def test_spec_in_words() -> None:
    periodic = make_spec(
        "periodic",
        task="t.a",
        scheduling_period=24 * H,
        cooldown_duration=H,
        blackout_periods=[("12:00", "14:00")],
        tz="Europe/Paris",
        pool="slow",
        max_expected_duration=timedelta(minutes=5),
        dont_run_on_nodes=["n2", "n1"],
    )
    assert spec_words(periodic) == (
        "fresh within 1d00h; cooldown 1h00m; blackout 12:00-14:00 Europe/Paris; pool slow; "
        "expected under 5m00s; never on n1, n2"
    )
    cron = make_spec(
        "cron",
        task="t.b",
        cron_schedule="0 0 * * *",
        tz="America/New_York",
        cron_max_schedule_duration=6 * H,
    )
    assert spec_words(cron) == "cron 0 0 * * * America/New_York, done within 6h00m"


def test_freshness_buckets() -> None:
    store = MemoryScheduleStore()
    specs = [make_spec("periodic", task=f"t.{i}", scheduling_period=100 * H) for i in range(6)]
    specs.append(make_spec("periodic", task="t.6", scheduling_period=1000 * H))
    store.sync(specs, T0 - 200 * H)
    # left before ERROR: 99 h, 70 h, 15 h, 5 h, 30 min, overdue; 999 h
    for i, hours_ago in enumerate((1, 30, 85, 95, 99.5, 150, 1)):
        start = T0 - hours_ago * H
        store.record_run_start(
            schedule=f"t.{i}",
            run_id=f"r{i}",
            dispatch_id=None,
            owner_node="n",
            owner_name="w@n",
            owner_tag=f"r{i}",
            token=1,
            started_at=start,
        )
        store.record_run_end(run_id=f"r{i}", outcome="success", ended_at=start + H / 60)
    counts = dict(overview.histogram(snapshot(store)))
    assert counts == {"in ERROR": 1, "< 1h": 1, "1h-6h": 1, "6h-1d": 1, "1d-7d": 2, "≥ 7d": 1}


def test_the_run_chart_draws_each_run_and_the_deadlines() -> None:
    store = MemoryScheduleStore()
    store.sync([make_spec("periodic", task="t.a", scheduling_period=H)], T0 - 5 * H)
    for k, (ago, seconds, outcome) in enumerate(
        ((3 * H, 60, "success"), (2 * H, 120, "failure"), (H / 2, 30, "success"))
    ):
        start = T0 - ago
        store.record_run_start(
            schedule="t.a",
            run_id=f"r{k}",
            dispatch_id=None,
            owner_node="n",
            owner_name="w@n",
            owner_tag=f"r{k}",
            token=k + 1,
            started_at=start,
        )
        store.record_run_end(
            run_id=f"r{k}",
            outcome=outcome,
            ended_at=start + timedelta(seconds=seconds),
            error="boom" if outcome == "failure" else None,
        )
    runs = store.runs("t.a")
    chart = views.timeline(runs, row(store, "t.a"), T0)
    assert [b.css for b in chart.bars] == ["ok", "error", "ok"]  # newest first
    tallest = max(chart.bars, key=lambda b: b.height)
    assert tallest.css == "error"  # the longest run
    xs = [b.x for b in chart.bars]
    assert xs == sorted(xs, reverse=True)
    marks = {m.label: m for m in chart.marks}
    assert set(marks) == {"should_start_by", "error_at", "now"}
    assert marks["should_start_by"].x < marks["error_at"].x
    assert len({m.label_y for m in chart.marks}) == 3  # labels never overlap
    assert all(40 <= b.x <= chart.width for b in chart.bars)


def test_passwords_are_scrubbed() -> None:
    assert scrub("Error connecting to redis://:hunter22@h:6379", ["hunter22"]) == (
        "Error connecting to redis://:***@h:6379"
    )


def test_an_adaptive_schedule_in_words() -> None:
    adaptive = make_spec(
        "adaptive", task="t.crawl", interval_unit=H, initial_interval_index=4, max_failures=3
    )
    assert spec_words(adaptive) == (
        "adaptive, unit 1h00m, starting at step 4 of 0-10, disabled after 3 failures in a row"
    )
    store = MemoryScheduleStore()
    store.sync([adaptive, make_spec("periodic", task="t.p", scheduling_period=H)], T0 - H)
    assert views.ladder_words(row(store, "t.crawl"), adaptive) == (
        "adaptive, every 2h00m now (step 4 of 0-10, unit 1h00m)"
    )
    assert views.ladder_words(row(store, "t.p"), store.get("t.p").spec) == ""


def test_an_adaptive_schedule_past_its_target_is_in_error_in_the_histogram() -> None:
    store = MemoryScheduleStore()
    store.sync([make_spec("adaptive", task="t.crawl", interval_unit=H)], T0 - 3 * H)
    counts = dict(overview.histogram(snapshot(store)))
    assert sum(counts.values()) == 1  # never succeeded: its target passed 1 h after registering
    assert counts["in ERROR"] == 1


def test_priority_in_words() -> None:
    store = MemoryScheduleStore()
    store.sync([make_spec("periodic", task="t.a", scheduling_period=H, priority=80)], T0 - H)
    found = row(store, "t.a")
    assert views.priority_words(dataclasses.replace(found, effective_priority=80)) == "80"
    assert views.priority_words(dataclasses.replace(found, effective_priority=20)) == "80→20"
    assert views.priority_words(dataclasses.replace(found, priority=None)) == "-"


def test_a_disabled_schedule_is_tagged_like_a_paused_one() -> None:
    store = MemoryScheduleStore()
    store.sync([make_spec("periodic", task="t.a", scheduling_period=H)], T0 - H)
    found = row(store, "t.a")
    assert views.tags_of(found) == []
    assert views.tags_of(dataclasses.replace(found, paused=True, disabled_reason="3 failures")) == [
        "paused",
        "disabled",
    ]


def test_every_password_of_the_connections_is_hidden() -> None:
    """Each part of a sentinel URL, a password= parameter, the sentinels'
    options of dgs and of the broker: none shows on an error page."""
    from celery import Celery

    from celery_dgs.dgs import DGS
    from celery_dgs.ops.env import Env

    app = Celery(
        "secrets",
        set_as_current=False,
        broker="sentinel://:brk1@b1:26379;sentinel://:brk%2F2@b2:26379",
    )
    app.conf.update(
        dgs_database_url="postgresql+psycopg://u:dbpw@db/x",
        dgs_redis_url="sentinel://:pw1@h1:26379;sentinel://user:pw2@h2:26379/0?password=pw4",
        dgs_redis_master_name="mymaster",
        dgs_redis_sentinel_kwargs={"password": "pw3"},
        broker_transport_options={"master_name": "m", "sentinel_kwargs": {"password": "brk3"}},
    )
    DGS(app, install_worker_hooks=False)
    try:
        hidden = secrets_of(Env(app=app))
        secrets = ("dbpw", "pw1", "pw2", "pw3", "pw4", "brk1", "brk/2", "brk%2F2", "brk3")
        text = scrub("; ".join(f"failed with {s}" for s in secrets), hidden)
        assert not [s for s in secrets if s in text], text
        assert text.count("***") == len(secrets)
    finally:
        app.close()
