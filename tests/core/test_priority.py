"""Priority classes and the elevator (celery_dgs/core/priority.py): pure, times in seconds."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.overload import make_index
from celery_dgs.core.priority import (
    PriorityIndex,
    effective_priority,
    elevator_steps,
)
from celery_dgs.core.spec import CronSpec, PeriodicSpec
from celery_dgs.core.spec_build import spec_from_dict
from celery_dgs.core.spec_values import DEFAULT_PRIORITY
from celery_dgs.errors import ScheduleConfigError


def index(classes: dict[str, int], interval: float | None = None, **kw: object) -> PriorityIndex:
    return PriorityIndex(DeadlineIndex(), classes.__getitem__, elevator_interval_s=interval, **kw)  # type: ignore[arg-type]


def drain(ix: DeadlineIndex, now: float) -> list[str]:
    out = []
    while (name := ix.pop(now)) is not None:
        out.append(name)
    return out


# -- the spec field ------------------------------------------------------------------
def test_priority_is_a_validated_spec_field_kept_in_the_json_form() -> None:
    spec = PeriodicSpec(task="t", scheduling_period=timedelta(hours=1), priority=20)
    assert spec.priority == 20
    assert spec_from_dict(spec.to_dict()).priority == 20
    plain = PeriodicSpec(task="t", scheduling_period=timedelta(hours=1))
    assert plain.priority == DEFAULT_PRIORITY
    assert "priority" not in plain.to_dict()  # specs stored before keep their JSON
    cron = CronSpec(
        task="c",
        cron_schedule="0 * * * *",
        priority=0,
        cron_max_schedule_duration=timedelta(minutes=5),
    )
    assert spec_from_dict(cron.to_dict()).priority == 0


@pytest.mark.parametrize("bad", [-1, 100, 2.0, "5", True, None])
def test_a_bad_priority_names_the_schedule_and_the_field(bad: object) -> None:
    with pytest.raises(ScheduleConfigError) as err:
        PeriodicSpec(
            task="t", configuration="c", scheduling_period=timedelta(hours=1), priority=bad
        )  # type: ignore[arg-type]
    assert err.value.schedule == "t@c"
    assert err.value.field == "priority"
    assert "0" in str(err.value)
    assert "99" in str(err.value)


# -- the order -----------------------------------------------------------------------
def test_one_class_changes_nothing() -> None:
    """Every schedule in one class: the same choices as the policy's own index."""
    rng = random.Random(5)
    entries = [(f"s{i}", rng.uniform(0, 500), rng.uniform(0, 900)) for i in range(300)]
    entries = [(n, c, max(c, s)) for n, c, s in entries]
    expected_s = {n: rng.uniform(1, 100) for n, _, _ in entries}
    margins = {n: rng.uniform(1, 300) for n, _, _ in entries}

    def build() -> DeadlineIndex:
        return make_index(
            "restore",
            expected_s=expected_s.__getitem__,
            margin_s=margins.__getitem__,
            laxity_floor_s=60.0,
        )

    # a second class, eligible only after the test: the classed index takes its
    # general path (not the shortcut for one class) and must still agree
    entries.append(("later", 1e6, 1e6))
    expected_s["later"], margins["later"] = 1.0, 1.0
    plain = build()
    classed = PriorityIndex(build(), lambda n: 90 if n == "later" else 50, elevator_interval_s=60)
    for ix in (plain, classed):
        ix.upsert_many(entries)
    for now in (100.0, 400.0, 700.0, 2000.0):
        for _ in range(40):
            a, b = plain.pop(now), classed.pop(now)
            assert a == b
    assert drain(plain, 5000.0) == drain(classed, 5000.0)
    assert len(classed._class_sizes) == 1  # only "later" is left, in its own class


def test_priority_orders_only_due_work() -> None:
    """Not due (should_start_by ahead): the policy's order (here deadline order),
    whatever the class; due: the higher class first."""
    ix = index({"low": 80, "high": 20})
    ix.upsert("low", 0, 100)
    ix.upsert("high", 0, 200)
    assert ix.peek(50) == "low"  # neither is due: lowest should_start_by first
    assert ix.peek(150) == "low"  # only low is due
    assert ix.peek(250) == "high"  # both due: the higher class first
    assert ix.effective_priority("low", 250) == 80


def test_a_due_higher_class_goes_before_a_lower_one_in_error() -> None:
    ix = index({"a": 20, "b": 50, "c": 80})
    ix.upsert("c", 0, 10)
    ix.upsert("b", 0, 20)
    ix.upsert("a", 0, 30)
    assert drain(ix, 40) == ["a", "b", "c"]


