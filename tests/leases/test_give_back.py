"""A leaving worker gives back the dispatches still waiting in its queue
(``celery_dgs/worker/shutdown.py``), against a real server."""

from __future__ import annotations

import redis

from celery_dgs.dispatches import DispatchRecord, DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.worker.shutdown import give_back_dispatches


def test_only_the_leaving_workers_dispatches_are_given_back(
    dispatches: DispatchRecords, client: redis.Redis, keys: KeySpace
) -> None:
    dispatches.add_many(
        [
            DispatchRecord(schedule="a", dispatch_id="d1", worker="celery@leaving"),
            DispatchRecord(schedule="b", dispatch_id="d2", worker="celery@staying"),
            DispatchRecord(schedule="c", dispatch_id="d3", worker="celery@leaving"),
        ],
        ttl=60,
    )
    client.set(keys.dispatch("d"), "not a hash")  # foreign data is left alone
    client.zadd(keys.dispatch_index(), {"d": 1})
    assert give_back_dispatches(dispatches, "celery@leaving") == ["a", "c"]
    assert dispatches.pending_names() == {"b", "d"}
    assert dispatches.current("b") is not None
    assert give_back_dispatches(dispatches, "celery@leaving") == []


def test_nothing_pending(dispatches: DispatchRecords) -> None:
    assert give_back_dispatches(dispatches, "celery@w1") == []
