"""The leading beat's pace in Redis (celery_dgs/beat_pace.py), on a real server."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest
import redis

from celery_dgs.beat_pace import PaceBoard
from celery_dgs.core.elevator import ElevatorState
from celery_dgs.core.pace import PaceFigures, WindowFigures
from celery_dgs.keys import KeySpace

FIGURES = PaceFigures(window_s=60, rounds=120, dispatches=3000, busy_share=0.7, capped_rounds=2)


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_leader_writes_its_pace_and_status_reads_it(
    client: redis.Redis, keys: KeySpace
) -> None:
    ticks = Ticks()
    board = PaceBoard(client, keys, every_s=5.0, monotonic=ticks)
    board.maybe_write(lambda: FIGURES)
    assert board.read() is None, "the first write waits for a pace over every_s"
    ticks.now += 5.0
    board.maybe_write(lambda: FIGURES)
    assert board.read() == FIGURES
    assert 0 < client.pttl(keys.beat_pace()) <= 15_000


def test_the_windows_figures_go_with_the_pace(client: redis.Redis, keys: KeySpace) -> None:
    ticks = Ticks()
    board = PaceBoard(client, keys, every_s=5.0, monotonic=ticks)
    figures = replace(FIGURES, window=WindowFigures(held=120, size=100, full=True, room=None))
    ticks.now += 5.0
    board.maybe_write(lambda: figures)
    assert board.read() == figures


def test_where_the_classes_stand_goes_with_the_pace(client: redis.Redis, keys: KeySpace) -> None:
    ticks = Ticks()
    board = PaceBoard(client, keys, every_s=5.0, monotonic=ticks)
    elevator = ElevatorState(levels=(0, 10, 90), short=True, interval_s=600.0)
    figures = replace(FIGURES, elevator=elevator)
    ticks.now += 5.0
    board.maybe_write(lambda: figures)
    assert board.read() == figures
    assert json.loads(client.get(keys.beat_pace()))["elevator"] == {
        "levels": [0, 10, 90],
        "short": True,
        "interval_s": 600.0,
        "clock_offset_s": 0.0,
    }


def test_writes_come_at_most_every_interval(client: redis.Redis, keys: KeySpace) -> None:
    ticks = Ticks()
    board = PaceBoard(client, keys, every_s=5.0, monotonic=ticks)
    calls: list[int] = []

    def figures() -> PaceFigures:
        calls.append(1)
        return FIGURES

    board.maybe_write(figures)
    assert calls == []
    ticks.now += 5.0
    board.maybe_write(figures)
    ticks.now += 4.9
    board.maybe_write(figures)
    assert len(calls) == 1
    ticks.now += 0.1
    board.maybe_write(figures)
    assert len(calls) == 2


def test_a_malformed_pace_reads_as_none_with_a_warning(
    client: redis.Redis, keys: KeySpace, caplog: pytest.LogCaptureFixture
) -> None:
    client.set(keys.beat_pace(), b'{"rounds": "many"}')
    with caplog.at_level(logging.WARNING, logger="celery_dgs.beat_pace"):
        assert PaceBoard(client, keys).read() is None
    assert "malformed" in caplog.text