def test_the_elevator_moves_due_work_up_one_non_empty_class_per_step() -> None:
    """Classes 20, 50 and 80 have due work (30-49 are empty: skipped). Every
    100 s each due schedule moves up one class; at the top class it waits one
    more step behind that class's own due work, then goes before it."""
    classes = {"a": 20, "b": 50, "c": 80, "a2": 20}
    ix = index(classes, interval=100)
    ix.upsert("c", 0, 10)
    ix.upsert("b", 0, 90)
    ix.upsert("a", 0, 95)
    assert [ix.effective_priority(n, 99) for n in "abc"] == [20, 50, 80]
    assert ix.peek(99) == "a"
    assert ix.pop(99) == "a"
    # one step (at 100); class 20 has no schedule left: skipped, c moves to 50
    assert ix.due_classes(150) == [50, 80]
    assert [ix.effective_priority(n, 150) for n in "bc"] == [50, 50]
    ix.upsert("a2", 0, 210)
    # two steps: b and c are in the top class, behind its own due work
    assert [ix.effective_priority(n, 250) for n in ("a2", "b", "c")] == [20, 20, 20]
    assert ix.peek(250) == "a2"
    # three steps: b has waited its step at the top and goes first; c is held
    # behind a2 until class 50 empties, which puts c a level higher
    assert ix.peek(350) == "b"
    assert ix.pop(350) == "b"
    assert ix.due_classes(350) == [20, 80]
    assert drain(ix, 350) == ["c", "a2"]


def test_the_top_class_keeps_level_0_while_it_has_no_due_work() -> None:
    """Class 20 has schedules but nothing due: class 50's due work is one
    level below it, so class 80's work one step up goes before it."""
    ix = index({"a": 20, "b": 50, "c": 80}, interval=100)
    ix.upsert("a", 0, 1000)
    ix.upsert("b", 0, 150)
    ix.upsert("c", 0, 50)
    assert ix.due_classes(160) == [20, 50, 80]
    assert ix.effective_priority("c", 160) == 50
    assert ix.peek(160) == "b"  # c is at b's level, elevated: behind b's own work
    assert ix.peek(210) == "c"  # two steps: c is at the top level, ahead of b's


def test_at_one_place_the_longest_due_goes_first_whatever_the_class() -> None:
    """b and c are both elevated to the top level; the policy's order (lowest
    should_start_by) would take b, but c has been due longer."""
    ix = index({"a": 20, "b": 50, "c": 80}, interval=100)
    ix.upsert("a", 0, 1000)
    ix.upsert("b", 90, 5)  # due at 90 (its can_start_by), should_start_by 5
    ix.upsert("c", 0, 10)  # due at 10
    assert ix.peek(250) == "c"
    assert drain(ix, 250) == ["c", "b", "a"]


def test_the_top_class_leads_only_while_capacity_is_short() -> None:
    """With a lead, top-class work counts as due ``lead`` early, but only
    while some due schedule has waited ``short_when_waited_s``; other classes
    get no lead."""

    def build(low_should: float) -> PriorityIndex:
        ix = index(
            {"top": 20, "top2": 20, "mid": 50, "low": 80},
            lead_s=lambda n: 50.0,
            short_when_waited_s=100.0,
        )
        ix.upsert("top", 0, 200)
        ix.upsert("top2", 0, 5000)
        ix.upsert("mid", 0, 190)
        ix.upsert("low", 0, low_should)
        return ix

    calm = build(low_should=100)  # low has waited 60 s at 160: not short
    assert calm.peek(160) == "low"
    short = build(low_should=50)  # low has waited 110 s at 160: short
    assert short.peek(160) == "top"  # inside its lead (from 150): due
    short.pop(160)
    assert short.peek(160) == "low"  # mid is inside a lead too, but not the top class
    assert short.due_classes(160) == [20, 80]


def test_low_priority_work_never_starves() -> None:
    """A stream of due top-class work, one slot: the waiting low one still starts
    within (classes above it + 2) steps of becoming due (one held at the top)."""
    classes = {"low": 80}
    ix = index(classes, interval=100)
    ix.upsert("low", 0, 5)
    started = None
    for t in range(0, 1000, 10):
        name = f"top{t}"
        classes[name] = 0
        ix.upsert(name, t, t)
        chosen = ix.pop(float(t))
        if chosen == "low":
            started = t
            break
    assert started is not None
    assert started <= 5 + 3 * 100


def test_without_the_elevator_the_order_is_strict() -> None:
    classes = {"low": 80}
    ix = index(classes, interval=None)
    ix.upsert("low", 0, 5)
    for t in range(0, 5000, 10):
        classes[f"top{t}"] = 0
        ix.upsert(f"top{t}", t, t)
        assert ix.pop(float(t)) != "low"


