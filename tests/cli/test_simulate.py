"""``celery dgs simulate`` and ``python -m celery_dgs.sim``: declared schedules,
workload files, generated workloads, --find-slots, --json, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from celery_dgs.cli.simulate import simulate
from tests.cli.conftest import World
from tests.cli.test_declare import declare

TWO = {
    "seed": 3,
    "horizon": 1000,
    "warmup": 0,
    "warm_start": False,
    "slots": 1,
    "schedules": [
        {"task": "a", "period": 100, "cooldown_duration": 20, "duration": 30, "duration_sigma": 0},
        {"task": "b", "period": 100, "cooldown_duration": 20, "duration": 30, "duration_sigma": 0},
    ],
}


def write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_workload_file_json_matches_the_hand_computed_case(tmp_path: Path) -> None:
    result = CliRunner().invoke(simulate, ["--workload", write(tmp_path, TWO), "--json"])
    assert result.exit_code == 0, result.output
    by_policy = {r["policy"]: r for r in json.loads(result.stdout)}
    assert set(by_policy) == {"dgs", "fifo", "beat"}
    assert by_policy["dgs"]["error_s"] == 0
    assert by_policy["beat"]["error_s"] == 570.0  # tests/sim/test_small_cases.py


def test_find_slots_on_a_generated_workload(tmp_path: Path) -> None:
    # 40 schedules, demand 0.9 * 4 = 3.6 slots, lognormal run times: the answer is
    # at or above the demand, and its run has no ERROR.
    result = CliRunner().invoke(
        simulate,
        [
            "--schedules",
            "40",
            "--slots",
            "4",
            "--load",
            "0.9",
            "--horizon",
            "2d",
            "--period-min",
            "1h",
            "--period-max",
            "2h",
            "--find-slots",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["slots"] >= 4
    assert doc["result"]["error_s"] == 0
    assert doc["tried"][str(doc["slots"])] == 0
    assert all(err > 0 for s, err in doc["tried"].items() if int(s) < doc["slots"])


def test_bad_workload_names_the_schedule_and_field(tmp_path: Path) -> None:
    bad = {**TWO, "schedules": [{"task": "a", "period": 100, "duration": -1}]}
    result = CliRunner().invoke(simulate, ["--workload", write(tmp_path, bad)])
    assert result.exit_code == 2
    assert "schedule a (schedules[0]), field 'duration'" in result.output
    bad = {
        **TWO,
        "schedules": [{"task": "a", "period": 100, "cooldown_duration": 200, "duration": 1}],
    }
    result = CliRunner().invoke(simulate, ["--workload", write(tmp_path, bad)])
    assert result.exit_code == 2
    assert "cooldown_duration" in result.output


def test_declared_schedules_through_celery_dgs(world: World) -> None:
    declare(
        world.app,
        {"t.a": {"kind": "periodic", "period": 3600}, "t.b": {"kind": "periodic", "period": 600}},
    )
    # 1-minute runs: with 2-minute ones (a fifth of t.b's period, sigma 0.3) a
    # long run now and then leaves t.b in ERROR for seconds, by seed.
    result = world.invoke(
        "simulate",
        "--slots",
        "1",
        "--duration",
        "1m",
        "--horizon",
        "1d",
        "--policy",
        "dgs",
        "--policy",
        "beat",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("2 schedules, 1 slot, load 0.12")
    assert [line.split()[0] for line in lines[2:4]] == ["dgs", "beat"]
    assert all(line.startswith("wasted: ") for line in lines[4:]), "then the legend alone"


def test_python_m_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "celery_dgs.sim",
            "--workload",
            write(tmp_path, TWO),
            "--policy",
            "dgs",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("2 schedules, 1 slot, load 0.60")


def test_slots_override_keeps_the_schedules_pools(tmp_path: Path) -> None:
    # --slots replaces the workers; they must still consume the pool "slow",
    # or the schedule of that pool would never run (ERROR from its deadline on).
    doc = {
        **TWO,
        "schedules": [
            {**TWO["schedules"][0], "pool": "slow"},
            TWO["schedules"][1],  # type: ignore[index]
        ],
    }
    result = CliRunner().invoke(
        simulate, ["--workload", write(tmp_path, doc), "--slots", "2", "--policy", "dgs", "--json"]
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["slots"] == 2
    assert row["error_s"] == 0
    assert row["runs"] > 20


def test_share_spread_generates_mixed_shares_and_rejects_a_spread_below_one() -> None:
    # The same 60 schedules and total demand; with --share-spread 4 the run time /
    # period ratios differ (16-fold range), so the policies see another workload.
    common = [
        "--schedules",
        "60",
        "--slots",
        "3",
        "--load",
        "1.2",
        "--horizon",
        "2d",
        "--policy",
        "dgs",
        "--policy",
        "beat",
        "--json",
        "--seed",
        "3",
    ]
    equal = CliRunner().invoke(simulate, common)
    mixed = CliRunner().invoke(simulate, [*common, "--share-spread", "4"])
    assert equal.exit_code == mixed.exit_code == 1, (equal.output, mixed.output)  # ERROR: load 1.2
    by_equal = {r["policy"]: r for r in json.loads(equal.stdout)}
    by_mixed = {r["policy"]: r for r in json.loads(mixed.stdout)}
    assert by_equal["dgs"]["load"] == by_mixed["dgs"]["load"] == 1.2
    assert by_mixed["dgs"]["error_s"] < by_mixed["beat"]["error_s"]
    assert by_mixed["beat"]["error_s"] != by_equal["beat"]["error_s"]
    bad = CliRunner().invoke(simulate, [*common, "--share-spread", "0.5"])
    assert bad.exit_code == 2
    assert "share spread must be >= 1" in bad.output


def test_out_of_range_generator_options_are_usage_errors() -> None:
    """A probability above 1, or a fleet size no machine holds, is refused at
    once (exit 2, naming the option) instead of simulated or allocated."""
    for args, option in (
        (["--schedules", "10", "--failure-rate", "2"], "--failure-rate"),
        (["--schedules", str(10**23), "--slots", "4"], "--schedules"),
        (["--schedules", "10", "--slots", "0"], "--slots"),
        # A warm-up as long as the run measures nothing (it passed with 0 runs).
        (["--schedules", "10", "--slots", "2", "--horizon", "7d", "--warmup", "8d"], "--warmup"),
        (["--schedules", "10", "--slots", "2", "--horizon", "2h", "--warmup", "2h"], "--warmup"),
    ):
        result = CliRunner().invoke(simulate, args)
        assert result.exit_code == 2, (args, result.output)
        assert option in result.output


def test_find_slots_says_what_its_first_run_is_before_it_runs() -> None:
    args = ["--schedules", "12", "--slots", "2", "--load", "0.5", "--horizon", "1d"]
    result = CliRunner().invoke(simulate, [*args, "--period-min", "1h", "--find-slots"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "  first a run with 8 slots (4 x the demand: what no slot count can serve is in "
        "ERROR there), then the counts from the demand up:"
    )
    assert lines[1] == "       8 4 x the demand: ERROR 0 s"


def test_an_answer_well_above_the_demand_says_why() -> None:
    from celery_dgs.cli.simulate_search import bunching_note

    assert bunching_note(3, 2.4) is None
    assert bunching_note(1, 0.2) is None
    note = bunching_note(266, 125.0)
    assert note is not None
    assert note.startswith("(266 slots against a demand of 125: the demand is the slots busy")


def test_a_workload_with_several_bad_schedules_names_each_once(tmp_path: Path) -> None:
    bad = {
        **TWO,
        "schedules": [
            {"task": "x.a", "period": 100, "duration": 1, "tz": "Mars/Olympus"},
            {"task": "x.b", "period": 100, "duration": 1},
            {"task": "x.c", "period": 100, "duration": -1},
        ],
    }
    result = CliRunner().invoke(simulate, ["--workload", write(tmp_path, bad)])
    assert result.exit_code == 2
    assert "schedule x.a (schedules[0]), field 'tz': " in result.output
    assert "schedule 'x.a'" not in result.output  # named once
    assert "schedule x.c (schedules[2]), field 'duration'" in result.output
    assert "x.b" not in result.output
