"""``celery -A proj dgs simulate`` on the app's fleet: what its SQLite store
holds (runtime and adaptive schedules, pending deferred checks) with their
measured run times, sampled above ``--sample``; the declarations alone when
the store holds nothing else or is not there; the first line says which."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import redis
from celery.bin.base import CLIContext
from click.testing import CliRunner

from celery_dgs.cli import dgs as dgs_group
from celery_dgs.core.spec import CheckSpec, ScheduleSpec
from celery_dgs.core.timing import with_default_cooldown
from celery_dgs.keys import KeySpace
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.store.check_types import NewCheck
from tests.cli.conftest import PREFIX, World, make_app, now, spec
from tests.cli.test_declare import declare


def store_fleet(world: World, periodic: int) -> None:
    """``periodic`` hourly runtime schedules, one adaptive one and two pending checks."""
    at = now()
    specs: list[ScheduleSpec] = [
        with_default_cooldown(spec("t.p", configuration=f"p{i}"))  # type: ignore[arg-type]
        for i in range(periodic)
    ]
    specs.append(spec("t.ad", "adaptive", interval_unit=timedelta(hours=1)))
    world.store.upsert_runtime(specs, at)
    checks = [
        NewCheck(CheckSpec(task="t.c", key=f"k{i}"), at + timedelta(minutes=10 * (i + 1)))
        for i in range(2)
    ]
    world.store.add_checks(checks, at)


def test_runtime_schedules_without_declarations_are_simulated_and_sampled(world: World) -> None:
    store_fleet(world, 30)  # 33 stored: 30 periodic, 1 adaptive, 2 checks
    result = world.invoke(
        "simulate", "--slots", "10", "--sample", "12", "--horizon", "1d", "--policy", "dgs"
    )
    assert "declares no valid schedules" not in result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("12 schedules, 4 slots, load "), first
    assert (
        "source: the store and the app's declarations: 31 runtime, 2 pending checks; of the "
        "schedules: 1 adaptive, 30 periodic; sampled 12 of 33 (--sample), slots scaled 10 -> 4 "
        "(rounded: the whole fleet's load is about "
    ) in first
    assert result.exit_code in (0, 1), result.output
    # Below the limit: every stored schedule, on the slots given.
    whole = world.invoke("simulate", "--slots", "10", "--horizon", "1d", "--policy", "dgs")
    first = whole.stdout.splitlines()[0]
    assert first.startswith("33 schedules, 10 slots, load "), first
    assert "sampled" not in first


def test_without_slots_the_live_workers_slots_are_simulated(
    world: World, redis_client: redis.Redis
) -> None:
    store_fleet(world, 30)
    args = ("simulate", "--horizon", "1d", "--policy", "dgs")
    none = world.invoke(*args)
    assert none.exit_code == 2
    assert "needs --slots" in none.output
    assert "no live worker of this project is registered" in none.output
    registry = WorkerRegistry(redis_client, KeySpace(PREFIX), ttl=300)
    for name, slots in (("w1@n1", 2), ("w2@n2", 3)):
        registry.register(
            WorkerInfo(name=name, node="n", queues=("celery",), slots=slots, pool="t", pid=1)
        )
    live = world.invoke(*args)
    first = live.stdout.splitlines()[0]
    assert first.startswith("33 schedules, 5 slots, load "), first
    assert "; 5 slots: the live workers' (--slots to change)" in first


def test_stored_run_times_give_the_load(world: World) -> None:
    # One runtime schedule whose runs took 6 minutes of its hour: load 0.10 on
    # one slot, not the 60 s default of --duration (0.02).
    at = now()
    world.store.upsert_runtime([spec("t.a")], at - timedelta(hours=3))
    for hours in (3, 2, 1):
        world.record("t.a", "success", at - timedelta(hours=hours), seconds=360)
    result = world.invoke("simulate", "--slots", "1", "--horizon", "1d", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["load"] for r in rows] == [0.1, 0.1, 0.1]
    assert (
        rows[0]["source"]
        == "the store and the app's declarations: 1 runtime; of the schedules: 1 periodic"
    )
    assert rows[0]["error_s"] == 0


def test_find_slots_on_a_sample_scales_the_answer_to_the_fleet(world: World) -> None:
    store_fleet(world, 40)
    result = world.invoke(
        "simulate", "--find-slots", "--sample", "10", "--horizon", "1d", "--policy", "dgs"
    )
    assert "sampled 10 of 43 (--sample)" in result.stdout.splitlines()[0]
    assert result.exit_code == 0, result.output
    answer = int(result.stdout.splitlines()[1].split()[1])  # "dgs: N slots keep ..."
    fleet = -(-answer * 43 // 10)
    doc = json.loads(
        world.invoke(
            "simulate", "--find-slots", "--sample", "10", "--horizon", "1d", "--json"
        ).stdout
    )
    assert (doc["slots"], doc["fleet_slots"]) == (answer, fleet)
    # 40 hourly schedules of 60 s: the fleet's demand is under a slot, so the
    # sample's least answer stands for 1 to `fleet` slots of the fleet.
    assert (answer, doc["fleet_slots_at_least"]) == (1, 1)
    line = result.stdout.splitlines()[2]
    assert line.startswith(
        f"on a sample of 10 of 43 schedules: the whole fleet needs 1 to {fleet} slots "
        "(the sample's 1 scaled by 43/10, and its demand, "
    ), line
    assert line.endswith(" slots, rounded up); a larger --sample narrows it"), line


def test_declarations_alone_when_the_store_holds_nothing_else(world: World) -> None:
    declare(world.app, {"t.a": {"kind": "periodic", "period": 3600}})
    result = world.invoke("simulate", "--slots", "1", "--horizon", "1d", "--policy", "dgs")
    assert result.exit_code == 0, result.output
    assert (
        "source: the app's declarations (the store holds no runtime schedule or check)"
        in result.stdout.splitlines()[0]
    )


def test_declarations_alone_without_a_database_file(tmp_path: Path, redis_url: str) -> None:
    missing = tmp_path / "none.sqlite3"
    app = make_app(f"sqlite:///{missing}", redis_url)
    declare(app, {"t.a": {"kind": "periodic", "period": 3600}})
    obj = CLIContext(app=app, no_color=True, workdir=None)
    args = ["simulate", "--slots", "1", "--horizon", "1d", "--policy", "dgs"]
    result = CliRunner().invoke(dgs_group, args, obj=obj)
    assert result.exit_code == 0, result.output
    assert (
        f"source: the app's declarations (store not read: no database file {missing})"
        in result.stdout.splitlines()[0]
    )
    assert not missing.exists()  # simulate does not create it
    app.close()


def test_nothing_to_simulate_is_a_usage_error(world: World) -> None:
    declare(world.app, {})
    result = world.invoke("simulate", "--slots", "1")
    assert result.exit_code == 2
    assert "the app declares no valid schedules and its store holds none" in result.output
