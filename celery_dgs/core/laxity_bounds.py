"""What a full window's ends bound, bucket by bucket of margin (pure).

Helpers of the certainty rule (:mod:`~celery_dgs.core.window_certainty`):
each margin bucket in use with its margins and its slice's end
(:func:`bucket_ends`); the part of a margin bucket's margins that may fall
inside or outside a candidate's laxity bucket (:func:`inside_laxity_bucket`,
:func:`outside_laxity_bucket`); the least relative laxity a schedule not
held may have over a range of margins (:func:`least_laxity`,
:func:`least_laxity_from`); whether a key goes before a cut slice's end
(:func:`before_end`); and :class:`LaxitySummary`, what every bucket says at
once of the candidates of one laxity bucket at one moment (a round asks
about many candidates against the same ends).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from .laxity import BUCKET_WIDTH, margin_bucket_edges
from .window_buckets import WindowEnds

#: The margins of schedules whose bucket is unknown (no bucket listed): any.
ANY_MARGIN = (0.0, math.inf)


def bucket_ends(ends: WindowEnds) -> Iterator[tuple[int | None, tuple[float, float], float]]:
    """Each margin bucket in use: the slice that reads it, its margins
    (least, and above the greatest), and its slice's end (``error_at``).
    With none listed, one bucket of any margin, bounded by the should-order
    slice alone."""
    if not ends.buckets:
        yield None, ANY_MARGIN, -math.inf
        return
    for bucket, error_end in ends.buckets.items():
        yield bucket, margin_bucket_edges(bucket), error_end


def laxity_bucket_edges(top: int, outwards: bool) -> tuple[float, float]:
    """Laxity bucket ``top``'s scales (``margin + floor``), rounded outwards
    (a scale computed into the bucket is within) or inwards (one computed
    outside it is without)."""
    grow = 1e-9 if outwards else -1e-9
    return BUCKET_WIDTH**top * (1 - grow), BUCKET_WIDTH ** (top + 1) * (1 + grow)


def inside_laxity_bucket(
    lo: float, hi: float, floor: float, top: tuple[float, float]
) -> tuple[float, float] | None:
    """The margins in [``lo``, ``hi``) (a margin bucket's; ``lo == hi``: that
    margin alone) that may fall in the laxity bucket whose scales ``top``
    bounds (:func:`laxity_bucket_edges`, outwards); ``None``: none."""
    top_lo, top_hi = top
    if lo == hi:
        return (lo, hi) if top_lo <= lo + floor < top_hi else None
    shared_lo, shared_hi = max(lo, top_lo - floor), min(hi, top_hi - floor)
    return (shared_lo, shared_hi) if shared_lo < shared_hi else None


def outside_laxity_bucket(
    lo: float, hi: float, floor: float, top: tuple[float, float]
) -> list[tuple[float, float]]:
    """The ranges of margins in [``lo``, ``hi``) (``lo == hi``: that margin
    alone) that may fall outside the laxity bucket whose scales ``top``
    bounds (:func:`laxity_bucket_edges`, inwards): below it and above it."""
    top_lo, top_hi = top
    if lo == hi:
        return [] if top_lo <= lo + floor < top_hi else [(lo, hi)]
    below, above = (lo, min(hi, top_lo - floor)), (max(lo, top_hi - floor), hi)
    return [part for part in (below, above) if part[0] < part[1]]


def before_end(
    key: tuple[float, float, str], error_end: float, cut_at: tuple[float, str] | None
) -> bool:
    """Whether ``key`` goes before every key past a bucket's slice that ends
    at ``error_end`` (and, for one tied with it, after ``cut_at``)."""
    error_at, can, name = key
    if error_at != error_end:
        return error_at < error_end
    return cut_at is not None and (can, name) <= cut_at


def least_laxity(ahead: float, lo: float, hi: float, floor: float) -> float:
    """The least relative laxity of a schedule whose ``should_start_by`` is at
    least ``ahead`` seconds from now and whose margin is in [``lo``, ``hi``]:
    ``(ahead + margin) / (margin + floor)`` is monotonic in the margin, so
    the least is at an edge (an infinite margin: 1; no margin and no floor:
    never urgent before ERROR)."""
    least = math.inf
    for margin in (lo, hi):
        if margin == math.inf:
            least = min(least, 1.0)
        elif margin + floor > 0:
            least = min(least, (ahead + margin) / (margin + floor))
    return least


def least_laxity_from(ahead: float, lo: float, hi: float, floor: float) -> float:
    """The least relative laxity of a schedule whose ``error_at`` is at least
    ``ahead`` seconds from now and whose margin is in [``lo``, ``hi``)."""
    if ahead == math.inf or ahead == -math.inf:
        return ahead
    scale = (hi if ahead >= 0 else lo) + floor
    if scale <= 0:
        return math.inf if ahead >= 0 else -math.inf
    return ahead / scale


def least_past_ends(
    should_end: float, error_end: float, now: float, lo: float, hi: float, floor: float
) -> float:
    """The least relative laxity at ``now`` of a schedule not held whose
    margin is in [``lo``, ``hi``]: its ``should_start_by`` is at or after
    ``should_end`` and its ``error_at`` at or after ``error_end``, and each
    bounds it from below."""
    return max(
        least_laxity(should_end - now, lo, hi, floor),
        least_laxity_from(error_end - now, lo, hi, floor),
    )


#: How far ahead of now a :class:`LaxitySummary` is computed, seconds: it
#: holds for every moment until then (the bounds only tighten as time
#: passes), so the rounds of that second share it.
SUMMARY_SPAN_S = 1.0


@dataclass(frozen=True)
class LaxitySummary:
    """What every margin bucket's bounds say at once of a candidate not in
    ERROR in laxity bucket ``top`` at any moment up to ``until``
    (:func:`laxity_summary`): it is the fleet's pick if ``clear`` and its
    laxity is below ``least`` and its ``error_at`` below ``shared_bound``.
    Otherwise the bucket-by-bucket check decides (a tie with a slice's end,
    or which slice to read)."""

    until: float
    #: No bucket may hold a schedule not held in ERROR.
    clear: bool
    #: The least laxity of a schedule not held outside laxity bucket ``top``.
    least: float
    #: The least ``error_at`` of a schedule not held inside it, strictly.
    shared_bound: float


def laxity_summary(ends: WindowEnds, now: float, floor: float, top: int) -> LaxitySummary:
    """:class:`LaxitySummary` of ``ends`` for laxity bucket ``top``, valid at
    ``now``: the one kept in ``ends.summaries`` while it holds, else one
    computed at ``now +`` :data:`SUMMARY_SPAN_S` and kept. As time passes
    a schedule not held may only come nearer ERROR and its laxity only
    fall, so bounds computed for a later moment hold at every earlier one."""
    kept = ends.summaries.get((floor, top))
    if isinstance(kept, LaxitySummary) and now <= kept.until:
        return kept
    at = now + SUMMARY_SPAN_S
    inside, outside = laxity_bucket_edges(top, outwards=True), laxity_bucket_edges(top, False)
    clear, least, shared_bound = True, math.inf, math.inf
    for _bucket, (lo, hi), error_end in bucket_ends(ends):
        if max(error_end, ends.should + lo) < at:
            clear = False
        for part_lo, part_hi in outside_laxity_bucket(lo, hi, floor, outside):
            least = min(least, least_past_ends(ends.should, error_end, at, part_lo, part_hi, floor))
        shared = inside_laxity_bucket(lo, hi, floor, inside)
        if shared is not None:
            shared_bound = min(shared_bound, max(error_end, ends.should + max(shared[0], 0.0)))
    summary = LaxitySummary(at, clear, least, shared_bound)
    ends.summaries[(floor, top)] = summary
    return summary
