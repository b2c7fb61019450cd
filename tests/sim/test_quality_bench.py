"""The quality benchmark's realistic mix and its cause table and goals, on a
tiny fleet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import quality
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.metrics import CAUSES


def test_realistic_mix_keeps_periods_and_means_and_draws_the_rest() -> None:
    plain = generate(GeneratorOptions(schedules=2000, slots=20, slots_per_worker=5, seed=3))
    mixed = quality.realistic(plain, 3)
    assert [s.spec.scheduling_period for s in mixed.schedules] == [
        s.spec.scheduling_period for s in plain.schedules
    ]
    assert [s.duration_s for s in mixed.schedules] == [s.duration_s for s in plain.schedules]
    assert all(0.1 <= s.duration_sigma <= 1.0 for s in mixed.schedules)
    n = len(mixed.schedules)
    flaky = sum(s.failure_rate == quality.FLAKY_FAILURE_RATE for s in mixed.schedules)
    blackouts = sum(bool(s.spec.blackout_periods) for s in mixed.schedules)
    kept_off = [s.spec.dont_run_on_nodes for s in mixed.schedules if s.spec.dont_run_on_nodes]
    assert 0.03 < flaky / n < 0.07
    assert 0.03 < blackouts / n < 0.07
    assert 0.07 < len(kept_off) / n < 0.13
    assert all(
        len(nodes) == 1 and next(iter(nodes)) in {"w0", "w1", "w2", "w3"} for nodes in kept_off
    )


def test_a_tiny_realistic_run_prints_causes_ratios_and_goals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q.json"
    assert (
        quality.main(
            [
                "--schedules",
                "30",
                "--slots",
                "2",
                "--slots-per-worker",
                "1",
                "--seeds",
                "1",
                "--mix",
                "realistic",
                "--policies",
                "dgs,dgs-shed",
                "--no-priorities",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "ERROR by cause" in text
    assert "seed 1 mixed 1.5 dgs-shed:" in text  # the goals, per seed
    assert "after the outage (goal <= 1.2 x backlog" in text
    rows = json.loads(out.read_text())["rows"]
    assert {r["policy"] for r in rows} == {"dgs", "dgs-shed", "beat"}
    assert "the variance-aware bound" in text  # beside each ratio goal
    for r in rows:
        assert r["variance_bound_s"] >= r["error_bound_s"]
        assert set(r["error_by_cause"]) == set(CAUSES)
        assert sum(r["error_by_cause"].values()) == pytest.approx(r["error_s"])
        assert r["max_staleness_without_failures"] <= r["max_staleness"]


def test_seed_000s_example_fleet_is_weekly_12_hour_jobs_beside_hourly_1_minute_ones() -> None:
    workload = generate(quality.seed000_options(20, 1, 10))
    short = [s for s in workload.schedules if s.spec.task == "sim.job"]
    long = [s for s in workload.schedules if s.spec.task == "sim.long"]
    assert (len(short), len(long)) == (908, 37)
    assert {s.spec.scheduling_period.total_seconds() for s in short} == {3600.0}
    assert all(s.duration_s == pytest.approx(60.0, rel=0.01) for s in short)
    assert all(s.duration_s == pytest.approx(12 * 3600.0, rel=0.01) for s in long)
    assert all(
        s.spec.scheduling_period.total_seconds() == pytest.approx(7 * 86400.0, rel=0.05)
        for s in long
    )
    demand = sum(
        s.duration_s / s.spec.scheduling_period.total_seconds() for s in workload.schedules
    )
    assert demand == pytest.approx(quality.SEED000_LOAD * 20, rel=0.01)
    assert quality.SEED000_LABEL in {s.label for s in quality.scenarios(True)}
