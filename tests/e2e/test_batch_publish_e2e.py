"""End to end: beat publishes a round's messages in Redis pipelines, and a real
worker runs each one as it would a message of ``send_task``: its args and
kwargs, its task id (the dispatch id), the ``dgs_schedule``/``dgs_dispatch_id``
headers the worker hooks read, and a header a ``before_task_publish`` receiver
in beat added. ``after_task_publish`` fires once per message."""

from __future__ import annotations

from collections import Counter

import pytest
from celery import Celery
from kombu import Producer

from celery_dgs.beat.publishing import batches_publishes
from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not hasattr(Producer, "batch"), reason="kombu < 5.7 publishes one message at a time"
    ),
]

FLEET = 24


def rows() -> list[dict[str, object]]:
    return [
        {
            "name": f"e2e.echo@e{i:02d}",
            "period": 3600,
            "args": [i, f"e{i:02d}"],
            "kwargs": {"tag": f"t{i}", "nested": {"n": i, "list": [i, None]}},
        }
        for i in range(FLEET)
    ]


def test_a_batched_round_reaches_the_worker_as_send_task_would(cluster_factory) -> None:
    cluster = cluster_factory(["echo"], E2E_PUBLISH_SIGNALS="1")
    probe = Celery("e2e-probe", broker=cluster.redis_url, set_as_current=False)
    try:
        with probe.producer_or_acquire() as producer:
            assert batches_publishes(producer), "this kombu publishes one by one on Redis"
    finally:
        probe.close()
    store = cluster.store()
    try:
        report = RuntimeSchedules(store).upsert_many(rows())
        assert report.ok, report.errors
    finally:
        store.close()
    cluster.start_worker("w1", "node1", pool="threads", concurrency=FLEET)
    cluster.start_beat()

    def echoed() -> list[dict[str, object]] | None:
        found = [e for e in cluster.events() if e["kind"] == "echo"]
        return found if len(found) >= FLEET else None

    echoes = wait_for(echoed, 60, f"{FLEET} runs of e2e.echo")
    by_name = {e["name"]: e for e in echoes}
    assert len(by_name) == FLEET == len(echoes), Counter(e["name"] for e in echoes)
    for row in rows():
        name = str(row["name"])
        seen = by_name[name]
        assert seen["args"] == row["args"], name
        assert seen["kwargs"] == row["kwargs"], name
        assert seen["task_id"] == seen["dispatch_id"], name
        assert seen["stamp"] == f"stamped {name}", name
    wait_for(
        lambda: all(cluster.outcomes(str(r["name"])) == ["success"] for r in rows()),
        30,
        "every run stored as a success",
    )
    published = Counter(e["name"] for e in cluster.events() if e["kind"] == "published")
    assert published == Counter(list(by_name)), published
