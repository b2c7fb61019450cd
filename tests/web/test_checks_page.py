"""Deferred checks on the status page, served for real over a real SQLite store
and Redis: the overview's panel (pending and overdue per task, the most
overdue linked), ``/api/overview``'s ``checks``, a check's own page (pending:
next check and counts; ended: its history), cancelling a check there once
signed in, and in a real browser, with screenshots, a key that would be
markup staying text."""

from __future__ import annotations

import html
import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from selenium.webdriver.common.by import By

from celery_dgs.core.spec import CheckSpec
from celery_dgs.store.check_types import NewCheck
from tests.cli.conftest import now, spec
from tests.e2e.harness import wait_for
from tests.web.conftest import TOKEN, WebWorld, click, text_of

M = timedelta(minutes=1)
ORDER, PAYMENT = "shop.check_order", "shop.check_payment"
EVIL_KEY = "<img src=x onerror=alert(5)>"


def add(web: WebWorld, task: str, key: str, at: datetime) -> str:
    check = CheckSpec(task=task, key=key, kwargs={"order": key}, max_checks=4)
    web.store.add_checks([NewCheck(check, at)], now() - 60 * M)
    return check.name


@pytest.fixture
def checks(web: WebWorld) -> dict[str, str]:
    """Two tasks' checks: two overdue, one ahead, one ended (done after a check)."""
    t = now()
    web.sync(spec("t.plain"), at=t)
    names = {
        "late": add(web, ORDER, "42", t - 30 * M),
        "ahead": add(web, ORDER, "43", t + 30 * M),
        "evil": add(web, PAYMENT, EVIL_KEY, t - 5 * M),
        "done": add(web, ORDER, "7", t - 50 * M),
    }
    run = web.record(names["done"], "running", t - 50 * M)
    web.store.record_run_end(run_id=run, outcome="success", ended_at=t - 49 * M, verdict=None)
    return names


def test_overview_panel_and_json(web: WebWorld, checks: dict[str, str]) -> None:
    site = web.serve()
    page = site.get("/")
    assert page.status == 200
    body = page.body
    assert "data-checks" in body
    assert f'data-check-task="{ORDER}"' in body
    assert 'data-count="checks_pending">3<' in body
    assert 'data-count="checks_overdue">2<' in body
    # The most overdue first, linked to its page; the markup in a key stays text.
    first = body.index("most overdue:")
    assert body.index(quote(checks["late"], safe="")) > first
    assert html.escape(EVIL_KEY) in body
    assert EVIL_KEY not in body
    doc = json.loads(site.get("/api/overview").body)
    assert (doc["checks"]["pending"], doc["checks"]["overdue"]) == (3, 2)
    assert [t["task"] for t in doc["checks"]["tasks"]] == [ORDER, PAYMENT]
    # The checks are not schedules: the counts and the schedules table leave them out.
    assert sum(doc["counts"].values()) == 1
    assert ORDER not in site.get("/schedules").body


def test_no_panel_without_pending_checks(web: WebWorld) -> None:
    web.sync(spec("t.plain"), at=now())
    site = web.serve()
    assert "data-checks" not in site.get("/").body
    assert json.loads(site.get("/api/overview").body)["checks"]["pending"] == 0


def test_a_check_page_pending_ended_and_unknown(web: WebWorld, checks: dict[str, str]) -> None:
    site = web.serve()
    pending = site.get("/schedule?name=" + quote(checks["late"]))
    assert pending.status == 200
    assert 'data-state="pending"' in pending.body
    assert "30m" in pending.body
    assert "late" in pending.body
    assert "0 of at most 4" in pending.body
    assert "not ended yet" in pending.body
    ended = site.get("/schedule?name=" + quote(checks["done"]))
    assert ended.status == 200
    assert 'data-state="ended"' in ended.body
    assert "<b>done</b>" in ended.body
    assert ended.body.count('class="outcome success"') == 2  # the history record and the run
    unknown = site.get("/schedule?name=" + quote(f"{ORDER}@check:999"))
    assert unknown.status == 404
    fragment = site.get("/schedule?name=" + quote(checks["late"]), **{"HX-Request": "true"})
    assert fragment.body.startswith('<div id="live"')


def test_cancel_a_check_through_its_page(web: WebWorld, checks: dict[str, str]) -> None:
    site = web.serve()
    name = checks["late"]
    path = "/schedule?name=" + quote(name)
    assert 'data-action="cancel_check"' not in site.get(path).body  # read-only until signed in
    refused = site.post("/action", {"op": "cancel_check", "name": name, "csrf": "x"})
    assert refused.status == 403
    assert web.store.get(name).active
    assert site.post("/login", {"token": TOKEN}).status == 200
    page = site.get(path).body
    assert 'data-action="cancel_check"' in page
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found
    reply = site.post("/action", {"op": "cancel_check", "name": name, "csrf": found.group(1)})
    assert reply.status == 200
    assert f"cancelled check {html.escape(name)}: its history records it cancelled" in reply.body
    assert 'data-state="ended"' in reply.body
    assert not web.store.get(name).active
    again = site.post("/action", {"op": "cancel_check", "name": name, "csrf": found.group(1)})
    assert f"no pending check {html.escape(name)}; nothing changed" in again.body
    assert 'data-action="cancel_check"' not in again.body  # ended: nothing to cancel


def test_checks_in_a_browser(
    web: WebWorld, checks: dict[str, str], browser: Any, shots: Path
) -> None:
    site = web.serve(refresh=2.0)
    browser.get(site.url + "/")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-checks]"), 10, "checks panel")
    panel = text_of(browser, "[data-checks]") or ""
    assert ORDER in panel
    assert EVIL_KEY in panel  # shown as text
    assert browser.execute_script("return document.images.length") == 0
    browser.save_screenshot(str(shots / "checks-overview.png"))
    browser.get(site.url + "/schedule?name=" + quote(checks["evil"]))
    wait_for(lambda: text_of(browser, "[data-name]") == checks["evil"], 10, "the check's page")
    assert browser.execute_script("return document.images.length") == 0
    browser.save_screenshot(str(shots / "check-pending.png"))
    browser.get(site.url + "/schedule?name=" + quote(checks["done"]))
    wait_for(lambda: text_of(browser, "[data-state]") == "ended", 10, "the ended check's page")
    assert "done" in (text_of(browser, "[data-history]") or "")
    browser.save_screenshot(str(shots / "check-ended.png"))
    browser.delete_all_cookies()
    browser.get(site.url + "/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-checks]"), 10, "signed in")
    browser.get(site.url + "/schedule?name=" + quote(checks["late"]))
    click(browser, "[data-action=cancel_check]")
    notice = wait_for(lambda: text_of(browser, "[data-notice]"), 10, "the action's notice")
    assert f"cancelled check {checks['late']}" in notice
    assert text_of(browser, "[data-state]") == "ended"
    assert "cancelled" in (text_of(browser, "[data-history]") or "")
    browser.save_screenshot(str(shots / "check-cancelled.png"))
    browser.delete_all_cookies()
