"""``python -m benchmarks.revisit --quick`` runs in seconds and prints its table and goals."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmarks import revisit


def test_quick_revisit_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "revisit.json"
    started = time.perf_counter()
    assert revisit.main(["--quick", "--json", str(out)]) == 0
    assert time.perf_counter() - started < 60
    text = capsys.readouterr().out
    assert "| 1.5d | adaptive |" in text
    assert "| 1.5d | fixed " in text
    assert "adaptive, 50 % hinted" in text
    assert "| dead | 120 |" in text
    figures = json.loads(out.read_text())
    run = figures["runs"][0]
    assert run["unit_s"] == 1.5 * 86400.0
    adaptive, fixed = run["adaptive"]["upstream"]["total"], run["fixed"]["upstream"]["total"]
    assert abs(fixed["visits"] / adaptive["visits"] - 1) <= 0.02  # the same visit budget
    assert adaptive["mean_lag_s"] * 2 <= fixed["mean_lag_s"]  # the lag goal holds here
    assert len(figures["goals"]) == 7
    assert "| groups 40/40/20 |" in text
    assert "| today's order |" in text
    assert figures["goals"][4].startswith("backlog: every new source visited")
    assert figures["goals"][4].endswith(": met")
    assert any(
        line.startswith("hinted lag") and line.endswith(": met") for line in figures["goals"]
    )
