"""The certainty rule (``core/window_certainty.py``): with a full window, every
pick it vouches for is the whole fleet's, in beat's default order
(``restore`` with relative laxity) and in plain ``restore``; the picks are
made by the real dispatch planner with pools, so refused placements are
vouched for too."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from hypothesis import event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from celery_dgs.core.index import DeadlineIndex, IndexedTimes
from celery_dgs.core.laxity import margin_bucket
from celery_dgs.core.overload import make_index
from celery_dgs.core.placement import Constraints, Placement, WorkerSlots, plan_dispatches
from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.core.window import ScheduleBounds
from celery_dgs.core.window_buckets import WindowEnds
from celery_dgs.core.window_certainty import (
    PickBound,
    Refusal,
    Vouching,
    choose_reading_on,
    pick_bound,
    read_on_helps,
)

NOW = 100_000.0
#: name -> (should_start_by, margin, expected run, pool)
Fleet = dict[str, tuple[float, float, float, str]]


def index_of(fleet: Fleet, names: list[str], floor: float | None) -> DeadlineIndex:
    index = make_index(
        "restore",
        expected_s=lambda n: fleet[n][2],
        margin_s=lambda n: fleet[n][1],
        laxity_floor_s=floor,
    )
    for name in names:
        index.upsert(name, NOW - 1, fleet[name][0])  # every one eligible
    return index


def bound_of(fleet: Fleet, floor: float | None) -> PickBound:
    return PickBound(lambda n: fleet[n][2], lambda n: fleet[n][1], 10.0, floor)


def slots(free: int) -> Placement:
    """One worker consuming pool ``a`` only: schedules of ``b`` are skipped."""
    return Placement([WorkerSlots("w1", "n1", frozenset({"a"}), free)], "a")


def plans(
    fleet: Fleet, end: float, floor: float | None, picks: int
) -> tuple[list[str], list[str], Vouching]:
    """The fleet's plan, and the window's (the schedules with should <= end)
    until the rule refuses one."""
    held = [n for n, v in fleet.items() if v[0] <= end]

    def constraints_of(name: str) -> Constraints:
        return Constraints(pool=fleet[name][3])

    whole = plan_dispatches(
        index_of(fleet, list(fleet), floor), NOW, slots(picks), constraints_of, limit=picks
    )
    held_index = index_of(fleet, held, floor)
    vouching = Vouching(bound_of(fleet, floor), held_index.times, NOW, WindowEnds(end, {}))
    window = plan_dispatches(
        held_index, NOW, slots(picks), constraints_of, limit=picks, vouch=vouching
    )
    return [n for n, _ in whole], [n for n, _ in window], vouching


def fleet_of(rows: list[tuple[float, float, float, str]]) -> Fleet:
    return {f"s{i:03d}": row for i, row in enumerate(rows)}


def test_a_pick_well_inside_the_window_is_vouched_for() -> None:
    # s000: laxity (100 + 50 - 100) / (50 + 60) = 0.45, far below the end
    fleet = fleet_of([(NOW + 50, 100, 30, "a"), (NOW + 400, 100, 30, "a"), (NOW + 900, 10, 1, "a")])
    whole, window, vouching = plans(fleet, NOW + 400, 60.0, 1)
    assert window == whole == ["s000"]
    assert vouching.refused is None


def test_a_candidate_an_unheld_schedule_could_beat_is_refused() -> None:
    # held s000: laxity (6000 - 0) / (3000 + 60) = 1.96, above 1: a schedule past
    # the end with a longer margin may have a lower one (s001: 7010 / 4060 = 1.73)
    fleet = fleet_of([(NOW + 3000, 3000, 600, "a"), (NOW + 3010, 4000, 1, "a")])
    whole, window, vouching = plans(fleet, NOW + 3000, 60.0, 1)
    assert whole == ["s001"]
    assert window == []
    assert vouching.refused == "s000"
    # held too, s001 is still refused: above 1, any schedule past the end may beat it
    assert plans(fleet, NOW + 3010, 60.0, 1)[1] == []


def test_a_late_pick_needs_its_late_key_below_the_end() -> None:
    # both in ERROR; late keys (should + 10 x expected): s000 NOW + 500, s001 NOW - 390
    fleet = fleet_of([(NOW - 500, 10, 100, "a"), (NOW - 400, 10, 1, "a")])
    # an unheld schedule's should (and late key) may be NOW - 400, below NOW - 390
    assert plans(fleet, NOW - 400, 60.0, 1)[1] == []
    fleet["s002"] = (NOW - 300, 10, 1, "a")
    whole, window, _ = plans(fleet, NOW - 300, 60.0, 1)
    assert window == whole == ["s001"]


def test_without_a_window_end_every_pick_is_vouched_for() -> None:
    fleet = fleet_of([(NOW + 3000, 3000, 600, "a")])
    times = index_of(fleet, list(fleet), 60.0).times("s000")
    assert times is not None
    assert bound_of(fleet, 60.0).vouches("s000", times, NOW, None)


def test_the_rule_is_for_restore_only() -> None:
    def zero(_name: str) -> float:
        return 0.0

    assert pick_bound(OrderPolicy(), expected_s=zero, margin_s=zero) is not None
    assert pick_bound(OrderPolicy(overload="greedy"), expected_s=zero, margin_s=zero) is None
    assert pick_bound(OrderPolicy(overload="shed"), expected_s=zero, margin_s=zero) is None
    fewest = OrderPolicy(goal="fewest_errors")
    assert pick_bound(fewest, expected_s=zero, margin_s=zero) is None


rows = st.tuples(
    st.floats(min_value=NOW - 4000, max_value=NOW + 8000),
    st.one_of(st.just(0.0), st.floats(min_value=0.5, max_value=5000)),
    st.floats(min_value=0.0, max_value=900),
    st.sampled_from(["a", "a", "b"]),
)


@hsettings(max_examples=400, deadline=None)
@given(
    rows=st.lists(rows, min_size=2, max_size=40),
    cut=st.integers(min_value=1, max_value=39),
    floor=st.sampled_from([60.0, 5.0, 0.0, None]),
    picks=st.integers(min_value=1, max_value=6),
)
def test_every_pick_vouched_for_is_the_whole_fleets(
    rows: list[tuple[float, float, float, str]],
    cut: int,
    floor: float | None,
    picks: int,
) -> None:
    fleet = fleet_of(rows)
    shoulds = sorted(v[0] for v in fleet.values())
    end = shoulds[min(cut, len(shoulds)) - 1]
    whole, window, vouching = plans(fleet, end, floor, picks)
    assert window == whole[: len(window)]
    event("refused" if vouching.refused is not None else "every pick vouched for")
    event(f"{min(len(window), 2)}+ picks vouched for")


def test_reading_on_stops_where_it_cannot_help() -> None:
    at = datetime.fromtimestamp(NOW, tz=timezone.utc)
    bounds = ScheduleBounds(2, timedelta(hours=1), 3.0)
    read = bounds.next_read(at, 0)
    assert read is not None
    bounds.after_read(read, [(at, at, "a"), (at, at, "b")])
    assert bounds.reads_on(2)
    fleet = fleet_of([(NOW + 50, 100, 30, "a")])
    bound = bound_of(fleet, 60.0)
    times = IndexedTimes(NOW - 1, NOW + 50)
    # laxity 150 / 160 < 1: certain once the end is 60 s ahead or more
    assert read_on_helps(bounds, bound, "s000", times, NOW, WindowEnds(NOW + 400, {}))
    assert read_on_helps(bounds, bound, "s000", times, NOW, None), "the rest fits: certain"
    assert bounds.reads_on(2)
    # the reachable end is in the past (a backlog): reading on cannot help
    assert not read_on_helps(bounds, bound, "s000", times, NOW, WindowEnds(NOW - 100, {}))
    assert bounds.unchecked_end == bounds.end
    assert not bounds.reads_on(2), "no check until the end moves"
    read = bounds.next_read(at, 0, more=True)
    assert read is not None
    bounds.after_read(read, [(at + timedelta(seconds=1), at, "c")] * read.limit)
    assert bounds.reads_on(3)


def test_a_round_reads_on_the_refused_slice_until_the_window_holds_the_rest() -> None:
    refusals: list[Refusal | None] = [Refusal("far", 7), None]  # refused once, then the pick goes
    reads = [True, False]
    slices: list[int | None] = []

    def choose(done: int) -> list[str]:
        return [] if refusals[0] is not None and done == 0 else [f"pick{done}"]

    def refusal() -> Refusal | None:
        return refusals.pop(0) if refusals else None

    def read_further(bucket: int | None) -> bool:
        slices.append(bucket)
        return reads.pop(0)

    chosen = choose_reading_on(
        choose, lambda done: done < 1, refusal, read_further, lambda: False, lambda _: True
    )
    assert chosen == ["pick0"]
    assert reads == [False], "one read on, then the pick"
    assert slices == [7], "the read is of the refused bucket's slice"


def test_a_refusal_reading_on_cannot_help_gives_an_unchecked_choice() -> None:
    calls: list[str] = []

    def choose(done: int) -> list[str]:
        calls.append(f"choose {done}")
        return [] if done == 0 and len(calls) == 1 else ["held pick"]

    def read_further(_bucket: int | None) -> bool:
        calls.append("read")
        return True

    state: dict[str, Refusal | None] = {"refusal": Refusal("far", None)}

    def refusal() -> Refusal | None:
        refused, state["refusal"] = state["refusal"], None
        return refused

    chosen = choose_reading_on(
        choose, lambda done: done < 1, refusal, read_further, lambda: True, lambda _name: False
    )
    assert chosen == ["held pick"]
    assert "read" not in calls, "no read when reading on cannot make the pick certain"


#: Rows crowded into three margin buckets (about 87 s to 169 s), due around
#: now: where a bucket's bounds are tight.
close_rows = st.tuples(
    st.floats(min_value=NOW - 400, max_value=NOW + 400),
    st.floats(min_value=1.25**20, max_value=1.25**23 * 0.999),
    st.floats(min_value=0.0, max_value=60),
    st.sampled_from(["a", "a", "b"]),
)


#: Rows that share their ``error_at`` with many others, as a fleet
#: registered at once does: their order is their names'. Some share their
#: ``should_start_by`` and margin too; others tie with a different pair in
#: the same margin bucket (now - 50 + 100 = now - 40 + 90), so the
#: should-order slice and a bucket's slice hold them in different orders.
tied_rows = st.tuples(
    st.sampled_from([NOW - 50, NOW - 40, NOW + 700]),
    st.sampled_from([0.0, 90.0, 100.0, 300.0]),
    st.floats(min_value=0.0, max_value=60),
    st.sampled_from(["a", "a", "b"]),
)


@hsettings(max_examples=3000, deadline=None)
@given(
    rows=st.lists(rows, min_size=2, max_size=40)
    | st.lists(close_rows, min_size=2, max_size=40)
    | st.lists(tied_rows, min_size=2, max_size=40),
    cut=st.integers(min_value=1, max_value=39),
    bucket_cuts=st.lists(st.integers(min_value=-1, max_value=12), min_size=60, max_size=60),
    floor=st.sampled_from([60.0, 5.0, 0.0]),
    picks=st.integers(min_value=1, max_value=6),
)
def test_every_pick_vouched_for_with_margin_bucket_slices_is_the_whole_fleets(
    rows: list[tuple[float, float, float, str]],
    cut: int,
    bucket_cuts: list[int],
    floor: float,
    picks: int,
) -> None:
    """A full window holding its should-order slice and, per margin bucket,
    a slice by ``error_at`` then name (unread, cut after ``k`` rows, or
    complete): every pick the rule vouches for is the whole fleet's."""
    whole, window, vouching = bucket_plans(fleet_of(rows), cut, bucket_cuts, floor, picks)
    assert window == whole[: len(window)]
    event("refused" if vouching.refused is not None else "every pick vouched for")
    event(f"{min(len(window), 2)}+ picks vouched for")


