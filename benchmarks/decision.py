"""Benchmark 1: cost of one scheduling decision.

* celery-dgs: :class:`~celery_dgs.core.index.DeadlineIndex` with N schedules,
  90 % of them eligible. One decision is what beat does per dispatch: ``pop``
  the eligible schedule with the lowest ``should_start_by`` and ``upsert`` it
  back with new start times (half of them eligible at once, as after a run of
  a schedule without cooldown: ``can_start_by`` passed, ``should_start_by``
  a period ahead), including the promotion from the waiting heap to the ready
  heap that the re-insert causes at the next pop. The eligible set thus stays
  the same size however many decisions are timed.
* Celery: ``celery.beat.Scheduler.tick()`` with N entries in ``beat_schedule``,
  every one due. One tick sends one due entry, so one tick is one decision.
  Nothing is patched but ``apply_async`` (counts instead of sending); the
  broker is ``memory://`` so the scheduler's producer is a real one.
  ``celery_idle_tick`` measures the same scheduler with nothing due (the
  baseline of the idle-tick benchmark).
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.lookahead import AdmissionRound, CapQueue, DemandBook
from celery_dgs.core.overload import make_index
from celery_dgs.core.ranking import OrderPolicy, RankingSources, overload_index
from celery_dgs.core.ranking import build_index as ranking_index

from .common import Profile, Result, gc_paused, log, median, repeat

DECISIONS_PER_REPEAT = 20_000
ELIGIBLE_SHARE = 0.9


def build_index(n: int, now: float, rng: random.Random) -> DeadlineIndex:
    index = DeadlineIndex()
    for i in range(n):
        if rng.random() < ELIGIBLE_SHARE:
            can = now - rng.random() * 86_400
        else:
            can = now + 1 + rng.random() * 86_400
        index.upsert(f"schedule-{i:07d}", can, can + rng.random() * 3_600)
    # A running beat moved these to the ready heap over time, not in one decision.
    index.promote(now)
    return index


def start_times(
    names: Iterable[str], now: float, rng: random.Random
) -> list[tuple[str, float, float]]:
    """``(name, can_start_by, should_start_by)`` for each: ``ELIGIBLE_SHARE`` of them
    eligible, a tenth of those already past ``should_start_by``."""
    entries = []
    for name in names:
        if rng.random() < ELIGIBLE_SHARE:
            can = now - rng.random() * 86_400
            should = now + (rng.random() - 0.1) * 36_000
        else:
            can = now + 1 + rng.random() * 86_400
            should = can + rng.random() * 3_600
        entries.append((name, can, max(can, should)))
    return entries


def dgs_decision_us(n: int, repeats: int, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    now = time.time()
    index = build_index(n, now, rng)
    gc.freeze()  # the collections between repeats need not walk the index
    k = DECISIONS_PER_REPEAT
    new_times = [(now - 1, now + 3_600 + rng.random() * 86_400) for _ in range(k)]

    def one() -> float:
        pop, upsert = index.pop, index.upsert
        start = time.perf_counter()
        for can, should in new_times:
            name = pop(now)
            assert name is not None
            upsert(name, can, should)
        return (time.perf_counter() - start) / k * 1e6

    one()  # warm-up
    try:
        return repeat(one, repeats)
    finally:
        gc.unfreeze()


#: beat's index: the default policy's order alone, and with priority classes
#: (one class: every schedule the default priority; three: 20/50/80).
BEAT_INDEXES = ("restore + laxity", "with priorities, 1 class", "with priorities, 3 classes")


def beat_index_decision_us(n: int, repeats: int, kind: str, seed: int = 1) -> list[float]:
    """As :func:`dgs_decision_us`, on the index beat builds by default
    (``restore`` with relative laxity), alone or wrapped by the priority classes
    with the elevator; a tenth of the schedules is due (past should_start_by)."""
    rng = random.Random(seed)
    now = time.time()
    expected = {f"schedule-{i:07d}": 10 + rng.random() * 600 for i in range(n)}
    margin = {name: 2 * e for name, e in expected.items()}
    classes = {
        name: (20, 50, 80)[i % 3] if kind.endswith("3 classes") else 50
        for i, name in enumerate(expected)
    }
    order = OrderPolicy()  # beat's defaults: restore, laxity floor 60 s, elevator 2 h
    index: DeadlineIndex
    if kind == BEAT_INDEXES[0]:
        index = overload_index(order, expected_s=expected.__getitem__, margin_s=margin.__getitem__)
    else:  # as beat builds it: the elevator and the top class's lead
        sources = RankingSources(expected.__getitem__, margin.__getitem__, classes.__getitem__)
        index = ranking_index(order, sources)
    entries = start_times(expected, now, rng)
    index.upsert_many(entries)
    index.pop(now)
    gc.freeze()
    k = DECISIONS_PER_REPEAT
    new_times = [(now - 1, now + 3_600 + rng.random() * 86_400) for _ in range(k)]

    def one() -> float:
        pop, upsert = index.pop, index.upsert
        start = time.perf_counter()
        for can, should in new_times:
            name = pop(now)
            assert name is not None
            upsert(name, can, should)
        return (time.perf_counter() - start) / k * 1e6

    one()
    try:
        return repeat(one, repeats)
    finally:
        gc.unfreeze()


#: The look-ahead admission's fleet: a tenth of the schedules run 100-1000 times
#: longer (15 % of the demand, nominal load 0.9); 500 slots, 450 of them busy
#: (20 with long runs).
LOOKAHEAD_LONG_SHARE = 0.1
LOOKAHEAD_SLOTS, LOOKAHEAD_BUSY, LOOKAHEAD_BUSY_LONG = 500, 450, 20
#: Decisions per dispatch round (the free slots): one admission round each.
LOOKAHEAD_ROUND = LOOKAHEAD_SLOTS - LOOKAHEAD_BUSY


def lookahead_decision_us(
    n: int, repeats: int, seed: int = 1, *, lookahead: bool = True
) -> list[float]:
    """:func:`beat_index_decision_us` ("restore + laxity") with the look-ahead
    admission: per decision, the popped schedule's share is noted in the
    demand book (beat does it when the run's end reaches it) and the
    admission of a round with the slots above checks it (a held one is
    re-inserted eligible later: that decision then continues with the next);
    a round is the 50 decisions of the free slots, as in beat. With
    ``lookahead=False``: the same fleet and loop without the admission and
    the book (the baseline)."""
    rng = random.Random(seed)
    now = time.time()
    expected = {}
    for i in range(n):
        base = 10 + rng.random() * 600
        long = rng.random() < LOOKAHEAD_LONG_SHARE
        expected[f"schedule-{i:07d}"] = base * (100 + rng.random() * 900) if long else base
    # Shares at nominal load 0.9 of the slots, 15 % of it in the long schedules.
    longs = sum(1 for e in expected.values() if e > 6_000) or 1
    share = {True: 0.135 * LOOKAHEAD_SLOTS / longs, False: 0.765 * LOOKAHEAD_SLOTS / (n - longs)}
    period = {name: e / share[e > 6_000] for name, e in expected.items()}
    margin = {name: 2 * e for name, e in expected.items()}
    index = make_index(
        "restore", expected_s=expected.__getitem__, margin_s=margin.__getitem__, laxity_floor_s=60.0
    )
    book = DemandBook()
    for name, e in expected.items():
        book.note(name, e, period[name])
    entries = start_times(expected, now, rng)
    index.upsert_many(entries)
    index.pop(now)
    should_of = {name: should for name, _, should in entries}
    busy = [(now + rng.random() * 600, 300.0) for _ in range(LOOKAHEAD_BUSY - LOOKAHEAD_BUSY_LONG)]
    busy += [(now + rng.random() * 86_400, 86_400.0) for _ in range(LOOKAHEAD_BUSY_LONG)]
    gc.freeze()
    k = DECISIONS_PER_REPEAT
    new_times = [(now - 1, 0.05 + rng.random()) for _ in range(k)]  # should: periods ahead

    queue = CapQueue()

    def one() -> float:
        pop, upsert, note = index.pop, index.upsert, book.note
        start = time.perf_counter()
        admission = AdmissionRound(book, now, LOOKAHEAD_SLOTS, lambda: busy, queue)
        for i, (can, should) in enumerate(new_times):
            if not lookahead:
                name = pop(now)
                assert name is not None
                upsert(name, can, now + should * period[name])
                continue
            if i % LOOKAHEAD_ROUND == 0:
                admission = AdmissionRound(book, now, LOOKAHEAD_SLOTS, lambda: busy, queue)
            while True:
                name = pop(now)
                assert name is not None
                wake = admission.hold_until(expected[name], should_of[name], name)
                if wake is None:
                    break
                upsert(name, wake, should_of[name])
            # Next due a random part of its period ahead: the long schedules
            # come up as often as their number, not more.
            next_should = now + should * period[name]
            note(name, expected[name], period[name])
            upsert(name, can, next_should)
            should_of[name] = next_should
        return (time.perf_counter() - start) / k * 1e6

    one()
    try:
        return repeat(one, repeats)
    finally:
        gc.unfreeze()


def _celery_scheduler(n: int, *, all_due: bool) -> Any:
    from celery import Celery
    from celery.beat import Scheduler
    from celery.schedules import schedule

    class CountingScheduler(Scheduler):  # type: ignore[misc]
        """Celery's scheduler; ``apply_async`` counts instead of sending."""

        sent = 0

        def apply_async(
            self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
        ) -> None:
            self.sent += 1

    app = Celery("bench-celery-beat", broker="memory://", set_as_current=False)
    app.conf.beat_max_loop_interval = 300
    past = datetime(2000, 1, 1, tzinfo=timezone.utc)
    beat_schedule: dict[str, dict[str, Any]] = {}
    for i in range(n):
        entry: dict[str, Any] = {
            "task": "bench.task",
            "schedule": schedule(timedelta(seconds=3_600 + i % 3_600), app=app),
            "args": (i,),
        }
        if all_due:
            entry["last_run_at"] = past
        beat_schedule[f"entry-{i:07d}"] = entry
    app.conf.beat_schedule = beat_schedule
    sched = CountingScheduler(app, lazy=False)
    start = time.perf_counter()
    sched.tick()  # builds the heap (and sends one if due)
    log(
        f"  celery Scheduler with {n:,} entries: first tick (populate_heap) "
        f"{time.perf_counter() - start:.1f}s"
    )
    return sched


def celery_tick_us(n: int, repeats: int, *, all_due: bool) -> list[float]:
    sched = _celery_scheduler(n, all_due=all_due)
    ticks = max(3, min(50, 500_000 // n))

    def one() -> float:
        sent = sched.sent
        start = time.perf_counter()
        for _ in range(ticks):
            sched.tick()
        elapsed = time.perf_counter() - start
        if all_due:
            assert sched.sent - sent == ticks, "every tick should send one due entry"
        else:
            assert sched.sent == sent, "nothing should be due"
        return elapsed / ticks * 1e6

    samples = repeat(one, repeats)
    sched.app.close()
    return samples


def run(profile: Profile) -> tuple[list[Result], dict[int, float]]:
    """Returns the rows and the Celery idle-tick medians by N (for benchmark 2)."""
    results: list[Result] = []
    celery: dict[int, float] = {}
    celery_idle: dict[int, float] = {}
    for n in profile.celery_sizes:
        log(f"decision: celery Scheduler.tick, {n:,} entries all due")
        samples = celery_tick_us(n, profile.repeats, all_due=True)
        celery[n] = median(samples)
        results.append(
            Result(
                name="decision: celery beat Scheduler.tick() (all due)",
                n=n,
                median=celery[n],
                unit="us",
                samples=samples,
                notes="one tick sends one entry",
            )
        )
    for n in profile.decision_sizes:
        log(f"decision: DeadlineIndex pop+upsert, {n:,} schedules")
        with gc_paused():
            samples = dgs_decision_us(n, profile.repeats)
        value = median(samples)
        base = celery.get(n)
        results.append(
            Result(
                name="decision: DeadlineIndex pop + upsert",
                n=n,
                median=value,
                unit="us",
                baseline=base,
                baseline_name="celery tick" if base else "",
                ratio=None if base is None else base / value,
                ratio_note="" if base is None else "(celery/dgs)",
                samples=samples,
                notes="" if base else "celery tick not run at this N (O(N) per tick)",
            )
        )
    for n in profile.decision_sizes:
        base_us = None
        for kind in BEAT_INDEXES:
            log(f"decision: beat's index ({kind}) pop+upsert, {n:,} schedules")
            with gc_paused():
                samples = beat_index_decision_us(n, profile.repeats, kind)
            value = median(samples)
            base_us = value if base_us is None else base_us
            results.append(
                Result(
                    name=f"decision: beat's index, {kind}",
                    n=n,
                    median=value,
                    unit="us",
                    baseline=base_us if kind != BEAT_INDEXES[0] else None,
                    baseline_name="restore + laxity" if kind != BEAT_INDEXES[0] else "",
                    ratio=None if kind == BEAT_INDEXES[0] else value / base_us,
                    ratio_note="" if kind == BEAT_INDEXES[0] else "(x its cost)",
                    samples=samples,
                )
            )
        log(f"decision: beat's index with the look-ahead admission, {n:,} schedules")
        with gc_paused():
            plain = median(lookahead_decision_us(n, profile.repeats, lookahead=False))
            samples = lookahead_decision_us(n, profile.repeats)
        value = median(samples)
        results.append(
            Result(
                name="decision: beat's index, restore + laxity + look-ahead",
                n=n,
                median=value,
                unit="us",
                baseline=plain,
                baseline_name="same fleet, no look-ahead",
                ratio=value / plain,
                ratio_note="(x its cost)",
                samples=samples,
                notes="a tenth of the schedules long; 500 slots, 450 busy",
            )
        )
    for n in profile.celery_sizes[-1:]:
        log(f"idle tick baseline: celery Scheduler.tick, {n:,} entries none due")
        samples = celery_tick_us(n, profile.repeats, all_due=False)
        celery_idle[n] = median(samples)
    return results, celery_idle
