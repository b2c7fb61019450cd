"""A synthetic upstream for revisit schedules: sources that change, a lister's
hints, and what the visits achieved.

Each source changes as a Poisson process of its own rate (rate 0: a dead
source, it never changes); the change times are drawn once, from time 0 to
the horizon, with the seed. A good visit (run) is *eventful* iff the source
changed after the previous good visit's start and not after this one's start
(the visit sees the source as it was when it started); it *captures* those
changes. The simulator's run end passes that to the store's rule
(:func:`~celery_dgs.store.base.stats_after`), which moves the ladder.

A *hinted* source's lister reports each change ``hint_delay_s`` after it
(the runtime API's upsert with ``last_modified``:
:meth:`~celery_dgs.sim.loop.Simulator.upstream_modified`).

Measured over the window ``[window_start, horizon]``:

* **lag** of a change in the window: the end of the good visit that captures
  it minus the change; a change not captured by the horizon counts
  ``horizon - change`` (a lower bound) and is counted as *censored*;
* **visits** started in the window (good ones), **useless** ones (not
  eventful), and those spent on dead sources;
* for a hinted change captured by a visit that started after its hint: the
  **hint wait** (visit start minus hint arrival) and the **hint lag** (visit
  end minus hint arrival);
* for a source its lister adds during the run (``listed_at``: its changes
  start then) in the window: the **new-source lag**, from its listing to the
  end of its first good visit (``horizon - listed_at`` when there is none by
  the horizon, counted as censored).
"""

from __future__ import annotations

import random
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .metrics import percentile
from .state import CALL

if TYPE_CHECKING:
    from .loop import Simulator


@dataclass(frozen=True)
class Source:
    """How one source behaves: ``rate_per_s`` changes per second (0: dead),
    whether its lister sends hints, the class it is reported under, and when
    its lister adds it (``None``: before the start)."""

    rate_per_s: float
    hinted: bool = False
    group: str = ""
    listed_at: float | None = None

    def __post_init__(self) -> None:
        if not self.rate_per_s >= 0:
            raise ValueError(f"a source's change rate must be >= 0, got {self.rate_per_s!r}")


@dataclass
class GroupTally:
    """Running totals of one group of sources (or of all of them)."""

    visits: int = 0
    useless: int = 0
    changes: int = 0
    censored: int = 0
    lags: array[float] = field(default_factory=lambda: array("d"))

    def add(self, other: GroupTally) -> None:
        self.visits += other.visits
        self.useless += other.useless
        self.changes += other.changes
        self.censored += other.censored
        self.lags.extend(other.lags)


@dataclass(frozen=True)
class GroupFigures:
    """What :meth:`Upstream.figures` reports for a group of sources."""

    sources: int
    visits: int
    useless: int
    changes: int
    censored: int
    mean_lag_s: float
    p95_lag_s: float

    @property
    def useless_fraction(self) -> float:
        return self.useless / self.visits if self.visits else 0.0


@dataclass(frozen=True)
class HintFigures:
    """Hinted changes captured by a visit that started after their hint."""

    changes: int
    mean_wait_s: float
    p95_wait_s: float
    max_wait_s: float
    mean_lag_s: float
    p95_lag_s: float
    max_lag_s: float


@dataclass(frozen=True)
class NewSourceFigures:
    """Sources listed in the window: from listing to their first good visit's end."""

    sources: int
    censored: int
    mean_lag_s: float
    p95_lag_s: float
    max_lag_s: float


@dataclass(frozen=True)
class UpstreamFigures:
    total: GroupFigures
    groups: Mapping[str, GroupFigures]
    dead_visits: int
    hints: HintFigures
    new: NewSourceFigures


class _Stream:
    __slots__ = ("captured", "changes", "dead", "group", "hinted", "listed_at", "visited")

    def __init__(
        self, changes: array[float], group: str, hinted: bool, dead: bool, listed_at: float | None
    ) -> None:
        self.changes = changes
        self.captured = 0  # changes[:captured] are captured by a good visit
        self.group = group
        self.hinted = hinted
        self.dead = dead
        self.listed_at = listed_at
        self.visited = False  # a good visit happened


def draw_changes(
    rate_per_s: float, horizon_s: float, rng: random.Random, start: float = 0.0
) -> array[float]:
    """Poisson change times in ``(start, horizon_s]`` at ``rate_per_s``."""
    out: array[float] = array("d")
    if rate_per_s <= 0:
        return out
    t = start + rng.expovariate(rate_per_s)
    while t <= horizon_s:
        out.append(t)
        t += rng.expovariate(rate_per_s)
    return out


