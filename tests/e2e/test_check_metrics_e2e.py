"""Beat's deferred-check metrics from a live beat and worker: checks overdue
when beat starts are dispatched and observed in ``dgs_check_lateness_seconds``
(now - their check time), counted per task while pending
(``dgs_checks_pending``/``dgs_checks_overdue``), never as schedules."""

from __future__ import annotations

import re
import time
import urllib.request
from datetime import timedelta
from typing import Any

import pytest

from celery_dgs.core.clock import SystemClock
from celery_dgs.deferred import DeferredChecks, check_template
from celery_dgs.embedded import free_port
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TASK = "e2e.check_order"
ORDERS = ["m1", "m2", "m3"]


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            return str(resp.read().decode())
    except OSError:
        return ""


def sample(text: str, line: str) -> float | None:
    found = re.search(rf"^{re.escape(line)} ([0-9.e+-]+)$", text, re.MULTILINE)
    return None if found is None else float(found.group(1))


def test_overdue_checks_are_counted_and_their_lateness_observed(cluster_factory: Any) -> None:
    port = free_port()
    cluster = cluster_factory(["check_order"], E2E_METRICS_PORT=str(port))
    store = cluster.store()
    try:
        template = check_template(TASK, {"within": timedelta(seconds=2), "max_checks": 3})
        api = DeferredChecks(store, {TASK: template}, clock=SystemClock())
        for order in ORDERS:
            cluster.redis.set(f"e2e:order:{order}", "shipped")  # one check each, then done
            api.at(TASK, order, after=0, kwargs={"order": order})
        api.at(TASK, "later", after=3600, kwargs={"order": "later"})  # pending, not due
        time.sleep(3)  # no beat yet: the three are overdue by 3 s or more
        cluster.start_beat()  # no worker yet: beat holds them, nothing runs

        def counted() -> str:
            text = scrape(port)
            return text if sample(text, f'dgs_checks_overdue{{task="{TASK}"}}') == 3 else ""

        text = wait_for(counted, 30, "the overdue checks counted")
        assert sample(text, f'dgs_checks_pending{{task="{TASK}"}}') == 4
        assert f'schedule="{TASK}@check:' not in text  # not schedules
        cluster.start_worker("w1", "node1", pool="threads", concurrency=1)
        for order in ORDERS:
            wait_for(
                lambda o=order: store.check_history(name=f"{TASK}@check:{o}"),
                30,
                f"the check of {order} done",
            )

        def observed() -> str:
            text = scrape(port)
            return text if sample(text, "dgs_check_lateness_seconds_count") == 3 else ""

        text = wait_for(observed, 30, "three check dispatches observed")
        late = sample(text, "dgs_check_lateness_seconds_sum")
        assert late is not None
        assert late >= 3 * 3.0  # each dispatched at least 3 s after its check time
        assert sample(text, 'dgs_check_lateness_seconds_bucket{le="1.0"}') == 0
        assert f'schedule="{TASK}@check:' not in text
    finally:
        store.close()
