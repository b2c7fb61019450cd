"""``celery dgs status`` reads the kept state: counts over the whole selection,
a page of rows (``--limit``), patterns filtered in the store, ``--json``
streamed with the layout of one indented document; a real SQLite store, the
real Redis, the real CLI."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from celery_dgs.cli.status_command import json_chunks
from tests.cli.conftest import World, now, spec

H = timedelta(hours=1)
M = timedelta(minutes=1)


@pytest.fixture
def fleet(world: World) -> datetime:
    """120 schedules ``f.NNN`` (period 1 h) that last succeeded 20 + NNN/4 minutes
    ago, and 5 ``g.N`` never run, registered 3 h ago (ERROR never_succeeded)."""
    t = now()
    specs = [spec(f"f.{i:03d}") for i in range(120)] + [spec(f"g.{i}") for i in range(5)]
    world.sync(*specs, at=t - 3 * H)
    for i in range(120):
        world.record(f"f.{i:03d}", "success", t - (i / 4) * M - 20 * M, 1.0)
    return t


def test_counts_cover_the_selection_and_the_table_a_page(world: World, fleet: datetime) -> None:
    result = world.invoke("status")
    assert result.exit_code == 1  # the g.* are in ERROR
    lines = result.stdout.splitlines()
    assert "125 schedules (5 ERROR, 0 WARNING, 120 OK); 0 running" in lines[0]
    rows = [line.split()[1] for line in lines[2:102]]
    assert rows[:5] == [f"g.{i}" for i in range(5)]
    assert rows[5:7] == ["f.119", "f.118"]  # OK by should_start_by, the oldest run first
    assert "25 more not listed" in result.stdout
    two = world.invoke("status", "--limit", "2").stdout.splitlines()
    assert [line.split()[1] for line in two[2:4]] == ["g.0", "g.1"]
    assert "123 more not listed" in "\n".join(two)


def test_patterns_and_conditions_are_filtered_in_the_store(world: World, fleet: datetime) -> None:
    result = world.invoke("status", "f.00?", "g.4")
    assert result.exit_code == 1
    head = result.stdout.splitlines()[0]
    assert "11 schedules (1 ERROR, 0 WARNING, 10 OK)" in head
    ok = world.invoke("status", "--condition", "OK", "f.1[01]?")
    assert ok.exit_code == 0
    assert "20 schedules (0 ERROR, 0 WARNING, 20 OK)" in ok.stdout
    assert "more not listed" not in ok.stdout


def test_json_streams_every_row_as_one_document(world: World, fleet: datetime) -> None:
    result = world.invoke("status", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    rows = [line for line in result.stdout.splitlines() if line.startswith("    {")]
    assert [json.loads(line.rstrip(","))["name"] for line in rows] == [
        r["name"] for r in doc["schedules"]
    ]
    assert doc["counts"] == {"ERROR": 5, "WARNING": 0, "OK": 120}
    assert len(doc["schedules"]) == 125
    assert [r["name"] for r in doc["schedules"][:6]] == [*(f"g.{i}" for i in range(5)), "f.119"]
    one = json.loads(world.invoke("status", "--json", "--limit", "1", "f.*").stdout)
    assert [r["name"] for r in one["schedules"]] == ["f.119"]
    assert one["counts"] == {"ERROR": 0, "WARNING": 0, "OK": 120}


def test_project_reads_the_fleet_and_filters_after(world: World, fleet: datetime) -> None:
    doc = json.loads(world.invoke("status", "--json", "--project", "g.*").stdout)
    assert [r["name"] for r in doc["schedules"]] == [f"g.{i}" for i in range(5)]
    assert doc["counts"] == {"ERROR": 5, "WARNING": 0, "OK": 0}


def test_the_json_writer_streams_one_document() -> None:
    for rows in ([], [{"a": [1, {"b": None}]}, {"c": "é"}]):
        head = {"now": "t", "counts": {"OK": 1}, "workers": []}
        tail = {"checks": {"pending": 0}}
        text = "".join(json_chunks(head, "schedules", iter(rows), tail))
        assert json.loads(text) == {**head, "schedules": rows, **tail}
        assert '"c": "é"' in text or not rows