class Upstream:
    """The sources of a revisit workload; the simulator's
    :class:`~celery_dgs.sim.state.VisitObserver`."""

    def __init__(
        self,
        sources: Mapping[str, Source],
        *,
        horizon_s: float,
        window_start: float,
        hint_delay_s: float = 0.0,
        seed: int = 0,
    ) -> None:
        if hint_delay_s < 0:
            raise ValueError(f"hint delay must be >= 0, got {hint_delay_s!r}")
        rng = random.Random(seed)
        self.horizon_s = horizon_s
        self.window_start = window_start
        self.hint_delay_s = hint_delay_s
        self._streams = {
            name: _Stream(
                draw_changes(src.rate_per_s, horizon_s, rng, src.listed_at or 0.0),
                src.group,
                src.hinted,
                src.rate_per_s == 0,
                src.listed_at,
            )
            for name, src in sources.items()
        }
        self._tallies: dict[str, GroupTally] = {}
        self._sizes: dict[str, int] = {}
        for stream in self._streams.values():
            self._tallies.setdefault(stream.group, GroupTally())
            self._sizes[stream.group] = self._sizes.get(stream.group, 0) + 1
        self.dead_visits = 0
        self.hint_waits: array[float] = array("d")
        self.hint_lags: array[float] = array("d")
        self.new_lags: array[float] = array("d")
        self.new_censored = 0
        self._sim: Simulator | None = None
        self._finished = False

    def changes(self, name: str) -> array[float]:
        """The change times of ``name``'s source."""
        return self._streams[name].changes

    def attach(self, sim: Simulator) -> None:
        """Send the hinted sources' hints to ``sim`` (before it runs)."""
        self._sim = sim
        for name, stream in self._streams.items():
            if stream.hinted and stream.changes:
                sim.schedule_event(
                    stream.changes[0] + self.hint_delay_s, CALL, self._hint, (name, 0)
                )

    def _hint(self, now: float, extra: tuple[str, int]) -> None:
        name, k = extra
        changes = self._streams[name].changes
        assert self._sim is not None
        self._sim.upstream_modified(name, changes[k], now)
        if k + 1 < len(changes):
            self._sim.schedule_event(
                changes[k + 1] + self.hint_delay_s, CALL, self._hint, (name, k + 1)
            )

    def visited(self, name: str, started: float, ended: float) -> bool:
        stream = self._streams[name]
        if not stream.visited:
            stream.visited = True
            if stream.listed_at is not None and stream.listed_at >= self.window_start:
                self.new_lags.append(ended - stream.listed_at)
        changes, first = stream.changes, stream.captured
        last = bisect_right(changes, started, first)
        stream.captured = last
        eventful = last > first
        window = self.window_start
        tally = self._tallies[stream.group]
        if started >= window:
            tally.visits += 1
            tally.useless += not eventful
            self.dead_visits += stream.dead
        if eventful:
            delay = self.hint_delay_s
            for i in range(first, last):
                change = changes[i]
                if change < window:
                    continue
                tally.changes += 1
                tally.lags.append(ended - change)
                if stream.hinted and started >= change + delay:
                    self.hint_waits.append(started - change - delay)
                    self.hint_lags.append(ended - change - delay)
        return eventful

    def finish(self) -> None:
        """Count the changes no visit captured by the horizon (censored)."""
        if self._finished:
            return
        self._finished = True
        for stream in self._streams.values():
            listed = stream.listed_at
            if not stream.visited and listed is not None and listed >= self.window_start:
                self.new_censored += 1
                self.new_lags.append(self.horizon_s - listed)
            tally = self._tallies[stream.group]
            for change in stream.changes[stream.captured :]:
                if change >= self.window_start:
                    tally.changes += 1
                    tally.censored += 1
                    tally.lags.append(self.horizon_s - change)

    def figures(self) -> UpstreamFigures:
        self.finish()
        total = GroupTally()
        for tally in self._tallies.values():
            total.add(tally)
        groups = {g: _group_figures(self._sizes[g], t) for g, t in self._tallies.items()}
        return UpstreamFigures(
            total=_group_figures(len(self._streams), total),
            groups=groups,
            dead_visits=self.dead_visits,
            hints=_hint_figures(self.hint_waits, self.hint_lags),
            new=_new_figures(self.new_lags, self.new_censored),
        )


def _mean(values: Iterable[float], count: int) -> float:
    return sum(values) / count if count else 0.0


def _group_figures(sources: int, tally: GroupTally) -> GroupFigures:
    lags = sorted(tally.lags)
    return GroupFigures(
        sources=sources,
        visits=tally.visits,
        useless=tally.useless,
        changes=tally.changes,
        censored=tally.censored,
        mean_lag_s=_mean(lags, len(lags)),
        p95_lag_s=percentile(lags, 95),
    )


def _hint_figures(waits: array[float], lags: array[float]) -> HintFigures:
    w, lg = sorted(waits), sorted(lags)
    return HintFigures(
        changes=len(w),
        mean_wait_s=_mean(w, len(w)),
        p95_wait_s=percentile(w, 95),
        max_wait_s=w[-1] if w else 0.0,
        mean_lag_s=_mean(lg, len(lg)),
        p95_lag_s=percentile(lg, 95),
        max_lag_s=lg[-1] if lg else 0.0,
    )


def _new_figures(lags: array[float], censored: int) -> NewSourceFigures:
    ordered = sorted(lags)
    return NewSourceFigures(
        sources=len(ordered),
        censored=censored,
        mean_lag_s=_mean(ordered, len(ordered)),
        p95_lag_s=percentile(ordered, 95),
        max_lag_s=ordered[-1] if ordered else 0.0,
    )
