"""The quality benchmark's priority part (``benchmarks.quality``): its scenarios,
the onset one included, run and its goal lines report each of them."""

from __future__ import annotations

import pytest

from benchmarks import quality


def test_the_priority_scenarios_run_and_report_their_goals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quality, "PRIORITY_POLICIES", ("dgs-noprio", "dgs"))
    rows = quality.run_priorities(True, [1])
    assert {label for label, _, _ in rows} == {label for label, *_ in quality.PRIORITY_LOADS}
    onset = {r.policy: r for label, _, r in rows if label == "prio onset"}
    # half the workers die: the top class keeps a small part of the ERROR (32 k
    # ERROR-s on seed 1 against 2.5 M and 2.8 M for the classes below it)
    by_class = {c: v["error_s"] for c, v in onset["dgs"].by_class.items()}
    assert by_class[20] < 60_000, by_class
    assert by_class[20] < 0.02 * min(by_class[50], by_class[80]), by_class
    lines = quality.priority_goals(rows)
    [line] = [x for x in lines if x.startswith("seed 1 prio onset:")]
    assert "dgs top class (p20) ERROR-s" in line
    assert any(
        x.startswith("seed 1 prio mixed 0.9:") and "dispatches the classes chose" in x
        for x in lines
    )
