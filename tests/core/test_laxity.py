"""LaxityIndex ("restore" with relative-laxity order until ERROR) (pure).

laxity(now) = (error_at - now) / (margin + floor), error_at = should_start_by + margin
(margin NaN or negative: 0). Schedules in ERROR (``error_at < now``) come first, in
RestoringIndex's late order (key should_start_by + aging * expected run); a schedule
past its should_start_by but not yet in ERROR ("at risk") stays in laxity order.
Hand-computed numbers use margins with ``margin + floor`` a power of two, so every
laxity below is an exact binary fraction, and distinct powers of two never share a
bucket (buckets are a factor ``BUCKET_WIDTH``, 1.25, wide).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.laxity import BUCKET_WIDTH, DEFAULT_LAXITY_FLOOR_S, LaxityIndex
from celery_dgs.core.overload import RUN_REQUEST_PRIORITY_S, RestoringIndex

SETTINGS = settings(max_examples=200, deadline=None)


def lookup(table: dict[str, float], default: float = 0.0) -> Callable[[str], float]:
    return lambda name: table.get(name, default)


def make(
    margins: dict[str, float],
    floor: float = 60.0,
    runs: dict[str, float] | None = None,
    aging: float = 10.0,
) -> LaxityIndex:
    return LaxityIndex(lookup(runs or {}), lookup(margins), aging, floor)


def drain(index: DeadlineIndex, now: float) -> list[str]:
    out = []
    while (name := index.pop(now)) is not None:
        out.append(name)
    return out


# --- hand-computed orders ---


def test_default_floor_is_sixty_seconds() -> None:
    assert DEFAULT_LAXITY_FLOOR_S == 60.0
    assert LaxityIndex(lookup({}), lookup({}), 10.0).floor_s == 60.0


def test_least_laxity_goes_first_even_with_a_later_should_start_by() -> None:
    # floor 60, now 0. a: should 100, margin 4   -> (100 + 4) / 64     = 1.625
    #                  b: should 200, margin 964 -> (200 + 964) / 1024 = 1.13671875
    # Buckets 2**6..2**7 and 2**10..2**11: b goes first although 200 > 100.
    margins = {"a": 4.0, "b": 964.0}
    index = make(margins)
    plain = DeadlineIndex()
    for idx in (index, plain):
        idx.upsert("a", 0, 100)
        idx.upsert("b", 0, 200)
    assert plain.peek(0) == "a"  # deadline order
    assert index.peek(0) == "b"
    assert drain(index, 0) == ["b", "a"]


def test_the_choice_depends_on_now() -> None:
    # laxity_a(now) = (104 - now) / 64, laxity_b(now) = (1164 - now) / 1024; equal at
    # now = 33.33. now 0: a 1.625, b 1.137 -> b. now 50: a 54/64 = 0.84375,
    # b 1114/1024 = 1.088 -> a. Neither is late (should_start_by >= now).
    margins = {"a": 4.0, "b": 964.0}
    index = make(margins)
    index.upsert("a", 0, 100)
    index.upsert("b", 0, 200)
    assert index.peek(0) == "b"
    assert index.peek(33) == "b"  # a 71/64 = 1.109, b 1131/1024 = 1.1045
    assert index.peek(34) == "a"  # a 70/64 = 1.09375, b 1130/1024 = 1.1035
    assert index.peek(50) == "a"
    assert drain(index, 50) == ["a", "b"]


def test_laxity_is_relative_to_the_margin_across_many_buckets() -> None:
    # floor 0, now 0, laxity = (should + margin) / margin, one per bucket:
    # m1: margin 1,    should 3    -> 4
    # m2: margin 16,   should 20   -> 2.25
    # m3: margin 256,  should 100  -> 1.390625
    # m4: margin 4096, should 4000 -> 1.9765625
    margins = {"m1": 1.0, "m2": 16.0, "m3": 256.0, "m4": 4096.0}
    index = make(margins, floor=0.0)
    for name, should in (("m1", 3), ("m2", 20), ("m3", 100), ("m4", 4000)):
        index.upsert(name, 0, should)
    assert drain(index, 0) == ["m3", "m4", "m2", "m1"]


def test_late_schedules_come_first_in_restore_order() -> None:
    # now 1000, aging 10, floor 48 (error_at = should + margin).
    # late_long:  should 900, margin 16, error_at 916 < now: ERROR, key 900 + 10*100 = 1900
    # late_short: should 950, margin 16, error_at 966 < now: ERROR, key 950 + 10*10  = 1050
    # at_risk: should 980 (passed), margin 80, error_at 1060 >= now: not in ERROR,
    #          laxity (1060 - 1000)/128 = 0.46875 (restore key would be 980 + 10 = 990)
    # urgent:  on time, should 1000, margin 16 -> (1000+16-1000)/64 = 0.25
    # relaxed: on time, should 1200, margin 16 -> 216/64 = 3.375
    # request: operator run request (should_start_by far in the past): first of all.
    # Old rule (late from should_start_by): request, at_risk (990), late_short,
    # late_long, urgent, relaxed. New: at_risk stays in laxity order, after urgent.
    runs = {
        "late_long": 100.0,
        "late_short": 10.0,
        "at_risk": 1.0,
        "urgent": 1.0,
        "relaxed": 1.0,
        "request": 500.0,
    }
    margins = {
        "late_long": 16.0,
        "late_short": 16.0,
        "at_risk": 80.0,
        "urgent": 16.0,
        "relaxed": 16.0,
    }
    index = make(margins, floor=48.0, runs=runs, aging=10.0)
    index.upsert("late_long", 0, 900)
    index.upsert("late_short", 0, 950)
    index.upsert("at_risk", 0, 980)
    index.upsert("urgent", 0, 1000)
    index.upsert("relaxed", 0, 1200)
    index.upsert("request", 1000, 1000 - RUN_REQUEST_PRIORITY_S)
    assert index.ready_count(1000) == 6
    assert index.late_count(1000) == 3  # request, late_short, late_long
    assert drain(index, 1000) == [
        "request",
        "late_short",
        "late_long",
        "urgent",
        "at_risk",
        "relaxed",
    ]


def test_late_aging_matches_restoring_index() -> None:
    # floor 60, now 2000. late_long: should 90, margin 4, error_at 94: ERROR.
    # late_short: should 1090, margin 900, error_at 1990: ERROR. Both in ERROR, so the
    # order among them is RestoringIndex's: aging 10: 90 + 3000 > 1090 + 100 -> short
    # first; aging 2: 90 + 600 < 1090 + 20 -> long first. on_time (laxity 4/64) last.
    runs = {"late_long": 300.0, "late_short": 10.0, "on_time": 1.0}
    margins = {"late_long": 4.0, "late_short": 900.0, "on_time": 4.0}
    for aging, expected in (
        (10.0, ["late_short", "late_long"]),
        (2.0, ["late_long", "late_short"]),
    ):
        index = make(margins, runs=runs, aging=aging)
        restore = RestoringIndex(runs.__getitem__, aging)
        for idx in (index, restore):
            idx.upsert("late_long", 0, 90)
            idx.upsert("late_short", 0, 1090)
            idx.upsert("on_time", 0, 2000)
        assert index.late_count(2000) == 2
        assert drain(index, 2000) == drain(restore, 2000) == [*expected, "on_time"]
    # late_short with margin 4000 (error_at 5090) is not in ERROR: laxity
    # (5090 - 2000)/4060 = 0.76 > on_time's 4/64 = 0.0625, so it goes last even with
    # aging 10 (restore's key 1190 would put it first).
    index = make({**margins, "late_short": 4000.0}, runs=runs, aging=10.0)
    index.upsert("late_long", 0, 90)
    index.upsert("late_short", 0, 1090)
    index.upsert("on_time", 0, 2000)
    assert index.late_count(2000) == 1
    assert drain(index, 2000) == ["late_long", "on_time", "late_short"]


#: margin + 60 (the default floor) is a power of two: one margin per bucket.
EXACT_MARGINS = (4.0, 68.0, 196.0, 452.0, 964.0, 1988.0)


def random_schedules(
    seed: int, margin: Callable[[random.Random], float]
) -> tuple[dict[str, float], dict[str, float], dict[str, tuple[float, float]]]:
    rng = random.Random(seed)
    runs = {f"s{i}": rng.uniform(0, 300) for i in range(60)}
    margins = {name: margin(rng) for name in runs}
    times = {name: (rng.uniform(0, 2000), rng.uniform(-1000, 2000)) for name in runs}
    return runs, margins, times


def check_error_prefix_is_restoring_order(
    runs: dict[str, float],
    margins: dict[str, float],
    times: dict[str, tuple[float, float]],
    now: float,
    *,
    exact: bool,
) -> None:
    """Schedules in ERROR (should + margin < now) come first, in the order of a
    RestoringIndex holding only them; the rest follow, by laxity if ``exact`` (one
    margin per bucket: else the order inside a bucket is by should_start_by)."""
    laxity = LaxityIndex(runs.__getitem__, margins.__getitem__, 7.0)
    in_error = RestoringIndex(runs.__getitem__, 7.0)
    eligible = [name for name, (can, _) in times.items() if can <= now]
    error = [name for name in eligible if times[name][1] + margins[name] < now]
    at_risk = [name for name in eligible if times[name][1] < now <= times[name][1] + margins[name]]
    for name, (can, should) in times.items():
        laxity.upsert(name, can, should)
        if name in error:
            in_error.upsert(name, can, should)
    assert error  # the cases exercise both kinds of "past should_start_by"
    assert at_risk
    assert laxity.ready_count(now) == len(eligible)
    assert laxity.late_count(now) == len(error)
    got = drain(laxity, now)
    assert got[: len(error)] == drain(in_error, now)

    def lax(name: str) -> float:
        return (times[name][1] + margins[name] - now) / (margins[name] + 60.0)

    rest = got[len(error) :]
    assert sorted(rest) == sorted(set(eligible) - set(error))
    if exact:
        assert rest == sorted(rest, key=lax)


@pytest.mark.parametrize("seed", range(10))
def test_late_prefix_is_restoring_order(seed: int) -> None:
    runs, margins, times = random_schedules(seed, lambda rng: rng.choice(EXACT_MARGINS))
    check_error_prefix_is_restoring_order(runs, margins, times, 1000.0, exact=True)


def test_late_prefix_is_restoring_order_with_any_margins() -> None:
    # As above with margins spread over each bucket (uniform 0..3000). Regression:
    # with buckets ordered by should_start_by, seeds 0, 2, 5, 7 and 9 each had a
    # schedule in ERROR hidden behind one of its bucket that was not (late_count
    # and the ERROR prefix missed it); buckets are now ordered by error_at.
    for seed in range(10):
        runs, margins, times = random_schedules(seed, lambda rng: rng.uniform(0, 3000))
        check_error_prefix_is_restoring_order(runs, margins, times, 1000.0, exact=False)


def test_a_schedule_in_error_goes_first_even_behind_an_at_risk_one_in_its_bucket() -> None:
    # floor 0, now 100; a and b share the bucket 1.25**20..1.25**21 (86.7..108.4).
    # a: should 0, margin 105, error_at 105 >= 100: not in ERROR, laxity 5/105
    # b: should 5, margin 90,  error_at 95  <  100: in ERROR -> must go first.
    # Regression: a bucket ordered by should_start_by had a (0) on top of b (5),
    # only the top was checked for ERROR, so b stayed hidden: late_count 0, a first.
    assert math.floor(math.log(105) / math.log(BUCKET_WIDTH)) == 20
    assert math.floor(math.log(90) / math.log(BUCKET_WIDTH)) == 20
    margins = {"a": 105.0, "b": 90.0}
    index = make(margins, floor=0.0)
    index.upsert("a", 0, 0)
    index.upsert("b", 0, 5)
    assert index.late_count(100) == 1
    assert drain(index, 100) == ["b", "a"]


# --- the ERROR rule: late only once error_at has passed ---


def test_a_schedule_past_should_start_by_but_not_in_error_is_not_reordered_shortest_first() -> None:
    # floor 0, aging 10, now 100; both past their should_start_by, neither in ERROR:
    # long:  should 90, margin 64,   error_at 154,  run 50 -> laxity 54/64 = 0.84375
    # short: should 95, margin 1024, error_at 1119, run 1  -> laxity 1019/1024 = 0.995
    # Old rule (late at should_start_by, restore keys long 90 + 500 = 590, short
    # 95 + 10 = 105): short first. New rule (laxity): long first.
    runs = {"long": 50.0, "short": 1.0}
    margins = {"long": 64.0, "short": 1024.0}
    index = make(margins, floor=0.0, runs=runs, aging=10.0)
    index.upsert("long", 0, 90)
    index.upsert("short", 0, 95)
    assert index.late_count(100) == 0
    assert index.ready_count(100) == 2
    assert index.peek(100) == "long"
    assert drain(index, 100) == ["long", "short"]
    # Once both are in ERROR (now 1200) the restore keys decide: short first.
    index = make(margins, floor=0.0, runs=runs, aging=10.0)
    index.upsert("long", 0, 90)
    index.upsert("short", 0, 95)
    assert index.late_count(1200) == 2
    assert drain(index, 1200) == ["short", "long"]


def test_a_schedule_joins_the_late_heap_the_moment_its_error_at_passes() -> None:
    # floor 0, aging 10. x: should 100, margin 64, error_at 164, run 0 -> key 100.
    # z: should 50, margin 16, error_at 66, run 10 -> key 150 (in ERROR from 66 on).
    # At now == 164 x is not in ERROR (laxity 0): z (late heap) first, then x.
    # Just after 164 x is late too, and its key 100 < 150: x first.
    runs = {"x": 0.0, "z": 10.0}
    margins = {"x": 64.0, "z": 16.0}
    index = make(margins, floor=0.0, runs=runs, aging=10.0)
    index.upsert("x", 0, 100)
    index.upsert("z", 0, 50)
    for now in (99.0, 100.0, 101.0, 163.0, 164.0):
        assert index.late_count(now) == 1, now
        assert index.peek(now) == "z", now
    after = math.nextafter(164.0, math.inf)
    assert index.late_count(after) == 2
    assert index.peek(after) == "x"
    assert drain(index, after) == ["x", "z"]


@pytest.mark.parametrize("bad", [0.0, -5.0, float("nan"), float("-inf")])
def test_with_no_valid_margin_error_at_is_should_start_by(bad: float) -> None:
    # floor 64. x: margin bad -> 0, should 100, error_at 100, run 0 -> key 100.
    # z: should 50, margin 0, error_at 50, run 10 -> key 150: in ERROR at 100.
    # At now 100 x has laxity 0 but is not late; just after 100 it is, and goes first.
    runs = {"x": 0.0, "z": 10.0}
    margins = {"x": bad, "z": 0.0}
    index = make(margins, floor=64.0, runs=runs, aging=10.0)
    index.upsert("x", 0, 100)
    index.upsert("z", 0, 50)
    assert index.late_count(100) == 1
    assert index.peek(100) == "z"
    after = math.nextafter(100.0, math.inf)
    assert index.late_count(after) == 2
    assert drain(index, after) == ["x", "z"]


def test_with_no_floor_an_at_risk_schedule_goes_before_on_time_ones() -> None:
    # floor 0, now 100: laxity < 1 exactly when should_start_by has passed.
    # at_risk:  should 99,  margin 1024, error_at 1123 -> 1023/1024 = 0.999 (< 1)
    # due_now:  should 100, margin 1                   -> 1/1 = 1
    # tight:    should 100, margin 4                   -> 4/4 = 1
    # later:    should 101, margin 2                   -> 3/2 = 1.5
    # at_risk goes first although its margin is the largest and its run the longest.
    runs = {"at_risk": 1000.0, "due_now": 0.0, "tight": 0.0, "later": 0.0}
    margins = {"at_risk": 1024.0, "due_now": 1.0, "tight": 4.0, "later": 2.0}
    index = make(margins, floor=0.0, runs=runs, aging=10.0)
    index.upsert("later", 0, 101)
    index.upsert("tight", 0, 100)
    index.upsert("due_now", 0, 100)
    index.upsert("at_risk", 0, 99)
    assert index.late_count(100) == 0
    popped = drain(index, 100)
    assert popped[0] == "at_risk"
    assert sorted(popped[1:3]) == ["due_now", "tight"]  # laxity 1 both: either order
    assert popped[3] == "later"


@pytest.mark.parametrize("margin", [0.0, 4.0, 3600.0, 1e6, float("nan")])
def test_operator_run_requests_still_go_first(margin: float) -> None:
    # now 1000, floor 60, aging 10. request: requested at 1000, should 1000 - 1e12,
    # run 1e4 -> key -1e12 + 1e5: in ERROR whatever its margin (error_at ~ -1e12).
    # error:   should 900, margin 4,  error_at 904 < now: ERROR, run 0 -> key 900
    # at_risk: should 935, margin 68, error_at 1003: laxity 3/128 = 0.0234375
    # urgent:  should 1000, margin 4: laxity 4/64 = 0.0625
    runs = {"request": 1e4, "error": 0.0, "at_risk": 0.0, "urgent": 0.0}
    margins = {"request": margin, "error": 4.0, "at_risk": 68.0, "urgent": 4.0}
    index = make(margins, floor=60.0, runs=runs, aging=10.0)
    index.upsert("error", 0, 900)
    index.upsert("at_risk", 0, 935)
    index.upsert("urgent", 0, 1000)
    index.upsert("request", 1000, 1000 - RUN_REQUEST_PRIORITY_S)
    assert index.peek(999) == "error"  # the request is not eligible yet
    assert index.late_count(1000) == 2
    assert drain(index, 1000) == ["request", "error", "at_risk", "urgent"]


# --- floor and margins ---


def test_floor_changes_the_choice() -> None:
    # now 0. a: margin 4, should 10; b: margin 1000, should 500.
    # floor 0:  a (10+4)/4 = 3.5,     b 1500/1000 = 1.5   -> b first
    # floor 60: a (10+4)/64 = 0.21875, b 1500/1060 = 1.415 -> a first
    margins = {"a": 4.0, "b": 1000.0}
    for floor, expected in ((0.0, ["b", "a"]), (60.0, ["a", "b"])):
        index = make(margins, floor=floor)
        index.upsert("a", 0, 10)
        index.upsert("b", 0, 500)
        assert drain(index, 0) == expected


def test_zero_margin_uses_the_floor_and_no_floor_is_not_urgent_before_the_deadline() -> None:
    margins = {"x": 0.0, "y": 4.0}
    # floor 60: x 30/60 = 0.5, y (60+4)/64 = 1 -> x first.
    index = make(margins, floor=60.0)
    index.upsert("x", 0, 30)
    index.upsert("y", 0, 60)
    assert drain(index, 0) == ["x", "y"]
    # floor 0: x has laxity inf (no margin, no floor), y (60+4)/4 = 16 -> y first,
    # although x's should_start_by is earlier.
    index = make(margins, floor=0.0)
    index.upsert("x", 0, 30)
    index.upsert("y", 0, 60)
    assert index.peek(0) == "y"
    assert index.peek(30) == "y"  # at its deadline x is not late yet
    assert index.peek(31) == "x"  # past it: late, first
    # x alone is still chosen.
    index = make(margins, floor=0.0)
    index.upsert("x", 0, 30)
    assert index.ready_count(0) == 1
    assert index.pop(0) == "x"
    assert len(index) == 0


def test_two_schedules_with_no_margin_and_no_floor_go_in_deadline_order() -> None:
    index = make({}, floor=0.0)
    index.upsert("b", 0, 70)
    index.upsert("a", 0, 40)
    index.upsert("c", 0, 50)
    assert drain(index, 0) == ["a", "c", "b"]


@pytest.mark.parametrize("bad", [-100.0, -1e-9, float("nan"), float("-inf")])
def test_negative_or_nan_margin_counts_as_zero(bad: float) -> None:
    # floor 64, now 0. n: margin bad -> 0, should 100 -> 100/64 = 1.5625.
    # z: margin 64, should 100 -> 164/128 = 1.28125 -> z first. (With margin -100 taken
    # as is, n's laxity would be (100 - 100)/(-36) = 0; with NaN, NaN.) n becomes
    # eligible first so that its bucket is looked at first.
    margins = {"n": bad, "z": 64.0}
    index = make(margins, floor=64.0)
    index.upsert("n", -10, 100)
    index.upsert("z", 0, 100)
    assert drain(index, 0) == ["z", "n"]
    # And it is still relative: n (100 - 90)/64 = 0.156 vs z (100 + 64 - 90)/128 = 0.578.
    index = make(margins, floor=64.0)
    index.upsert("n", -10, 100)
    index.upsert("z", 0, 100)
    assert drain(index, 90) == ["n", "z"]


def test_the_margin_is_read_when_the_schedule_becomes_eligible() -> None:
    # floor 0. At upsert b's margin is 1 (would be (200+1)/1 = 201); when b becomes
    # eligible (t=10) it is 1024: (200 + 1024 - 10)/1024 = 1.185 < a (100+16-10)/16.
    margins = {"a": 16.0, "b": 1.0}
    index = make(margins, floor=0.0)
    index.upsert("a", 0, 100)
    index.upsert("b", 10, 200)
    assert index.peek(0) == "a"  # b not eligible yet
    margins["b"] = 1024.0
    assert index.peek(10) == "b"
    margins["b"] = 1.0  # read once: no effect while indexed
    assert index.peek(10) == "b"


@pytest.mark.parametrize("bad", [-1.0, -1e-12, float("nan"), float("inf"), float("-inf")])
def test_invalid_floor_raises(bad: float) -> None:
    with pytest.raises(ValueError, match="laxity floor"):
        LaxityIndex(lookup({}), lookup({}), 10.0, bad)


def test_zero_floor_is_valid() -> None:
    assert LaxityIndex(lookup({}), lookup({}), 10.0, 0.0).floor_s == 0.0


# --- pop_placeable ---


def test_pop_placeable_keeps_a_refused_schedule_that_was_alone_in_its_bucket() -> None:
    # floor 0, now 0. a: margin 4 (bucket 2**2..2**3, alone), should 4 -> 2;
    # b, c: margin 1024, should 1024 and 2048 -> 2 + 1/1024... and 3 (another bucket).
    margins = {"a": 4.0, "b": 1024.0, "c": 1024.0}
    index = make(margins, floor=0.0)
    index.upsert("a", 0, 4)
    index.upsert("b", 0, 1025)
    index.upsert("c", 0, 2048)
    assert index.peek(0) == "a"
    assert index.pop_placeable(0, lambda n: n != "a") == "b"
    assert "a" in index
    assert len(index) == 2
    assert index.ready_count(0) == 2
    assert index.peek(0) == "a"
    # The bucket that held only a still works: a newcomer in it orders against a.
    margins["d"] = 4.0
    index.upsert("d", 0, 2)  # (2 + 4)/4 = 1.5 < a's 2
    assert drain(index, 0) == ["d", "a", "c"]
    assert len(index) == 0


def test_pop_placeable_refusing_everything_keeps_everything() -> None:
    runs = {"late": 5.0}
    margins = {"a": 4.0, "b": 1020.0, "late": 60.0}
    index = make(margins, runs=runs)
    index.upsert("a", 0, 100)  # (100+4)/64 = 1.625
    index.upsert("b", 0, 200)  # (200+1020)/1080 = 1.13
    index.upsert("late", 0, -5)  # past should, error_at 55: laxity 55/120 = 0.46
    index.upsert("waiting", 50, 60)  # not eligible
    for _ in range(3):
        assert index.pop_placeable(0, lambda n: False) is None
        assert sorted(index) == ["a", "b", "late", "waiting"]
        assert index.ready_count(0) == 3
    assert drain(index, 0) == ["late", "b", "a"]
    assert list(index) == ["waiting"]


def test_pop_placeable_skips_late_and_on_time_in_order() -> None:
    runs = {"l1": 1.0, "l2": 100.0}
    margins = {"a": 4.0, "b": 1020.0, "l1": 0.0, "l2": 0.0}
    index = make(margins, runs=runs)
    index.upsert("a", 0, 100)  # 1.625
    index.upsert("b", 0, 200)  # 1.13
    index.upsert("l1", 0, -10)  # late, key -10 + 10 = 0
    index.upsert("l2", 0, -20)  # late, key -20 + 1000 = 980
    seen: list[str] = []

    def only_a(name: str) -> bool:
        seen.append(name)
        return name == "a"

    assert index.pop_placeable(0, only_a) == "a"
    assert seen == ["l1", "l2", "b", "a"]
    assert sorted(index) == ["b", "l1", "l2"]
    assert index.pop_placeable(0, lambda n: n == "b") == "b"
    assert drain(index, 0) == ["l1", "l2"]


# --- bookkeeping shared with DeadlineIndex ---


def test_remove_upsert_len_contains_ready_count_and_next_wakeup() -> None:
    margins = {"a": 4.0, "b": 964.0, "c": 4.0}
    index = make(margins)
    assert len(index) == 0
    assert index.pop(0) is None
    assert index.peek(0) is None
    assert index.next_wakeup() is None
    index.upsert("a", 0, 100)
    index.upsert("b", 0, 200)
    index.upsert("c", 30, 40)
    assert len(index) == 3
    assert "a" in index
    assert "zz" not in index
    assert index.ready_count(0) == 2
    assert index.next_wakeup() == 30
    assert index.peek(0) == "b"
    # b runs: re-indexed later with new times; it is no longer eligible.
    index.upsert("b", 500, 600)
    assert len(index) == 3
    assert index.times("b") is not None
    assert index.times("b").can_start_by == 500  # type: ignore[union-attr]
    assert index.ready_count(0) == 1
    assert index.peek(0) == "a"
    assert index.next_wakeup() == 30
    # An eligible schedule upserted with a new should_start_by is judged by it.
    index.upsert("a", 0, 2000)  # (2000+4)/64 = 31.3
    index.upsert("b", 0, 200)  # 1.137 again
    assert index.peek(0) == "b"
    assert index.remove("b")
    assert not index.remove("b")
    assert "b" not in index
    assert index.peek(0) == "a"
    assert index.ready_count(0) == 1
    # c eligible at 30: (40 + 4 - 30)/64 = 0.22 < a's (2004 - 30)/64.
    assert index.ready_count(30) == 2
    assert index.next_wakeup() is None
    assert index.pop(30) == "c"
    assert index.remove("a")
    assert len(index) == 0
    assert index.ready_count(30) == 0
    assert index.pop(30) is None


def test_removing_an_eligible_top_and_the_late_one() -> None:
    runs = {"late": 1.0}
    margins = {"a": 4.0, "b": 964.0, "late": 0.0}
    index = make(margins, runs=runs)
    index.upsert("a", 0, 100)
    index.upsert("b", 0, 200)
    index.upsert("late", 0, -1)
    assert index.peek(0) == "late"
    assert index.remove("late")
    assert index.peek(0) == "b"
    assert index.remove("b")
    assert index.late_count(0) == 0
    assert drain(index, 0) == ["a"]


@pytest.mark.parametrize("seed", range(10))
def test_bookkeeping_matches_deadline_index(seed: int) -> None:
    rng = random.Random(seed)
    margins = {f"s{i}": rng.choice((0.0, 4.0, rng.uniform(0, 5000))) for i in range(30)}
    runs = {name: rng.uniform(0, 100) for name in margins}
    laxity = LaxityIndex(runs.__getitem__, margins.__getitem__, 10.0, rng.choice((0.0, 60.0)))
    plain = DeadlineIndex()
    now = 0.0
    for _ in range(400):
        op = rng.random()
        name = f"s{rng.randrange(30)}"
        if op < 0.5:
            can = now + rng.uniform(-100, 200)
            should = can + rng.uniform(-50, 500)
            laxity.upsert(name, can, should)
            plain.upsert(name, can, should)
        elif op < 0.6:
            assert laxity.remove(name) == plain.remove(name)
        elif op < 0.8:
            popped = laxity.pop(now)
            assert (popped is None) == (plain.peek(now) is None)
            if popped is not None:
                assert plain.remove(popped)
        else:
            refused = {f"s{i}" for i in range(30) if rng.random() < 0.5}
            popped = laxity.pop_placeable(now, lambda n, r=refused: n not in r)  # type: ignore[misc]
            if popped is not None:
                assert popped not in refused
                assert plain.remove(popped)
        assert len(laxity) == len(plain)
        assert set(laxity) == set(plain)
        assert laxity.ready_count(now) == plain.ready_count(now)
        assert laxity.next_wakeup() == plain.next_wakeup()
        assert name in laxity if name in plain else name not in laxity
        now += rng.uniform(0, 10)


def test_upsert_many_orders_like_upsert() -> None:
    margins = {"a": 4.0, "b": 964.0, "c": 0.0}
    entries = [("a", 0.0, 100.0), ("b", 0.0, 200.0), ("c", 0.0, 70.0), ("d", 50.0, 60.0)]
    one = make(margins)
    many = make(margins)
    for entry in entries:
        one.upsert(*entry)
    many.upsert_many(entries)
    # c: 70/60 = 1.1667, b: 1.137, a: 1.625
    assert drain(many, 0) == drain(one, 0) == ["b", "c", "a"]
    assert list(many) == ["d"]


# --- compaction ---


def test_compaction_keeps_the_order() -> None:
    # Each round re-upserts every schedule with an earlier should_start_by (so stale
    # items pile up under the live ones) and flips half of the margins between two
    # buckets; a peek each round moves them all into the buckets / the late heap.
    names = [f"s{i}" for i in range(6)]
    margins = dict.fromkeys(names, 4.0)
    runs = {name: float(i) for i, name in enumerate(names)}
    index = make(margins, floor=60.0, runs=runs, aging=3.0)
    now = 1000.0
    # Upserted once, before the churn: they must survive every compaction.
    steady = {"k1": (4.0, 10_500.0), "k2": (964.0, 10_600.0), "k3": (4.0, 20_000.0)}
    for name, (margin, should) in steady.items():
        margins[name] = margin
        index.upsert(name, 0, should)
    index.peek(now)
    rounds = 1200
    for r in range(rounds):
        for i, name in enumerate(names):
            if i % 2:
                margins[name] = 4.0 if r % 2 else 964.0
            late = i % 3 == 0
            should = (now - 1 - 7 * i - (rounds - r)) if late else (now + 10_000 - r - 13 * i)
            index.upsert(name, 0, should)
        index.peek(now)
    bucketed = sum(len(b) for b in index._buckets.values())
    assert bucketed <= 4 * len(names) + 1024 + len(names)  # compacted (else ~7000)
    assert len(index._late) <= 4 * len(names) + 1024 + len(names)
    assert len(index) == len(names) + len(steady)
    assert index.ready_count(now) == len(names) + len(steady)

    # Brute force at the final times (r = rounds - 1): margins 4 for odd i (r odd).
    def key(name: str) -> tuple[int, float]:
        if name in steady:
            margin, should = steady[name]
            return (1, (should + margin - now) / (margin + 60.0))
        i = names.index(name)
        if i % 3 == 0:
            return (0, now - 1 - 7 * i - 1 + 3.0 * i)
        should = now + 10_000 - (rounds - 1) - 13 * i
        margin = 4.0
        return (1, (should + margin - now) / (margin + 60.0))

    expected = sorted([*names, *steady], key=key)
    assert len(set(map(key, expected))) == len(expected)  # no ties
    assert drain(index, now) == expected


def test_compaction_drops_buckets_with_only_stale_items() -> None:
    margins = {"a": 4.0, "steady": 2000.0}
    index = make(margins, floor=60.0)
    index.upsert("steady", 0, 50_000)
    for r in range(3000):
        margins["a"] = 4.0 if r < 1500 else 2000.0  # moves to another bucket
        index.upsert("a", 0, 10_000 - r)
        index.peek(0)
    index.upsert("b", 0, 10**6)
    assert len(index._buckets) <= 2
    assert drain(index, 0) == ["a", "steady", "b"]


# --- properties (exact: every bucket holds a single margin + floor, a power of two) ---

FLOORS = (0, 1, 8, 64)
#: floor, aging, now, {name: (can, should)}, margins, run times, load with upsert_many
Case = tuple[int, int, int, dict[str, tuple[int, int]], dict[str, float], dict[str, float], bool]


@st.composite
def schedule_sets(draw: st.DrawFn) -> Case:
    floor = draw(st.sampled_from(FLOORS))
    aging = draw(st.integers(0, 20))
    now = draw(st.integers(0, 400))
    n = draw(st.integers(1, 14))
    times: dict[str, tuple[int, int]] = {}
    margins: dict[str, float] = {}
    runs: dict[str, float] = {}
    for i in range(n):
        name = f"s{i}"
        times[name] = (draw(st.integers(0, 500)), draw(st.integers(-300, 900)))
        scale = max(2 ** draw(st.integers(0, 14)), floor)
        margins[name] = draw(
            st.one_of(st.just(float(scale - floor)), st.sampled_from([math.nan, -3.0]))
        )
        runs[name] = float(draw(st.integers(-5, 100)))
    return floor, aging, now, times, margins, runs, draw(st.booleans())


def rank(
    name: str,
    can: int,
    should: int,
    margins: dict[str, float],
    runs: dict[str, float],
    floor: int,
    aging: int,
    now: int,
) -> tuple[int, Fraction]:
    """The brute-force primary key: those in ERROR (should + margin < now) by
    restore key, then the others (on time or at risk) by laxity."""
    del can
    margin = margins[name]
    if not (math.isfinite(margin) and margin >= 0):
        margin = 0.0
    if should + Fraction(margin) < now:
        return (0, Fraction(should) + aging * Fraction(max(runs[name], 0.0)))
    scale = Fraction(margin) + floor
    if scale == 0:
        return (2, Fraction(0))  # laxity inf: after every finite laxity
    return (1, (should + Fraction(margin) - now) / scale)


@SETTINGS
@given(schedule_sets())
def test_property_pop_order_is_the_brute_force_order(
    case: Case,
) -> None:
    floor, aging, now, times, margins, runs, bulk = case
    index = LaxityIndex(runs.__getitem__, margins.__getitem__, float(aging), float(floor))
    entries = [(name, float(can), float(should)) for name, (can, should) in times.items()]
    if bulk:
        index.upsert_many(entries)
    else:
        for entry in entries:
            index.upsert(*entry)

    def key(name: str) -> tuple[int, Fraction]:
        return rank(name, *times[name], margins, runs, floor, aging, now)

    eligible = {name for name, (can, _) in times.items() if can <= now}
    assert index.ready_count(now) == len(eligible)
    assert index.late_count(now) == sum(1 for n in eligible if key(n)[0] == 0)
    popped = drain(index, now)
    assert sorted(popped) == sorted(eligible)
    assert [key(n) for n in popped] == sorted(key(n) for n in eligible)
    assert set(index) == set(times) - eligible


OPS = st.lists(
    st.tuples(
        st.sampled_from(("upsert", "upsert", "upsert", "remove", "pop", "pop_placeable")),
        st.integers(0, 7),  # name
        st.integers(-100, 100),  # can_start_by - now
        st.integers(-100, 400),  # should_start_by - now
        st.integers(0, 40),  # time step
    ),
    max_size=80,
)


@SETTINGS
@given(
    floor=st.sampled_from(FLOORS),
    aging=st.integers(0, 20),
    exponents=st.lists(st.integers(0, 12), min_size=8, max_size=8),
    run_times=st.lists(st.integers(0, 100), min_size=8, max_size=8),
    refused=st.frozensets(st.integers(0, 7)),
    ops=OPS,
)
def test_property_interleaved_operations_never_lose_or_duplicate(
    floor: int,
    aging: int,
    exponents: list[int],
    run_times: list[int],
    refused: frozenset[int],
    ops: list[tuple[str, int, int, int, int]],
) -> None:
    names = [f"s{i}" for i in range(8)]
    margins = {n: float(max(2**e, floor) - floor) for n, e in zip(names, exponents, strict=True)}
    runs = {n: float(r) for n, r in zip(names, run_times, strict=True)}
    refused_names = {names[i] for i in refused}
    index = LaxityIndex(runs.__getitem__, margins.__getitem__, float(aging), float(floor))
    model: dict[str, tuple[int, int]] = {}
    now = 0

    def key(name: str) -> tuple[int, Fraction]:
        return rank(name, *model[name], margins, runs, floor, aging, now)

    for op, i, can_offset, should_offset, step in ops:
        name = names[i]
        if op == "upsert":
            model[name] = (now + can_offset, now + should_offset)
            index.upsert(name, float(now + can_offset), float(now + should_offset))
        elif op == "remove":
            assert index.remove(name) == (name in model)
            model.pop(name, None)
        else:
            placeable = (lambda n: n not in refused_names) if op == "pop_placeable" else None
            candidates = [
                n
                for n, (can, _) in model.items()
                if can <= now and (placeable is None or placeable(n))
            ]
            got = index.pop(now) if placeable is None else index.pop_placeable(now, placeable)
            if not candidates:
                assert got is None
            else:
                assert got in candidates
                assert key(got) == min(key(n) for n in candidates)
                del model[got]
        assert len(index) == len(model)
        assert set(index) == set(model)
        assert index.ready_count(now) == sum(1 for can, _ in model.values() if can <= now)
        now += step

    now += 10_000
    popped = drain(index, now)
    assert len(popped) == len(set(popped))
    assert set(popped) == set(model)
    assert len(index) == 0
    assert index.next_wakeup() is None
