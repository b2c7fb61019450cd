"""The eligible part of a full window of schedules (``core/window.py``): a
round with free slots and none held eligible reads on among the eligible
schedules only, brings the part up to date before each round, and knows
when the next schedule past the window becomes eligible."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.window import (
    KeptStart,
    ScheduleBounds,
    keys_of,
    next_can_of,
    slice_of,
)
from celery_dgs.core.window_part import SliceRead, WindowKey

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
S = timedelta(seconds=1)
HOUR = timedelta(hours=1)


def at(seconds: float) -> datetime:
    return T0 + seconds * S


def full_bounds() -> ScheduleBounds:
    """A window of 2 that read ``a`` and ``b`` (keys at 10 s and 20 s): full."""
    bounds = ScheduleBounds(2, HOUR)
    read = bounds.next_read(T0, 0)
    assert read is not None
    bounds.after_read(read, [(at(10), at(5), "a"), (at(20), at(5), "b")])
    assert bounds.end == (at(20), at(5), "b")
    return bounds


def test_a_round_with_no_held_eligible_reads_the_eligible_past_the_end() -> None:
    bounds = full_bounds()
    assert bounds.refresh_read(at(1)) is None, "no part yet"
    read = bounds.extension_read(at(1), 2)
    assert read == SliceRead(None, at(1), (at(20), at(5), "b"), 1, False, eligible=True)
    bounds.after_read(read, [(at(30), at(0), "c")])
    assert (bounds.part.at, bounds.part.end) == (at(1), (at(30), at(0), "c")), "cut: limit read"
    assert bounds.holds(at(0), at(30), "c", requested=False)
    assert not bounds.holds(at(2), at(25), "d", requested=False), "eligible after the part's time"
    assert not bounds.holds(at(0), at(31), "e", requested=False), "past the part's end"
    assert bounds.should_end() == (at(30), at(0), "c")
    assert bounds.end == (at(20), at(5), "b"), "the window's end stays"
    on = bounds.extension_read(at(1), 3)
    assert on == SliceRead(None, at(1), (at(30), at(0), "c"), 1, False, eligible=True)
    bounds.after_read(on, [])
    assert bounds.part.end is None, "a short read: every eligible one is held"
    assert bounds.should_end() is None
    assert bounds.holds(at(0), at(900), "z", requested=False)
    assert bounds.extension_read(at(1), 3) is None, "nothing left to read"


def test_the_part_is_brought_up_to_date_before_it_is_read_on() -> None:
    bounds = full_bounds()
    read = bounds.extension_read(at(1), 2)
    assert read is not None
    bounds.after_read(read, [(at(30), at(0), "c")])
    assert bounds.arrival_wanted() == (at(1), (at(20), at(5), "b"))
    bounds.part.arrival_read(at(4))
    assert bounds.part.wake_at() == at(4)
    assert bounds.arrival_wanted() is None
    assert bounds.refresh_read(at(3)) is None, "none becomes eligible before 4 s"
    assert bounds.part.at == at(3)
    refresh = bounds.refresh_read(at(6))
    assert refresh == SliceRead(
        at(3), at(6), (at(20), at(5), "b"), 2, False, key_until=(at(30), at(0), "c"), eligible=True
    )
    with pytest.raises(ValueError, match="refresh it"):
        bounds.extension_read(at(6), 3)
    bounds.after_read(refresh, [(at(25), at(4), "d")])
    assert bounds.part.at == at(6)
    assert bounds.part.end == (at(30), at(0), "c"), "a refresh under its limit keeps the end"
    assert bounds.arrival_wanted() == (at(6), (at(20), at(5), "b")), "asked again"
    bounds.part.arrival_read(None)
    assert bounds.part.wake_at() is None
    bounds.part.not_held(at(5))
    assert bounds.part.wake_at() is None, "at or before the part's time: not an arrival"
    bounds.part.not_held(at(9))
    assert bounds.part.wake_at() == at(9), "a row let go lowers the next arrival"
    bounds.part.not_held(at(12))
    assert bounds.part.wake_at() == at(9)


def test_a_refresh_that_fills_its_limit_cuts_the_part() -> None:
    bounds = full_bounds()
    read = bounds.extension_read(at(1), 2)
    assert read is not None
    bounds.after_read(read, [])
    assert bounds.part.end is None
    bounds.part.arrival_read(at(2))
    refresh = bounds.refresh_read(at(5))
    assert refresh is not None
    assert refresh.key_until is None, "the whole part: every key past the end"
    assert refresh.limit == 2
    bounds.after_read(refresh, [(at(22), at(2), "x"), (at(23), at(3), "y")])
    assert bounds.part.end == (at(23), at(3), "y")
    assert not bounds.holds(at(0), at(24), "z", requested=False), "let go: past the cut"


def test_the_windows_end_read_past_the_part_or_a_start_over_ends_it() -> None:
    bounds = full_bounds()
    read = bounds.extension_read(at(1), 2)
    assert read is not None
    bounds.after_read(read, [(at(30), at(0), "c")])
    further = bounds.next_read(at(1), 3, more=True)
    assert further is not None
    bounds.after_read(further, [(at(40), at(9), "d")])
    assert bounds.part.at is None, "the window's end passed the part"
    assert bounds.part.wake_at() is None
    read = bounds.extension_read(at(1), 3)
    assert read is not None
    bounds.after_read(read, [])
    assert bounds.part.at == at(1)
    restart = bounds.next_read(at(1) + HOUR, 3)
    assert restart is not None
    assert restart.restart
    bounds.after_read(restart, [(at(4000), at(3700), "a"), (at(4001), at(3700), "b")])
    assert bounds.part.at is None


def test_no_part_while_the_window_is_not_full() -> None:
    bounds = ScheduleBounds(5, HOUR)
    read = bounds.next_read(T0, 0)
    assert read is not None
    bounds.after_read(read, [(at(10), at(5), "a")])
    assert not bounds.full
    assert bounds.extension_read(at(1), 1) is None
    assert not bounds.read_eligible(at(1), lambda: 1, lambda _read: 1)


#: A fleet's kept times: each schedule's next start and its slack, in seconds.
fleet_times = st.lists(st.tuples(st.integers(0, 150), st.integers(0, 80)), min_size=1, max_size=30)


class Fleet:
    """A fleet's kept times and the window over it, loaded as beat and the
    simulator load it: each read's rows held, the held let go of once the
    bounds no longer cover them, a changed row held if the bounds cover it."""

    def __init__(self, kept: dict[str, KeptStart], size: int) -> None:
        self.kept = kept
        self.bounds = ScheduleBounds(size, timedelta(seconds=100))
        self.held: set[str] = set()

    @classmethod
    def of(cls, times: list[tuple[int, int]], size: int) -> Fleet:
        """Schedules ``s00``, ``s01``... with these next starts and slacks."""
        kept = {
            f"s{i:02d}": KeptStart(at(can), at(can + slack)) for i, (can, slack) in enumerate(times)
        }
        return cls(kept, size)

    def read(self, read: SliceRead) -> int:
        names = slice_of(read, self.kept.items())
        keys = keys_of(read, [self.kept[n] for n in names], names)
        self.bounds.after_read(read, keys)
        wanted = self.bounds.arrival_wanted()
        if wanted is not None:
            self.bounds.part.arrival_read(next_can_of(*wanted, self.kept.items()))
        self.held = set(names) if read.restart else self.held | set(names)
        self.held = {n for n in self.held if self.covers(n)}
        return len(names)

    def covers(self, name: str) -> bool:
        can, should, _, _ = self.kept[name]
        return self.bounds.holds(can, should, name, requested=False)

    def change(self, name: str, kept: KeptStart) -> None:
        self.kept[name] = kept
        if self.covers(name):
            self.held.add(name)
        else:
            self.held.discard(name)
            self.bounds.part.not_held(kept.can)

    def choose(self, now: datetime) -> list[WindowKey]:
        """A round at ``now`` with a free slot: the window reads its eligible
        part on while it holds none eligible, and its pick must be the
        fleet's. The fleet's eligible schedules, most urgent first."""
        held_eligible = self.eligible(self.held, now)
        while not held_eligible and self.bounds.read_eligible(
            now, lambda: len(self.held), self.read
        ):
            held_eligible = self.eligible(self.held, now)
        whole = self.eligible(list(self.kept), now)
        assert held_eligible[:1] == whole[:1], "the window's pick is the fleet's"
        return whole

    def eligible(self, names: set[str] | list[str], now: datetime) -> list[WindowKey]:
        out = []
        for name in names:
            can, should, _, _ = self.kept[name]
            if can is not None and should is not None and can <= now:
                out.append((should, can, name))
        return sorted(out)


@settings(max_examples=200, deadline=None)
@given(fleet_times, st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_the_windows_pick_is_the_fleets_and_past_its_end_it_holds_only_the_eligible(
    times: list[tuple[int, int]], size: int, seed: int
) -> None:
    """Rounds of one free slot over a fleet whose runs and lister changes move
    its kept times: each round's pick (the most urgent eligible schedule held,
    after reading on as beat does) is the whole fleet's; every schedule held
    past the window's end is one that was eligible; and a round that left
    its slot free wakes no later than the fleet's next eligible schedule."""
    rng = random.Random(seed)
    fleet = Fleet.of(times, size)
    now = at(0)
    for _ in range(40):
        now += rng.randint(0, 12) * S
        read = fleet.bounds.next_read(now, len(fleet.held))
        if read is not None:
            fleet.read(read)
        refresh = fleet.bounds.refresh_read(now)
        if refresh is not None:
            fleet.read(refresh)
        whole = fleet.choose(now)
        end, part_at = fleet.bounds.end, fleet.bounds.part.at
        for name in fleet.held:
            can, should, _, _ = fleet.kept[name]
            assert can is not None
            assert should is not None
            if end is not None and (should, can, name) > end:
                assert part_at is not None
                assert can <= part_at, f"{name} held past the end and not eligible"
        if whole:
            picked = whole[0][2]
            can = now + rng.randint(1, 60) * S
            fleet.change(picked, KeptStart(can, can + rng.randint(0, 80) * S))
        else:
            cans = (k.can for k in fleet.kept.values() if k.can is not None and k.can > now)
            fleet_next = min(cans, default=None)
            held_next = [fleet.kept[n].can for n in fleet.held]
            wakes = [c for c in held_next if c is not None and c > now]
            wake = fleet.bounds.part.wake_at()
            moves = fleet.bounds.moves_at()
            wakes += [w for w in (wake, moves) if w is not None]
            if fleet_next is not None:
                assert min(wakes) <= fleet_next, "the window wakes when the fleet's next is due"
        if rng.random() < 0.3:
            name = rng.choice(sorted(fleet.kept))
            can = now + rng.randint(-20, 60) * S
            fleet.change(name, KeptStart(can, can + rng.randint(0, 80) * S))


