"""The README's and ``--help``'s ``simulate --find-slots`` examples, exactly as
written, against the example project; and a schedule no slot count can serve
named with its reason, found with one simulation."""

from __future__ import annotations

import json
import time

from celery.bin.celery import celery
from click.testing import CliRunner, Result

from celery_dgs.cli.simulate import simulate
from tests.cli.conftest import World
from tests.cli.test_declare import declare


def run(*args: str) -> tuple[Result, float]:
    started = time.monotonic()
    result = CliRunner().invoke(celery, ["-A", "example_project.proj", "dgs", "simulate", *args])
    return result, time.monotonic() - started


def test_readme_find_slots_example_names_the_schedule_no_slot_count_serves() -> None:
    # README: `celery -A proj dgs simulate --duration 2m --find-slots`. With runs of
    # 2 minutes on average, the demo's 2-minute scrape_bills can never be fresh.
    result, wall = run("--duration", "2m", "--find-slots")
    assert result.exit_code == 1, result.output
    assert "needs --slots" not in result.output
    out = result.stdout
    assert out.startswith("6 schedules, demand 3.87 slots, horizon 7d")
    assert (
        "no slot count keeps every schedule out of ERROR: with a slot for every schedule (6 slots)"
    ) in out
    assert "  example.scrape_bills: in ERROR" in out
    assert "(duration_at_least_period: a run takes 2m, its period is 2m)" in out
    assert "WARNING schedule 'example.scrape_bills' can never be served" in result.stderr
    assert wall < 60, wall


def test_help_find_slots_example_runs_without_slots() -> None:
    # --help: `celery -A proj dgs simulate --duration 5m --find-slots`.
    result, wall = run("--duration", "5m", "--find-slots")
    assert result.exit_code == 1, result.output
    assert "needs --slots" not in result.output
    assert "  example.scrape_votes: in ERROR" in result.stdout
    assert wall < 60, wall
    help_text = (
        CliRunner()
        .invoke(celery, ["-A", "example_project.proj", "dgs", "simulate", "--help"])
        .stdout
    )
    assert "celery -A proj dgs simulate --duration 5m --find-slots" in help_text


def test_find_slots_answers_for_the_demo_with_its_run_times() -> None:
    result, wall = run("--duration", "10s", "--find-slots", "--horizon", "2d")
    assert result.exit_code == 0, result.output
    assert "dgs: 1 slot keeps every schedule out of ERROR after warm-up" in result.stdout
    assert wall < 60, wall


def test_find_slots_stops_at_a_cron_that_its_blackout_keeps_in_error(world: World) -> None:
    declare(
        world.app,
        {
            "t.a": {"kind": "periodic", "period": 3600},
            "t.c": {
                "kind": "cron",
                "cron": "*/5 * * * *",
                "within": 240,
                "tz": "America/New_York",
                "blackouts": [("12:00", "13:00")],
            },
        },
    )
    started = time.monotonic()
    result = world.invoke("simulate", "--duration", "10s", "--find-slots", "--horizon", "3d")
    assert result.exit_code == 1, result.output
    assert "  t.c: in ERROR" in result.stdout
    assert "(cron_times_in_blackout: 12 of its 288 cron times a day" in result.stdout
    assert "t.a:" not in result.stdout
    # One simulation (a slot for every schedule) names t.c; the search then
    # answers for the others: t.a alone, on one slot.
    runs = [x.split(":")[0].strip() for x in result.stderr.splitlines() if x.startswith("   ")]
    assert runs == ["2 a slot for every schedule", "1 slot"]
    assert "  then over the other schedules: first a run with 1 slot" in result.stderr
    assert "dgs: 1 slot keeps the 1 other schedule out of ERROR after warm-up" in result.stdout
    assert time.monotonic() - started < 30
    as_json = world.invoke(
        "simulate", "--duration", "10s", "--find-slots", "--horizon", "3d", "--json"
    )
    doc = json.loads(as_json.stdout)
    assert doc["slots"] is None
    assert doc["others_slots"] == 1
    assert doc["unservable"]["t.c"]["reason"] == "cron_times_in_blackout"
    assert 2.5 * 3300 < doc["unservable"]["t.c"]["error_s"] < 3 * 3500


def test_find_slots_first_run_is_bounded_by_the_demand() -> None:
    # 300 schedules without a cooldown at demand 2 slots: a slot for each would
    # re-run them back to back; the first run uses 4 x the demand (8 slots).
    started = time.monotonic()
    result = CliRunner().invoke(
        simulate,
        [
            "--schedules",
            "300",
            "--slots",
            "4",
            "--load",
            "0.5",
            "--cooldown-fraction",
            "0",
            "--horizon",
            "1d",
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
    assert "8" in doc["tried"]
    assert max(int(k) for k in doc["tried"]) == 8
    assert 2 <= doc["slots"] <= 8
    assert time.monotonic() - started < 60
