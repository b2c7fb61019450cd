"""``dgs``'s order settings in ``celery dgs simulate`` and ``python -m
celery_dgs.sim``: both list them, both run the look-ahead and another
overload policy, and the result is the simulator's under those settings;
``celery dgs simulate`` starts from the app's ``dgs_*`` settings."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from celery_dgs.cli.simulate import simulate
from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.sim.loop import simulate as run_sim
from celery_dgs.sim.workload import load_workload
from tests.cli.conftest import World

ORDER_OPTIONS = (
    "--overload-policy",
    "--shed-horizon",
    "--restore-aging",
    "--laxity-floor",
    "--elevator-interval",
    "--lookahead / --no-lookahead",
)


def long_and_short(tmp_path: Path) -> Path:
    """40 short jobs (runs of a tenth of their 5-20 minute period) and four
    6-hour daily jobs on 6 slots, load 0.83: the look-ahead holds long runs
    back for the short ones (261 k ERROR-s without it, 41 k with it)."""
    rng = random.Random(1)
    schedules: list[dict[str, Any]] = []
    for i in range(40):
        period = rng.choice((300, 600, 900, 1200))
        schedules.append(
            {
                "task": "s",
                "configuration": f"s{i}",
                "period": period,
                "cooldown_duration": int(period * 0.8),
                "duration": period * 0.1,
                "duration_sigma": 0,
            }
        )
    for i in range(4):
        schedules.append(
            {
                "task": "l",
                "configuration": f"l{i}",
                "period": 86400,
                "cooldown_duration": 43200,
                "default_cooldown": True,
                "duration": 6 * 3600,
                "duration_sigma": 0,
            }
        )
    path = tmp_path / "long_and_short.json"
    doc = {"seed": 1, "horizon": 86400, "warmup": 21600, "slots": 6, "schedules": schedules}
    path.write_text(json.dumps(doc))
    return path


#: An overloaded fleet of mixed shares, where the overload policies differ.
OVERLOADED = (
    *("--schedules", "60", "--slots", "3", "--load", "1.5", "--share-spread", "4"),
    *("--horizon", "2d", "--seed", "3", "--policy", "dgs"),
)


def python_m(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "celery_dgs.sim", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dgs_row(stdout: str) -> dict[str, Any]:
    [row] = [r for r in json.loads(stdout) if r["policy"] == "dgs"]
    return row


def test_help_lists_the_order_settings(world: World) -> None:
    for text in (
        python_m("--help").stdout,
        CliRunner().invoke(simulate, ["--help"]).stdout,
        world.invoke("simulate", "--help").stdout,
    ):
        for option in ORDER_OPTIONS:
            assert option in text
        assert '"off"' in text


def test_python_m_runs_the_lookahead(tmp_path: Path) -> None:
    path = long_and_short(tmp_path)
    rows = {}
    for flag in ("--no-lookahead", "--lookahead"):
        proc = python_m("--workload", str(path), "--policy", "dgs", "--json", flag)
        assert proc.returncode in (0, 1), proc.stderr
        rows[flag] = dgs_row(proc.stdout)
    held = rows["--lookahead"]
    assert held["order"] == asdict(OrderPolicy(lookahead=True))
    expected = run_sim(load_workload(path), "dgs", order=OrderPolicy(lookahead=True))
    assert held["error_s"] == expected.error_s
    assert held["runs"] == expected.runs
    assert held["error_s"] < rows["--no-lookahead"]["error_s"] / 2
    table = python_m("--workload", str(path), "--policy", "dgs", "--lookahead")
    assert table.stdout.splitlines()[0].endswith(", look-ahead on"), table.stdout


def test_python_m_runs_another_overload_policy() -> None:
    default = python_m(*OVERLOADED, "--json")
    shed = python_m(*OVERLOADED, "--json", "--overload-policy", "shed", "--shed-horizon", "5m")
    assert default.returncode == shed.returncode == 1, shed.stderr  # ERROR: load 1.5
    row = dgs_row(shed.stdout)
    order = OrderPolicy(overload="shed", shed_horizon_s=300.0)
    assert row["order"] == asdict(order)
    assert dgs_row(default.stdout)["order"] == asdict(OrderPolicy())
    assert row["error_s"] != dgs_row(default.stdout)["error_s"]
    text = python_m(*OVERLOADED, "--overload-policy", "shed", "--elevator-interval", "off").stdout
    assert "dgs order: overload shed, shed horizon 600 s," in text
    assert ", elevator off, look-ahead on" in text  # the default


def test_celery_dgs_simulate_starts_from_the_apps_settings(world: World) -> None:
    world.app.conf.dgs_overload_policy = "shed"
    world.app.conf.dgs_elevator_interval = 600
    result = world.invoke("simulate", *OVERLOADED, "--json")
    assert result.exit_code == 1, result.output
    shed = dgs_row(result.stdout)
    assert shed["order"] == asdict(OrderPolicy(overload="shed", elevator_interval_s=600.0))
    # An option overrides the app's setting; the others stay the app's.
    result = world.invoke("simulate", *OVERLOADED, "--json", "--overload-policy", "greedy")
    greedy = dgs_row(result.stdout)
    assert greedy["order"] == asdict(OrderPolicy(overload="greedy", elevator_interval_s=600.0))
    assert greedy["error_s"] != shed["error_s"]


def test_celery_dgs_simulate_runs_the_lookahead_and_another_overload_policy(
    world: World, tmp_path: Path
) -> None:
    path = long_and_short(tmp_path)
    args = ("simulate", "--workload", str(path), "--policy", "dgs", "--json")
    result = world.invoke(*args, "--lookahead", "--overload-policy", "greedy")
    assert result.exit_code in (0, 1), result.output
    row = dgs_row(result.stdout)
    order = OrderPolicy(overload="greedy", lookahead=True)
    assert row["order"] == asdict(order)
    expected = run_sim(load_workload(path), "dgs", order=order)
    assert (row["error_s"], row["runs"]) == (expected.error_s, expected.runs)
    plain = dgs_row(world.invoke(*args, "--no-lookahead").stdout)
    assert row["error_s"] < plain["error_s"] / 2
    # The app's default has the look-ahead on.
    assert dgs_row(world.invoke(*args).stdout)["order"]["lookahead"] is True


def test_bad_order_options_are_usage_errors() -> None:
    for args, option in (
        (["--elevator-interval", "0"], "--elevator-interval"),
        (["--laxity-floor", "soon"], "--laxity-floor"),
        (["--overload-policy", "lucky"], "--overload-policy"),
        (["--restore-aging", "-1"], "--restore-aging"),
    ):
        result = CliRunner().invoke(simulate, [*OVERLOADED, *args])
        assert result.exit_code == 2, (args, result.output)
        assert option in result.output