def every_eligible_up_to_the_end_is_held(fleet: Fleet, now: datetime) -> None:
    """What the certainty rule relies on: every schedule that can start at
    ``now`` with a key up to the window's should-order bound is held; and a
    known next arrival is no later than any schedule past the window's."""
    bounds = fleet.bounds
    should_end = bounds.should_end()
    for name, (can, should, _, _) in fleet.kept.items():
        if can is None or should is None or can > now:
            continue
        if should_end is None or (should, can, name) <= should_end:
            assert name in fleet.held, (name, bounds.end, bounds.part.at, bounds.part.end)
    part_at, end = bounds.part.at, bounds.end
    if part_at is None or end is None or bounds.arrival_wanted() is not None:
        return
    cans = [
        k.can
        for n, k in fleet.kept.items()
        if n not in fleet.held and k.can is not None and k.can > part_at
        if k.should is not None and (k.should, k.can, n) > end
    ]
    if cans:
        assert bounds.part.next_arrival is not None
        assert bounds.part.next_arrival <= min(cans)


@settings(max_examples=300, deadline=None)
@given(fleet_times, st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_polls_refusals_and_a_clock_that_stands_or_steps_back_keep_the_part_exact(
    times: list[tuple[int, int]], size: int, seed: int
) -> None:
    """Beside rounds of one to three picks: store polls before the part's
    refresh and inside the round, the certainty rule's should-order reads,
    start-overs as time jumps, and a wall clock that stands still or steps
    back. At each choice the window holds every eligible schedule up to
    its bound, and its pick is the fleet's."""
    rng = random.Random(seed)
    fleet = Fleet.of(times, size)

    def poll(now: datetime) -> None:
        for _ in range(rng.randint(0, 2)):
            can = now + rng.randint(-20, 60) * S
            kept = KeptStart(can, can + rng.randint(0, 80) * S)
            fleet.change(rng.choice(sorted(fleet.kept)), kept)

    now = at(0)
    for _ in range(40):
        now += rng.choice([-5, 0, 0, 1, 3, 7, 12, 40]) * S
        read = fleet.bounds.next_read(now, len(fleet.held))
        if read is not None:
            fleet.read(read)
        poll(now)
        refresh = fleet.bounds.refresh_read(now)
        if refresh is not None:
            fleet.read(refresh)
        poll(now)
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.3:  # the certainty rule refused a pick
                further = fleet.bounds.next_read(now, len(fleet.held), more=True)
                if further is not None:
                    fleet.read(further)
            whole = fleet.choose(now)
            every_eligible_up_to_the_end_is_held(fleet, now)
            if not whole:
                break
            can = now + rng.randint(1, 60) * S
            fleet.change(whole[0][2], KeptStart(can, can + rng.randint(0, 80) * S))


def test_the_picks_are_checked_again_once_the_parts_end_moves() -> None:
    """Reading on found useless at one should-order bound stops the checks
    until that bound moves: the eligible part's end moving moves it too."""
    bounds = full_bounds()
    read = bounds.extension_read(at(1), 2)
    assert read is not None
    bounds.after_read(read, [(at(30), at(0), "c")])
    assert bounds.reads_on(3)
    bounds.unchecked_end = bounds.should_end()  # what read_on_helps records
    assert not bounds.reads_on(3), "not checked at this bound"
    on = bounds.extension_read(at(1), 3)
    assert on is not None
    bounds.after_read(on, [(at(40), at(0), "d")])
    assert bounds.should_end() == (at(40), at(0), "d")
    assert bounds.reads_on(4), "the bound moved: checked again"
