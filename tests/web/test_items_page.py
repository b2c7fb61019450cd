"""Item counts on the status page and in the CLI (real SQLite store, real
Redis-compatible server, the page served over HTTP): a partial failure's
reason names the counts, the run table shows them, and so do ``runs`` and
``status --json``."""

from __future__ import annotations

import json
from datetime import timedelta

from celery_dgs.core.items import PARTIAL_FAILURE, ItemCounts
from tests.cli.conftest import now, spec
from tests.web.conftest import WebWorld

M = timedelta(minutes=1)


def test_a_partial_failure_and_a_good_run_with_items(web: WebWorld) -> None:
    t = now()
    web.sync(spec("t.items"), spec("t.good"), at=t - 30 * M)
    web.record("t.items", "success", t - 20 * M, items=ItemCounts(10, 0))
    web.record(
        "t.items",
        PARTIAL_FAILURE,
        t - 5 * M,
        items=ItemCounts(7, 3),
        error="3 of 10 items failed (30%), above the partial-failure threshold 0.2 (20%)",
    )
    web.record("t.good", "success", t - 5 * M, items=ItemCounts(9, 1))
    site = web.serve()

    page = site.get("/schedule?name=t.items").body
    assert 'data-reason="items_failed"' in page
    assert "3 of 10 items failed (30%)" in page
    assert "<td data-items>3/10 failed</td>" in page
    assert "<td data-items>0/10 failed</td>" in page
    assert "<td data-last-items>7 ok, 3 failed</td>" in page
    good = site.get("/schedule?name=t.good").body
    assert 'data-reason="ok"' in good
    assert "<td data-last-items>9 ok, 1 failed</td>" in good

    table = web.invoke("runs", "t.items").output
    assert "3/10 failed" in table
    assert "partial_failure" in table
    rows = {r["name"]: r for r in json.loads(web.invoke("status", "--json").output)["schedules"]}
    assert rows["t.items"]["reason"] == "items_failed"
    assert "3 of 10 items failed" in rows["t.items"]["message"]
    assert (rows["t.good"]["last_items_ok"], rows["t.good"]["last_items_failed"]) == (9, 1)
