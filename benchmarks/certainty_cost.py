"""The certainty rule's cost per decision: ``python -m benchmarks.certainty_cost``.

With a full window, beat asks the certainty rule
(:mod:`celery_dgs.core.window_certainty`) about each schedule its index
offers before it takes it. This times beat's default index (``restore`` with
relative laxity) as :mod:`benchmarks.decision` does (pop the most urgent
eligible schedule, put it back with new times; 90 % eligible, a tenth of
those past ``should_start_by``), each decision preceded by the rule's check
of the offered schedule against a full window's ends: a should-order end
ahead of every schedule and every margin bucket in use cut far ahead, so
the rule vouches for each one and walks every bucket (its most expensive
path). Run times of 10 s to 610 s, margins twice that: about 20 margin
buckets in use. The sizes are a window's (``dgs_schedule_window_size``,
10,000 by default in these docs) and its room with the default read-on of
10 window sizes (110,000). The rule keeps its summary of the ends for a
second (:func:`~celery_dgs.core.laxity_bounds.laxity_summary`): the
decisions of that second share it (4 slots refilled by 50 ms runs: about
60), so each size is timed with the summary kept and with one computed
for each decision (rounds more than a second apart). The baseline in the
same run is the same loop without the check. Goal: a decision <= 30 µs.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time

from celery_dgs.core.laxity import margin_bucket
from celery_dgs.core.ranking import OrderPolicy, overload_index
from celery_dgs.core.window_buckets import WindowEnds
from celery_dgs.core.window_certainty import pick_bound

from .common import gc_paused, log, median, repeat
from .decision import start_times

GOAL_US = 30.0
DECISIONS = 20_000


def decision_us(
    n: int, repeats: int, *, checked: bool, summary_each: bool = False, seed: int = 1
) -> list[float]:
    """Microseconds per decision at an index of ``n`` (medians of
    ``repeats``), with the rule's check of each offered schedule or without;
    ``summary_each``: the rule's summary of the ends computed again for each
    decision (as when rounds are more than a second apart), else kept."""
    rng = random.Random(seed)
    now = time.time()
    expected = {f"schedule-{i:07d}": 10 + rng.random() * 600 for i in range(n)}
    margin = {name: 2 * e for name, e in expected.items()}
    order = OrderPolicy()
    index = overload_index(order, expected_s=expected.__getitem__, margin_s=margin.__getitem__)
    index.upsert_many(start_times(expected, now, rng))
    index.pop(now)
    bound = pick_bound(order, expected_s=expected.__getitem__, margin_s=margin.__getitem__)
    assert bound is not None
    far = now + 10**6
    in_use = {margin_bucket(m) for m in margin.values()}
    ends = WindowEnds(far, dict.fromkeys(in_use, far), dict.fromkeys(in_use, (far, "")))
    new_times = [(now - 1, now + 3_600 + rng.random() * 86_400) for _ in range(DECISIONS)]
    gc.freeze()

    def one() -> float:
        peek, pop, upsert, times = index.peek, index.pop, index.upsert, index.times
        refusal, summaries = bound.refusal, ends.summaries
        start = time.perf_counter()
        for can, should in new_times:
            name = peek(now)
            assert name is not None
            if checked:
                if summary_each:
                    summaries.clear()
                offered = times(name)
                assert offered is not None
                assert refusal(name, offered, now, ends) is None
            pop(now)
            upsert(name, can, should)
        return (time.perf_counter() - start) / DECISIONS * 1e6

    one()
    try:
        return repeat(one, repeats)
    finally:
        gc.unfreeze()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.certainty_cost", description=__doc__
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 110_000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    lines = []
    for n in args.sizes:
        with gc_paused():
            log(f"certainty rule: index of {n:,}")
            plain = median(decision_us(n, args.repeats, checked=False))
            for summary_each, what in ((False, "kept"), (True, "computed for each")):
                checked = median(
                    decision_us(n, args.repeats, checked=True, summary_each=summary_each)
                )
                met = "met" if checked <= GOAL_US else "not met"
                lines.append(
                    f"| {n:,} | {what} | {checked:.1f} µs | {plain:.1f} µs | "
                    f"{checked / plain:.2f}x | <= {GOAL_US:.0f} µs: {met} |"
                )
    print("\nthe certainty rule's cost per decision (medians; beat's default index)")
    print(
        "| index | the rule's summary of the ends | decision with the rule "
        "| without it (same run) | ratio | goal |"
    )
    print("|---|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
