"""``celery dgs add --kind adaptive`` with the lister's ``last_modified``, and
``celery dgs status --json`` showing the ladder, on a real SQLite store."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from celery_dgs.core.spec import AdaptiveSpec
from tests.cli.conftest import World


def test_add_an_adaptive_schedule_and_see_its_ladder(world: World) -> None:
    def noop(*args: object, **kwargs: object) -> None:
        pass

    world.app.task(name="t.visit", shared=False)(noop)
    result = world.invoke(
        "add",
        "t.visit@a",
        "--kind",
        "adaptive",
        "--set",
        "interval_unit=60",
        "--set",
        "last_modified=2026-03-01T10:00:00Z",
    )
    assert result.exit_code == 0, result.output
    row = world.store.get("t.visit@a")
    assert isinstance(row.spec, AdaptiveSpec)
    assert row.stats.upstream_modified_at == datetime(2026, 3, 1, 10, tzinfo=timezone.utc)
    bad = world.invoke("add", "t.visit@a", "--kind", "adaptive", "--set", "last_modified=soon")
    assert bad.exit_code == 1
    assert "last_modified" in bad.output
    shown = json.loads(world.invoke("status", "--json").stdout)
    [entry] = [s for s in shown["schedules"] if s["name"] == "t.visit@a"]
    assert (entry["interval_index"], entry["interval_s"]) == (4, 120.0)
    assert entry["next_target_at"] == entry["error_at"]
    assert entry["disabled_reason"] is None
    text = world.invoke("status").stdout
    assert "interval-4:" in text


def test_a_disabled_adaptive_schedule_says_resume_enables_it(world: World) -> None:
    def noop(*args: object, **kwargs: object) -> None:
        pass

    world.app.task(name="t.visit", shared=False)(noop)
    added = world.invoke(
        "add",
        "t.visit@b",
        "--kind",
        "adaptive",
        "--set",
        "interval_unit=60",
        "--set",
        "max_failures=1",
    )
    assert added.exit_code == 0, added.output
    world.record("t.visit@b", "failure", datetime.now(timezone.utc), error="HTTP 503")
    assert world.store.get("t.visit@b").disabled_reason is not None
    text = world.invoke("status").stdout
    assert "disabled" in text
    assert "`celery dgs resume t.visit@b` enables it now" in text
    assert "'disabled'" in world.invoke("status", "--help").stdout
    resumed = world.invoke("resume", "t.visit@b")
    assert resumed.exit_code == 0, resumed.output
    assert world.store.get("t.visit@b").disabled_reason is None