def bucket_plans(
    fleet: Fleet, cut: int, bucket_cuts: list[int], floor: float, picks: int
) -> tuple[list[str], list[str], Vouching]:
    """The fleet's plan, and that of a window holding the ``cut`` first by
    ``should_start_by`` and, per margin bucket in turn, the first
    ``bucket_cuts[i]`` by ``error_at`` (-1: unread; past its size: complete)."""
    by_should = sorted(fleet, key=lambda n: (fleet[n][0], n))
    held = set(by_should[: min(cut, len(by_should))])
    should_end = fleet[by_should[min(cut, len(by_should)) - 1]][0]
    in_bucket: dict[int, list[str]] = {}
    for name, (_, margin, _, _) in fleet.items():
        in_bucket.setdefault(margin_bucket(margin), []).append(name)
    buckets: dict[int, float] = {}
    cut_at: dict[int, tuple[float, str]] = {}
    for i, (bucket, names) in enumerate(sorted(in_bucket.items())):
        names.sort(key=lambda n: (fleet[n][0] + fleet[n][1], n))
        k = bucket_cuts[i % len(bucket_cuts)]
        if k >= len(names):
            buckets[bucket] = math.inf  # complete
            held.update(names)
        elif k > 0:
            last = names[k - 1]
            buckets[bucket] = fleet[last][0] + fleet[last][1]
            cut_at[bucket] = (NOW - 1, last)  # every one's next start: index_of's
            held.update(names[:k])
        else:
            buckets[bucket] = -math.inf  # unread, or read and nothing held yet
    ends = WindowEnds(should_end, buckets, cut_at)

    def constraints_of(name: str) -> Constraints:
        return Constraints(pool=fleet[name][3])

    whole = plan_dispatches(
        index_of(fleet, list(fleet), floor), NOW, slots(picks), constraints_of, limit=picks
    )
    held_index = index_of(fleet, sorted(held), floor)
    vouching = Vouching(bound_of(fleet, floor), held_index.times, NOW, ends)
    window = plan_dispatches(
        held_index, NOW, slots(picks), constraints_of, limit=picks, vouch=vouching
    )
    return [n for n, _ in whole], [n for n, _ in window], vouching


