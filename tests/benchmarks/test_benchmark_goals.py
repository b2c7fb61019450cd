"""The start-up benchmarks judge their 1M goals only from a run of 1M
schedules: from a smaller run the figures are projected, and the table says
"projected" (or "projected over"), never met."""

from __future__ import annotations

from benchmarks.common import Result, table
from benchmarks.runtime_scale import one_million_startup_goal
from benchmarks.startup import one_million_goals


def met_cell(goal: str, met: bool | None) -> str:
    """The table's "met?" cell of a result with this goal."""
    row = table([Result(name="b", n=1, median=1.0, unit="s", goal=goal, met=met)])
    return row.splitlines()[-1].rstrip(" |").rsplit("|", 1)[-1].strip()


def test_a_100k_run_projects_the_1m_goals_and_meets_none() -> None:
    (time_goal, time_met), (rss_goal, rss_met) = one_million_goals(100_000, 2.0, 400.0, 100.0)
    assert (time_met, rss_met) == (None, None)
    assert time_goal == "1M < 30 s: projected, 20 s (x10 this run)"
    assert rss_goal == "1M < 2048 MiB: projected over, 3100 MiB (x10 this run)"
    assert met_cell(time_goal, time_met) == "-"
    goal, met = one_million_startup_goal(50_000, 1.0)
    assert (goal, met) == ("< 30 s at 1M: projected, 20 s (x20 this run)", None)
    assert one_million_startup_goal(50_000, 2.0)[0].startswith("< 30 s at 1M: projected over")


def test_a_1m_run_meets_or_misses_the_goals() -> None:
    (time_goal, time_met), (rss_goal, rss_met) = one_million_goals(1_000_000, 20.0, 3000.0, 100.0)
    assert (time_goal, time_met) == ("< 30 s", True)
    assert (rss_goal, rss_met) == ("< 2048 MiB", False)
    assert (met_cell(time_goal, time_met), met_cell(rss_goal, rss_met)) == ("yes", "NO")
    assert one_million_startup_goal(1_000_000, 31.0) == ("< 30 s at 1M", False)
