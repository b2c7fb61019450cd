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
from datetime import datetime, timedelta, timezone
from typing import Any

from celery_dgs.core.index import DeadlineIndex

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


def _celery_scheduler(n: int, *, all_due: bool) -> Any:
    from celery import Celery
    from celery.beat import Scheduler
    from celery.schedules import schedule

    class CountingScheduler(Scheduler):  # type: ignore[misc]
        """Celery's scheduler; ``apply_async`` counts instead of sending."""

        sent = 0

        def apply_async(self, entry: Any, producer: Any = None, advance: bool = True,
                        **kwargs: Any) -> None:  # fmt: skip
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
    log(f"  celery Scheduler with {n:,} entries: first tick (populate_heap) "
        f"{time.perf_counter() - start:.1f}s")  # fmt: skip
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
        results.append(Result(
            name="decision: celery beat Scheduler.tick() (all due)", n=n, median=celery[n],
            unit="us", samples=samples, notes="one tick sends one entry",
        ))  # fmt: skip
    for n in profile.decision_sizes:
        log(f"decision: DeadlineIndex pop+upsert, {n:,} schedules")
        with gc_paused():
            samples = dgs_decision_us(n, profile.repeats)
        value = median(samples)
        base = celery.get(n)
        results.append(Result(
            name="decision: DeadlineIndex pop + upsert", n=n, median=value, unit="us",
            baseline=base, baseline_name="celery tick" if base else "",
            ratio=None if base is None else base / value,
            ratio_note="" if base is None else "(celery/dgs)",
            samples=samples,
            notes="" if base else "celery tick not run at this N (O(N) per tick)",
        ))  # fmt: skip
    for n in profile.celery_sizes[-1:]:
        log(f"idle tick baseline: celery Scheduler.tick, {n:,} entries none due")
        samples = celery_tick_us(n, profile.repeats, all_due=False)
        celery_idle[n] = median(samples)
    return results, celery_idle
