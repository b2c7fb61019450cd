"""The status page against a live fleet: a real beat and two real workers
(``tests/e2e/proj.py`` subprocesses, real Redis server, SQLite store), in a
real browser. The overview's numbers and leader token match ``celery dgs
status --json``; schedules turning ERROR appear within one refresh without a
reload; a pause through the page keeps beat from dispatching the schedule
until it is resumed there; a live run's progress bar moves."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from selenium.webdriver.common.by import By

from celery_dgs.dgs import DGS
from tests.e2e.harness import ROOT, Cluster, wait_for
from tests.e2e.test_cli_e2e import celery_command
from tests.web.conftest import (
    TOKEN,
    Server,
    Site,
    attribute_of,
    click,
    counts_shown,
    serve_app,
    text_of,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture
def page_app(tmp_path: Path, redis_url: str) -> Iterator[tuple[Cluster, Site]]:
    cluster = Cluster(tmp_path, redis_url, ["cli_long", "cli_fail", "p10"])
    app = Celery("e2e-web", broker=cluster.redis_url, set_as_current=False)
    app.conf.update(
        dgs_database_url=cluster.database_url,
        dgs_key_prefix="e2e",
        dgs_ping_interval=0.5,
        dgs_ping_timeout=1.5,
        dgs_steal_delay=1.0,
        dgs_worker_ttl=3.0,
        dgs_beat_leader_timeout=2.0,
        dgs_web_token=TOKEN,
    )
    DGS(app, install_worker_hooks=False)
    site, server = serve_app(app, refresh=0.5)
    try:
        yield cluster, site
    finally:
        stop(server)
        cluster.stop_all()
        app.close()


def stop(server: Server) -> None:
    server.should_exit = True
    server.thread.join(10)


def status_json(cluster: Cluster) -> dict[str, Any]:
    done = subprocess.run(
        [*celery_command(), "-A", "tests.e2e.proj", "dgs", "status", "--json"],
        cwd=ROOT,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr
    return dict(json.loads(done.stdout))


def test_the_page_follows_a_live_fleet(page_app: tuple[Cluster, Site], browser: Any) -> None:
    cluster, site = page_app
    browser.delete_all_cookies()
    browser.get(site.url + "/")
    wait_for(lambda: counts_shown(browser).get("ERROR") == 0, 10, "an empty overview")
    browser.execute_script("window.__sameDocument = true")

    # Declared: cli_fail has never succeeded within its 1 s period -> ERROR,
    # shown by the next refresh, without a reload.
    cluster.sync_declarations()
    wait_for(lambda: counts_shown(browser).get("ERROR") == 1, 5, "cli_fail in ERROR")
    assert browser.execute_script("return window.__sameDocument") is True

    # Pause p10 through the page before any beat runs.
    browser.get(site.url + "/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    wait_for(lambda: counts_shown(browser), 10, "signed in")
    browser.get(f"{site.url}/schedule?name=e2e.p10")
    click(browser, "[data-action=pause]")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-notice]"), 10, "paused")

    cluster.start_worker("w1", "node1")
    cluster.start_worker("w2", "node2")
    cluster.start_beat()
    wait_for(lambda: cluster.beat_leader() is not None, 20, "a beat leader")
    wait_for(lambda: cluster.outcomes("e2e.cli_long") == ["running"], 20, "cli_long running")
    wait_for(lambda: cluster.outcomes("e2e.cli_fail"), 20, "cli_fail dispatched")

    # The live run's progress bar moves (cli_long reports progress as it runs).
    browser.get(f"{site.url}/schedule?name=e2e.cli_long")

    def progress() -> float:
        text = attribute_of(browser, "[data-progress]", "data-progress")
        return float(text) if text else -1.0

    first = wait_for(lambda: progress() if progress() >= 0 else None, 10, "a progress bar")
    wait_for(lambda: progress() > first, 10, "the progress bar moving")

    # Beat dispatched the others but not the paused p10.
    assert cluster.outcomes("e2e.p10") == []

    # The overview's numbers and leader are those of `celery dgs status --json`.
    browser.get(site.url + "/")

    def same() -> bool:
        cli = status_json(cluster)
        shown = counts_shown(browser)
        token = text_of(browser, "[data-leader-token]")
        return (
            {k: shown[k] for k in cli["counts"]} == cli["counts"]
            and token is not None
            and int(token) == cli["beat_leader"]["token"]
        )

    wait_for(same, 10, "the overview matching status --json")
    assert cluster.outcomes("e2e.p10") == []

    browser.get(f"{site.url}/schedule?name=e2e.p10")
    click(browser, "[data-action=resume]")
    wait_for(lambda: cluster.outcomes("e2e.p10"), 20, "p10 dispatched once resumed")
    browser.delete_all_cookies()