def test_elevator_steps_are_aligned_to_the_clock() -> None:
    assert elevator_steps(50, 99, 100) == 0
    assert elevator_steps(50, 100, 100) == 1
    assert elevator_steps(99, 101, 100) == 1  # a step between: it counts in full
    assert elevator_steps(50, 150, 100, clock_offset_s=60) == 1  # steps at 40, 140, ...
    assert elevator_steps(50, 5000, None) == 0
    assert effective_priority(80, None, 500, [20, 80], 100) == 80  # not due
    assert effective_priority(80, 10, 500, [20, 80], 100) == 20


def test_a_refused_due_schedule_is_kept_and_the_next_one_placed() -> None:
    ix = index({"a1": 20, "a2": 20, "b": 80})
    for name, should in (("a1", 10), ("a2", 20), ("b", 5)):
        ix.upsert(name, 0, should)
    assert ix.pop_placeable(30, lambda n: n != "a1") == "a2"
    assert ix.pop_placeable(30, lambda n: n != "a1") == "b"
    assert ix.pop(30) == "a1"
    assert ix.pop(30) is None
    assert len(ix) == 0


def test_reupserting_moves_a_schedule_to_its_new_class() -> None:
    classes = {"x": 80, "y": 50}
    ix = index(classes)
    ix.upsert("x", 0, 10)
    ix.upsert("y", 0, 20)
    assert ix.peek(30) == "y"
    classes["x"] = 20
    ix.upsert("x", 0, 10)
    assert ix.peek(30) == "x"
    ix.remove("x")
    assert ix.due_classes(30) == [50]


def test_heaps_stay_bounded_under_churn() -> None:
    ix = index({f"s{i}": i % 3 * 30 for i in range(50)}, interval=50)
    for round_ in range(400):
        for i in range(50):
            ix.upsert(f"s{i}", round_, round_ + i % 7)
        ix.pop(float(round_ + 3))
    assert len(ix._upcoming) + sum(len(h) for h in ix._due.values()) <= 4 * 50 + 1024 + 50


def gated(classes: dict[str, int], **kw: object) -> PriorityIndex:
    """Classes order due work only while capacity is short: a due schedule has
    waited 100 s, or did less than 500 s ago."""
    return index(classes, short_when_waited_s=100.0, short_hold_s=500.0, **kw)


def test_below_capacity_the_classes_change_no_choice() -> None:
    ix = gated({"top": 20, "low": 80})
    ix.upsert("low", 0, 10)
    ix.upsert("top", 0, 50)
    assert ix.peek(60) == "low"  # main's order: low waited 50 s, capacity not short
    assert ix.peek(120) == "top"  # low has waited 110 s: the classes decide
    assert ix.class_picks == 0
    assert ix.pop(120) == "top"
    assert ix.class_picks == 1


def test_capacity_stays_short_for_the_hold_after_the_last_long_wait() -> None:
    ix = gated({"top": 20, "low": 80, "low2": 80})
    ix.upsert("low", 0, 0)
    ix.upsert("top", 0, 160)
    assert ix.pop(150) == "low"  # the only due one; it has waited 150 s: short until 650
    ix.upsert("low2", 0, 200)
    ix.upsert("top", 0, 210)
    # At 230 nothing has waited 100 s, but the last long wait was at 150: still short.
    assert ix.peek(230) == "top"
    # Past the hold (150 + 500), the same kind of choice is main's again.
    ix.upsert("top", 0, 700)
    ix.upsert("low2", 0, 690)
    assert ix.peek(720) == "low2"


def test_a_due_run_request_puts_the_classes_in_charge() -> None:
    """A run request (should_start_by pushed back by RUN_REQUEST_PRIORITY_S)
    goes in its class at once, even below capacity; once it is gone, main decides."""
    from celery_dgs.core.late_order import RUN_REQUEST_PRIORITY_S

    ix = gated({"asked": 60, "top": 20, "low": 80})
    ix.upsert("low", 0, 10)
    ix.upsert("top", 0, 50)
    ix.upsert("asked", 55, 55 - RUN_REQUEST_PRIORITY_S)
    assert ix.peek(60) == "top"  # class 20 before the request's class 60
    ix.remove("asked")
    assert ix.peek(60) == "low"


def test_an_overload_puts_the_classes_in_charge_before_any_long_wait() -> None:
    """``overloaded()`` (beat: demand above the live slots) makes capacity
    short at once, and the hold keeps it short for a while after it stops."""
    overloaded = [False]
    ix = gated({"top": 20, "low": 80}, overloaded=lambda: overloaded[0])
    ix.upsert("low", 0, 10)
    ix.upsert("top", 0, 50)
    assert ix.peek(60) == "low"  # nothing waited 100 s, demand fits: main's order
    overloaded[0] = True
    assert ix.peek(60) == "top"  # the slots dropped: the classes decide at once
    overloaded[0] = False
    assert ix.peek(100) == "top"  # nothing waited 100 s, but within the hold (60 + 500)
    ix.upsert("low", 0, 600)
    ix.upsert("top", 0, 640)
    assert ix.peek(650) == "low"  # past it: main's order again
