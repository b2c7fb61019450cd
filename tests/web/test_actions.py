"""Operator actions on the status page: the CLI's own functions, only with
the token (a signed-in session) AND the CSRF value, never from another
origin; refused with 403 and nothing changed otherwise; each one logged
with what changed."""

from __future__ import annotations

import html
import logging
import re
from datetime import timedelta

import pytest

from tests.cli.conftest import now, spec
from tests.web.conftest import TOKEN, Site, WebWorld, make_web_app

H = timedelta(hours=1)


@pytest.fixture
def site(web: WebWorld) -> Site:
    web.sync(spec("t.job"), at=now() - 2 * H)
    return web.serve()


def sign_in(site: Site, token: str = TOKEN) -> str:
    """Sign in; the CSRF value the schedule page's forms carry."""
    reply = site.post("/login", {"token": token})
    assert reply.status == 200, reply.body  # redirected to the overview
    page = site.get("/schedule?name=t.job").body
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "no action form after signing in"
    return found.group(1)


def test_pause_run_resume_through_the_page(
    web: WebWorld, site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    csrf = sign_in(site)
    with caplog.at_level(logging.INFO, logger="celery_dgs.web"):
        reply = site.post("/action", {"op": "pause", "name": "t.job", "csrf": csrf})
        assert reply.status == 200
        assert "paused t.job (was not running)" in reply.body
        assert web.store.get("t.job").paused
        assert "Resume" in reply.body
        again = site.post("/action", {"op": "pause", "name": "t.job", "csrf": csrf})
        assert "t.job was already paused; nothing changed" in again.body
        site.post("/action", {"op": "run", "name": "t.job", "csrf": csrf})
        assert web.store.get("t.job").run_requested_at is not None
        site.post("/action", {"op": "resume", "name": "t.job", "csrf": csrf})
        assert not web.store.get("t.job").paused
    logged = [r.getMessage() for r in caplog.records if r.name == "celery_dgs.web"]
    assert any("pause of 't.job'" in m and "paused t.job (was not running)" in m for m in logged)
    assert any("run of 't.job'" in m and "requested a run of t.job" in m for m in logged)
    assert any("resume of 't.job'" in m and "resumed t.job" in m for m in logged)


def test_an_unknown_action_is_a_bad_request_and_changes_nothing(web: WebWorld, site: Site) -> None:
    csrf = sign_in(site)
    reply = site.post("/action", {"op": "frobnicate", "name": "t.job", "csrf": csrf})
    assert reply.status == 400
    assert "unknown action" in reply.body
    assert not web.store.get("t.job").paused
    signed_out = site.post("/action", {"op": "frobnicate", "name": "t.job", "csrf": "x"})
    assert signed_out.status == 403, "without the CSRF value: refused, whatever the action"


def test_cancel_through_the_page_aims_at_the_live_run(web: WebWorld, site: Site) -> None:
    token = web.hold_lease("t.job", progress=0.2)
    csrf = sign_in(site)
    page = site.get("/schedule?name=t.job").body
    assert 'data-action="cancel"' in page
    reply = site.post(
        "/action", {"op": "cancel", "name": "t.job", "csrf": csrf, "token": str(token + 1)}
    )
    assert "is not running" in reply.body
    lease = web.leases.get("t.job")
    assert lease is not None
    assert not lease.cancel_requested
    reply = site.post(
        "/action", {"op": "cancel", "name": "t.job", "csrf": csrf, "token": str(token)}
    )
    assert "requested cancel of t.job's run" in html.unescape(reply.body)
    lease = web.leases.get("t.job")
    assert lease is not None
    assert lease.cancel_requested


@pytest.mark.parametrize(
    "case", ["no session", "no csrf", "wrong csrf", "other origin", "wrong token"]
)
def test_refused_without_token_and_csrf(web: WebWorld, site: Site, case: str) -> None:
    form = {"op": "pause", "name": "t.job"}
    headers: dict[str, str] = {}
    if case == "wrong token":
        assert site.post("/login", {"token": TOKEN + "x"}).status == 403
        form["csrf"] = "0" * 64
    elif case != "no session":
        csrf = sign_in(site)
        wrong = csrf[:-1] + ("1" if csrf.endswith("0") else "0")  # never the right one
        form["csrf"] = {"no csrf": "", "wrong csrf": wrong, "other origin": csrf}[case]
        if case == "other origin":
            headers["Origin"] = "http://evil.example"
    reply = site.post("/action", form, **headers)
    assert reply.status == 403
    assert "nothing changed" in reply.body
    assert not web.store.get("t.job").paused


def test_read_only_without_a_token(web: WebWorld, sqlite_url: str, redis_url: str) -> None:
    web.sync(spec("t.job"), at=now() - 2 * H)
    app = make_web_app(sqlite_url, redis_url, token=None)
    try:
        site = web.serve(app=app)
        page = site.get("/schedule?name=t.job").body
        assert "read-only" in page
        assert 'name="csrf"' not in page
        assert site.post("/login", {"token": TOKEN}).status == 403
        reply = site.post("/action", {"op": "pause", "name": "t.job", "csrf": "x"})
        assert reply.status == 403
        assert "read-only" in reply.body
        assert not web.store.get("t.job").paused
    finally:
        app.close()


def test_an_unknown_schedule_or_an_inactive_one_changes_nothing(web: WebWorld, site: Site) -> None:
    csrf = sign_in(site)
    assert site.post("/action", {"op": "pause", "name": "nope", "csrf": csrf}).status == 404
    web.sync(spec("t.other"), at=now())  # t.job is no longer declared: inactive
    reply = site.post("/action", {"op": "run", "name": "t.job", "csrf": csrf})
    assert reply.status in (404, 409)
    assert web.store.get("t.job").run_requested_at is None


def test_the_token_setting_is_validated() -> None:
    from celery_dgs.errors import SettingsError
    from celery_dgs.settings import DgsSettings

    with pytest.raises(SettingsError, match="dgs_web_token must be a string of at least 16"):
        DgsSettings(web_token="short")
    with pytest.raises(SettingsError, match="dgs_web_token"):
        DgsSettings(web_token=1234567890123456789)  # type: ignore[arg-type]
    assert DgsSettings(web_token=TOKEN).web_token == TOKEN


def test_a_non_ascii_cookie_or_csrf_value_is_refused_not_an_error(
    web: WebWorld, site: Site
) -> None:
    """Whatever a client sends as its session cookie or CSRF value, the page
    answers (the cookie is ignored; the action is refused with 403)."""
    csrf = sign_in(site)
    reply = site.post("/action", {"op": "pause", "name": "t.job", "csrf": csrf + "é"})
    assert reply.status == 403
    assert not web.store.get("t.job").paused
    page = site.get("/", Cookie="dgs_web_session=abc.%C3%A9; other=1")
    assert page.status == 200
    raw = site.get("/", Cookie="dgs_web_session=abc.\u00e9")
    assert raw.status == 200


def test_a_page_bound_to_this_machine_refuses_other_host_names(site: Site) -> None:
    """DNS rebinding: a web site that points its own name at 127.0.0.1 must not
    read the page through the operator's browser."""
    port = site.url.rsplit(":", 1)[1].rstrip("/")
    assert site.get("/", Host=f"localhost:{port}").status == 200
    refused = site.get("/schedules", Host=f"rebind.example:{port}")
    assert refused.status == 421
    assert "t.job" not in refused.body


def test_a_disabled_schedule_is_resumed_through_the_page(web: WebWorld, site: Site) -> None:
    from celery_dgs.core.spec_build import make_spec

    web.store.upsert_runtime(
        [make_spec("adaptive", task="crawl.broken", interval_unit=H, max_failures=1)], now() - 2 * H
    )
    web.record("crawl.broken", "failure", now() - H / 6, error="HTTP 500")
    assert web.store.get("crawl.broken").disabled_reason is not None
    csrf = sign_in(site)
    page = site.get("/schedule?name=crawl.broken").body
    assert 'data-action="resume"' in page
    assert 'data-action="pause"' not in page
    reply = site.post("/action", {"op": "resume", "name": "crawl.broken", "csrf": csrf})
    assert "resumed crawl.broken" in reply.body
    assert web.store.get("crawl.broken").disabled_reason is None
    assert 'data-action="pause"' in reply.body


def test_run_now_in_a_priority_class(web: WebWorld, site: Site) -> None:
    csrf = sign_in(site)
    for bad in ("100", "-1", "x", "1.5"):
        reply = site.post("/action", {"op": "run", "name": "t.job", "csrf": csrf, "priority": bad})
        assert reply.status == 409
        assert (
            f"t.job: the run&#39;s priority must be a whole number from 0 (first) to 99 "
            f"(last), got &#39;{bad}&#39;"
        ) in reply.body
        assert web.store.get("t.job").run_requested_at is None
    reply = site.post("/action", {"op": "run", "name": "t.job", "csrf": csrf, "priority": "30"})
    assert "in priority class 30" in reply.body
    stored = web.store.get("t.job")
    assert stored.run_requested_at is not None
    assert stored.run_requested_priority == 30
    site.post("/action", {"op": "run", "name": "t.job", "csrf": csrf, "priority": ""})
    assert web.store.get("t.job").run_requested_priority is None  # class 0, as before