def test_a_bucket_end_bounds_laxity_by_the_buckets_greatest_margin() -> None:
    """``x``, not held past its bucket's end (``error_at`` now + 100.5, margin
    135 s), has a laxity of 100.5 / 195 = 0.515; held ``y`` of the same margin
    bucket (now + 100, 109 s) has 100 / 169 = 0.592, below the bucket's end
    (``w``, now + 100.2) over its least margin plus the floor, 0.595."""
    fleet = {
        "z": (NOW - 100, 900.0, 0.0, "a"),  # the should-order slice's end
        "y": (NOW - 9, 109.0, 0.0, "a"),
        "w": (NOW - 9, 109.2, 0.0, "a"),
        "x": (NOW - 34.5, 135.0, 0.0, "a"),
    }
    whole, window, vouching = bucket_plans(fleet, 1, [2, 9], 60.0, 1)
    assert whole == ["x"]
    assert window == []
    assert vouching.refused == "y"


def test_a_bucket_end_bounds_a_late_key_by_the_buckets_greatest_margin() -> None:
    """Both in ERROR: ``x`` not held (``error_at`` now - 199, margin 135 s:
    late key now - 334) goes before held ``y`` (now - 200, 109 s: now - 309);
    the bucket's end less its least margin would vouch for ``y``."""
    fleet = {
        "z": (NOW - 600, 900.0, 0.0, "a"),
        "y": (NOW - 309, 109.0, 0.0, "a"),
        "x": (NOW - 334, 135.0, 0.0, "a"),
    }
    whole, window, vouching = bucket_plans(fleet, 1, [1, 9], 60.0, 1)
    assert whole == ["x"]
    assert window == []
    assert vouching.refused == "y"


