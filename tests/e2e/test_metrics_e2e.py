"""Beat serves Prometheus metrics: scraped from a live beat + worker set-up."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request

import pytest

from celery_dgs.embedded import free_port
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def scrape(port: int, path: str = "/metrics") -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return str(resp.read().decode())
    except OSError:
        return ""


def status_of(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_endpoint_shows_each_schedules_condition(cluster_factory) -> None:
    port = free_port()
    cluster = cluster_factory(["p10", "p20"], E2E_METRICS_PORT=str(port))
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: "success" in cluster.outcomes("e2e.p10"), 60, "a successful run")

    def p10_ok() -> str:
        text = scrape(port)
        ok = r'dgs_schedule_condition\{reason="ok",schedule="e2e.p10"\} 0'
        return text if re.search(ok, text) else ""

    text = wait_for(p10_ok, 30, "e2e.p10 to be reported OK")
    assert re.search(r'dgs_schedule_condition\{reason="[a-z_]+",schedule="e2e.p20"\}', text)
    assert re.search(r'dgs_schedule_seconds_until_error\{schedule="e2e.p10"\} [0-9.e+]+', text)
    assert re.search(r'dgs_runs_total\{outcome="success"\} [1-9]', text)
    assert re.search(r'dgs_worker_slots\{state="free"\}', text)
    assert "dgs_dispatch_lateness_seconds_count" in text
    assert "dgs_most_urgent_drift_seconds" in text
    # The same port answers /healthz (beat is ticking) and nothing else.
    status, body = status_of(port, "/healthz")
    assert status == 200, body
    assert body.startswith("ok: beat's last tick was ")
    assert body.endswith("(leader)\n")
    status, body = status_of(port, "/")
    assert status == 404
    assert "dgs_" not in body


def test_a_scrape_wakes_an_idle_beat_for_a_fresh_snapshot(cluster_factory) -> None:
    """An idle leader waits up to 10 s between rounds (a 2 s store poll, its
    lease renewed every 10 s); a scrape wakes it, so each new runtime schedule
    is in the first scrape after one poll interval, not in the one after it."""
    from celery_dgs.runtime_schedules import RuntimeSchedules

    port = free_port()
    cluster = cluster_factory(
        ["p10"],
        E2E_METRICS_PORT=str(port),
        E2E_STORE_POLL="2",
        E2E_MAX_LOOP="30",
        E2E_BEAT_LEADER_TIMEOUT="30",
    )
    cluster.start_beat()
    wait_for(lambda: 'schedule="e2e.p10"' in scrape(port), 30, "beat's metrics")
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        for key in ("a", "b", "c"):
            api.upsert(f"e2e.scrape@{key}", period=3600, args=[key])
            time.sleep(2.5)  # past one store poll interval
            assert f'schedule="e2e.scrape@{key}"' in scrape(port), key
    finally:
        store.close()


def test_a_metrics_port_in_use_is_one_line_and_beat_runs_on(cluster_factory) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = cluster_factory(["p10"], E2E_METRICS_PORT=str(port))
        cluster.start_worker("w1", "node1")
        cluster.start_beat()
        wait_for(lambda: "success" in cluster.outcomes("e2e.p10"), 60, "a run beat dispatched")
        log = cluster.log_since("beat", 0)
        assert f"cannot serve metrics on 0.0.0.0:{port} (Address already in use)" in log, log
        assert "Traceback" not in log
