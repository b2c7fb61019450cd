"""The status page in a real browser (Debian's headless Chromium through
chromedriver): nothing a schedule's name, args or error text holds ever
executes; the overview follows the state live without a full reload (a
schedule turning ERROR, a run's progress bar); pause through the page; and
screenshots of the overview, the schedules (an adaptive, a disabled and a
prioritised schedule among them) and one schedule page."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from celery_dgs.core.spec_build import make_spec
from celery_dgs.leases.leader import RedisLeader
from tests.cli.conftest import now, spec
from tests.e2e.harness import wait_for
from tests.web.conftest import TOKEN, WebWorld, attribute_of, click, text_of

H = timedelta(hours=1)
M = timedelta(minutes=1)
EVIL = "<script>alert(1)</script>"


def no_alert(driver: Any) -> None:
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    raise AssertionError(f"a script ran: alert({alert.text!r})")


def fleet(web: WebWorld) -> None:
    t = now()
    web.sync(
        *(spec(f"proj.scrape_{i:02d}") for i in range(24)),
        spec("proj.report"),
        spec(EVIL, args=("<img src=x onerror=alert(2)>",)),
        spec("etl.bulk_export", priority=80),
        spec("ml.train", pool="gpu"),
        at=t - 3 * H,
    )
    for i in range(24):
        web.record(f"proj.scrape_{i:02d}", "success", t - timedelta(minutes=4 * i + 1), 20.0 + i)
    for k in reversed(range(8)):  # oldest first, as they ran
        web.record(
            "proj.report",
            "failure" if k == 5 else "success",
            t - timedelta(minutes=60 * k + 15),
            90.0 + 30 * (k % 3),
            error="<svg onload=alert(3)>" if k == 5 else None,
        )
    # the workers register before their runs' leases, as a worker does
    web.register_worker("w1@node1", slots=4)
    web.register_worker("w2@node2", slots=2)
    web.register_worker("w1@gpunode", slots=1, queues=("gpu",))  # a pool whose slot is busy
    web.record("proj.report", "running", t - 2 * M)
    web.hold_lease("proj.report", progress=0.35)
    web.record(EVIL, "failure", t - 10 * M, 3.0, error="<img src=x onerror=alert(4)>")
    adaptive = make_spec("adaptive", task="crawl.example_org", interval_unit=H)
    broken = make_spec("adaptive", task="crawl.broken_site", interval_unit=H, max_failures=2)
    web.store.upsert_runtime(
        [adaptive, broken], t - 6 * H, last_modified={"crawl.example_org": t - 40 * M}
    )
    for k in (3, 1):  # two uneventful visits: step 4 -> 6
        run = web.record("crawl.example_org", "running", t - k * H)
        web.store.record_run_end(
            run_id=run,
            outcome="success",
            eventful=False,
            ended_at=t - k * H + timedelta(seconds=12),
        )
    for k in (2, 1):
        web.record("crawl.broken_site", "failure", t - k * 20 * M, 2.0, error="HTTP 503")
    web.record("etl.bulk_export", "success", t - 40 * M, 300.0)
    web.store.request_run("etl.bulk_export", t - M, priority=20)
    web.record("ml.train", "running", t - M)
    web.hold_lease("ml.train", node="gpunode")
    leader = RedisLeader(web.leases.client, web.leases.keys, timeout=30.0)
    leader.elect(owner_tag="beat-1", owner_node="beat-host", owner_pid=4242)
    pace = {"window_s": 60, "rounds": 320, "dispatches": 1800, "busy_share": 0.62}
    web.leases.client.set(web.leases.keys.beat_pace(), json.dumps({**pace, "capped_rounds": 0}))


def test_nothing_in_a_name_executes_and_screenshots(
    web: WebWorld, browser: Any, shots: Path
) -> None:
    fleet(web)
    site = web.serve(refresh=2.0)
    browser.get(site.url + "/")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-count=ERROR]"), 10, "overview")
    no_alert(browser)
    assert "beat-host/4242" in (text_of(browser, "#live") or "")
    assert "beat, not the slots, limits the runs per second" in (
        text_of(browser, "[data-beat-pace]") or ""
    )
    assert text_of(browser, "[data-tag=disabled]") == "disabled"  # in "Needs attention"
    assert text_of(browser, "[data-queue=gpu]") == "gpu 1 slot (all busy)"
    assert text_of(browser, "[data-queue=celery]") == "celery 6 slots (1 busy)"
    browser.save_screenshot(str(shots / "overview.png"))
    browser.get(site.url + "/schedules")
    no_alert(browser)
    browser.save_screenshot(str(shots / "schedules.png"))
    table = text_of(browser, "table.schedules") or ""
    assert EVIL in table
    assert "adaptive, every 16h00m now (step 6 of 0-10, unit 1h00m)" in table
    assert "80→20" in table
    assert "disabled" in table
    browser.get(f"{site.url}/schedule?name=crawl.example_org")
    wait_for(lambda: text_of(browser, "[data-ladder]"), 10, "the adaptive schedule's page")
    assert "lister" in (text_of(browser, "table.kv") or "")
    browser.save_screenshot(str(shots / "adaptive.png"))
    browser.get(f"{site.url}/schedule?name=crawl.broken_site")
    wait_for(lambda: text_of(browser, "[data-tag=disabled]"), 10, "the disabled schedule's page")
    assert "2 consecutive failures" in (text_of(browser, "#live") or "")
    browser.save_screenshot(str(shots / "disabled.png"))
    browser.get(f"{site.url}/schedule?name={quote(EVIL)}")
    no_alert(browser)
    assert text_of(browser, "[data-name]") == EVIL
    assert "<img src=x onerror=alert(4)>" in (text_of(browser, "body") or "")
    # The only script on the page is htmx: every name and text stayed text.
    scripts = browser.execute_script("return [...document.scripts].map(s => s.src)")
    assert scripts == [site.url + "/static/htmx.min.js"]
    assert browser.execute_script("return document.images.length") == 0
    browser.get(site.url + "/leases")
    no_alert(browser)
    browser.save_screenshot(str(shots / "leases.png"))
    browser.get(f"{site.url}/schedule?name=proj.report")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.run"), 10, "chart")
    no_alert(browser)
    browser.save_screenshot(str(shots / "schedule.png"))


def test_a_schedule_turning_error_shows_within_one_refresh(web: WebWorld, browser: Any) -> None:
    t = now()
    web.sync(spec("t.soon"), at=t - 3 * H)
    web.record("t.soon", "success", t - H + timedelta(seconds=4), 1.0)
    refresh = 0.5
    site = web.serve(refresh=refresh)
    browser.get(site.url + "/")
    wait_for(lambda: text_of(browser, "[data-count=ERROR]") is not None, 10, "overview")
    assert text_of(browser, "[data-count=ERROR]") == "0"
    browser.execute_script("window.__sameDocument = true")
    error_at = web.store.get("t.soon").stats.last_good_start_at + H  # type: ignore[operator]
    wait_for(lambda: text_of(browser, "[data-count=ERROR]") == "1", 15, "ERROR count 1")
    shown = now()
    assert (shown - error_at).total_seconds() < refresh + 1.5
    assert browser.execute_script("return window.__sameDocument") is True  # no full reload
    assert "t.soon" in (text_of(browser, "#live") or "")


def test_a_live_runs_progress_bar_moves(web: WebWorld, browser: Any) -> None:
    web.sync(spec("t.long"), at=now() - 3 * H)
    web.hold_lease("t.long", progress=0.2)
    site = web.serve(refresh=0.5)
    browser.get(f"{site.url}/schedule?name=t.long")

    def value() -> str:
        return attribute_of(browser, "[data-progress] progress", "value") or ""

    wait_for(lambda: value() in ("20.0", "20"), 10, "progress 20%")
    browser.execute_script("window.__sameDocument = true")
    web.leases.ping("t.long", "tag-t.long", 0.7)
    wait_for(lambda: value() in ("70.0", "70"), 10, "progress 70%")
    assert browser.execute_script("return window.__sameDocument") is True


def test_pause_through_the_page(web: WebWorld, browser: Any, shots: Path) -> None:
    web.sync(spec("t.job"), at=now() - 3 * H)
    site = web.serve(refresh=5.0)
    browser.delete_all_cookies()
    browser.get(site.url + "/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-count=ERROR]"), 10, "signed in")
    browser.get(f"{site.url}/schedule?name=t.job")
    click(browser, "[data-action=pause]")
    notice = wait_for(lambda: text_of(browser, "[data-notice]"), 10, "the action's notice")
    assert "paused t.job" in notice
    assert web.store.get("t.job").paused
    browser.save_screenshot(str(shots / "paused.png"))
    click(browser, "[data-action=resume]")
    wait_for(lambda: not web.store.get("t.job").paused, 10, "resumed")
    browser.delete_all_cookies()


def test_the_restart_grace_shows_in_the_beat_panel(
    web: WebWorld, browser: Any, shots: Path
) -> None:
    """Redis lost the counters of schedules that ran (the fleet's recorded
    tokens are above them) and a grant has just seen the server."""
    fleet(web)
    web.hold_lease("etl.bulk_export")  # the first grant on this server starts the epoch
    site = web.serve(refresh=2.0)
    browser.get(site.url + "/")
    wait_for(lambda: text_of(browser, "[data-restart-grace]"), 10, "the restart grace line")
    line = text_of(browser, "[data-restart-grace]") or ""
    assert line.startswith("Redis restart grace: the server is new since"), line
    assert "ping_timeout + steal_delay" in line
    browser.save_screenshot(str(shots / "restart_grace.png"))