def test_a_tie_with_a_buckets_end_is_broken_by_next_start_and_name() -> None:
    """All three enter ERROR at now + 50, in one margin bucket (90 s and
    100 s) and one laxity bucket: the fleet takes them by name. The window
    holds ``c`` (the should-order slice's first) and ``a`` (its bucket's
    slice, cut after one): ``a``, the slice's end itself, goes first; ``c``
    is refused, since ``b`` (not held, tied) goes before it."""
    fleet = {
        "a": (NOW - 40, 90.0, 0.0, "a"),
        "b": (NOW - 40, 90.0, 0.0, "a"),
        "c": (NOW - 50, 100.0, 0.0, "a"),
    }
    whole, window, vouching = bucket_plans(fleet, 1, [1], 60.0, 3)
    assert whole == ["a", "b", "c"]
    assert window == ["a"], "the end's own key goes: every one past it is greater"
    assert vouching.refused == "c"


def test_a_fleet_registered_at_once_is_taken_in_its_buckets_slice() -> None:
    """A thousand schedules that never ran share one ``error_at``: the
    window holding its bucket's slice's first ten takes them, as the fleet
    does, by name."""
    fleet = {f"s{i:04d}": (NOW + 30, 0.0, 1.0, "a") for i in range(1000)}
    whole, window, vouching = bucket_plans(fleet, 10, [10], 60.0, 6)
    assert window == whole == [f"s{i:04d}" for i in range(6)]
    assert vouching.refused is None
