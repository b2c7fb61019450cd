"""Another project's workers on a shared Redis prefix: the registration keeps
the store id, and beat's placement leaves those workers out, logging each once."""

from __future__ import annotations

import logging

import pytest
import redis

from celery_dgs.beat.foreign_workers import ForeignWorkers
from celery_dgs.keys import KeySpace
from celery_dgs.registry import WorkerInfo, WorkerRegistry

KEYS = KeySpace("fw")


def worker(name: str, store: str | None) -> WorkerInfo:
    node = name.split("@")[1]
    return WorkerInfo(
        name=name, node=node, queues=("celery",), slots=2, pool="solo", pid=1, store=store
    )


def test_the_registration_keeps_the_store_and_beat_leaves_the_others_out(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    registry = WorkerRegistry(client, KEYS, ttl=60)
    registry.register(worker("w1@ours", "store-a"))
    registry.register(worker("w2@theirs", "store-b"))
    registry.register(worker("w3@old", None))  # an older version's: no store
    live = {w.name: w.store for w in registry.live_workers()}
    assert live == {"w1@ours": "store-a", "w2@theirs": "store-b", "w3@old": None}

    foreign = ForeignWorkers("store-a", "fw")
    with caplog.at_level(logging.ERROR, logger="celery_dgs.beat"):
        for _ in range(3):
            own = foreign.own(registry.live_workers())
            assert sorted(w.name for w in own) == ["w1@ours", "w3@old"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [
        "celery-dgs beat: 1 live worker(s) (w2@theirs) serve another schedule store: two "
        "projects share this Redis database and key prefix 'fw', or those workers open "
        "another database than this process (a relative SQLite path in dgs_database_url "
        "is read from each process's working directory); beat places no run on them. "
        "Give each project its own dgs_key_prefix or Redis database, and every process "
        "of a project the same dgs_database_url"
    ]
    assert ForeignWorkers(None, "fw").own(registry.live_workers()) == registry.live_workers()
