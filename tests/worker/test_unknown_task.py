"""A dispatch of a task the worker does not have (Celery discards it as
unregistered): the worker gives its dispatch record back at once and records
a skip naming the task and the worker; a message that is not one of beat's
dispatches is left alone. A dispatch revoked or expired before it started is
given back the same way (end to end: ``tests/e2e/test_worker_e2e.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from celery_dgs.dispatches import DispatchRecord
from celery_dgs.runtime import Runtime
from celery_dgs.worker.discarded import give_back_revoked, give_back_unknown_task
from tests.worker.helpers import SPEC

RECORD = DispatchRecord(schedule=SPEC.name, dispatch_id="d1", worker="celery@node-a")


def _plugin(rt: Runtime) -> Any:
    return SimpleNamespace(settings=rt.settings)


def test_a_dispatch_of_an_unknown_task_is_given_back_at_once(rt: Runtime, monkeypatch: Any) -> None:
    from celery_dgs.worker import discarded

    monkeypatch.setattr(discarded, "runtime_for", lambda app, settings: rt)
    rt.dispatches.add_many([RECORD], ttl=300)
    assert rt.dispatches.pending_names() == {SPEC.name}
    rt.redis.delete(rt.keys.beat_wake())
    consumer = SimpleNamespace(hostname="celery@node-a", app=None)
    message = SimpleNamespace(headers={"dgs_schedule": SPEC.name, "dgs_dispatch_id": "d1"})

    give_back_unknown_task(None, _plugin(rt), consumer, message, "proj.new_task")

    assert rt.dispatches.pending_names() == set(), "the slot is free now, not at the timeout"
    (run,) = rt.store.runs(SPEC.name)
    assert run.outcome == "skipped"
    assert run.dispatch_id == "d1"
    assert run.error == "celery@node-a has no task 'proj.new_task' (discarded as unregistered)"
    assert rt.redis.llen(rt.keys.beat_wake()) == 0, "beat finds the slot at its next round"


def test_a_message_not_from_beat_is_left_alone(rt: Runtime, monkeypatch: Any) -> None:
    from celery_dgs.worker import discarded

    monkeypatch.setattr(discarded, "runtime_for", lambda app, settings: rt)
    rt.dispatches.add_many([RECORD], ttl=300)
    consumer = SimpleNamespace(hostname="celery@node-a", app=None)
    for headers in ({}, {"dgs_schedule": SPEC.name}, None):
        give_back_unknown_task(None, _plugin(rt), consumer, SimpleNamespace(headers=headers), "x")
    assert rt.dispatches.pending_names() == {SPEC.name}
    assert rt.store.runs(SPEC.name) == []


def test_a_dispatch_expired_unstarted_is_given_back_at_once(rt: Runtime, monkeypatch: Any) -> None:
    from celery_dgs.worker import discarded

    monkeypatch.setattr(discarded, "runtime_for", lambda app, settings: rt)
    rt.dispatches.add_many([RECORD], ttl=300)
    request = SimpleNamespace(
        hostname="celery@node-a", dgs_schedule=SPEC.name, dgs_dispatch_id="d1"
    )

    give_back_revoked(None, _plugin(rt), request, expired=True)

    assert rt.dispatches.pending_names() == set()
    (run,) = rt.store.runs(SPEC.name)
    assert (run.outcome, run.error) == (
        "skipped",
        "celery@node-a discarded the message unstarted: expired (sent more than "
        "dgs_dispatch_timeout ago)",
    )
