"""The status page left open on a machine others use, tried over HTTP as an
attacker would: foreign ``Host`` names (DNS rebinding) get 421; an anonymous
reader sees no secret in arguments, error texts or the 503 page; a huge body
gets 413 before it is read and a slow request is cut; sessions expire and end
at sign-out (which needs the CSRF value); wrong tokens meet a backoff; odd
paging and token values give 400; forwarded headers count only from a named
proxy."""

from __future__ import annotations

import http.client
import logging
import re
import socket
import time
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest

from celery_dgs.embedded import free_port
from celery_dgs.web.limits import MAX_BODY_BYTES
from celery_dgs.web.server import REQUEST_TIMEOUT_S
from tests.cli.conftest import now, spec
from tests.web.conftest import TOKEN, Reply, Site, WebWorld, make_web_app

H = timedelta(hours=1)
M = timedelta(minutes=1)


def serve_with(web: WebWorld, sqlite_url: str, redis_url: str, **settings: Any) -> Site:
    """The page of an app with the token and ``settings`` (closed with the world)."""
    app = make_web_app(sqlite_url, redis_url, TOKEN, **settings)
    web.apps.append(app)
    return web.serve(app=app)


def sign_in(site: Site, name: str = "t.job", **headers: str) -> str:
    """Sign in; the CSRF value of the schedule page's forms."""
    reply = site.post("/login", {"token": TOKEN}, **headers)
    assert reply.status == 200, reply.body
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', site.get(f"/schedule?name={name}").body)
    assert found, "no action form after signing in"
    return found.group(1)


def session_cookie(site: Site) -> str:
    return next(c.value for c in site.jar if c.name == "dgs_web_session")


def post_unfollowed(site: Site, path: str, form: dict[str, str], **headers: str) -> Any:
    """POST ``form`` without following a redirect: the response itself."""
    parts = urlsplit(site.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    body = urlencode(form)
    conn.request(
        "POST",
        path,
        body,
        {"Content-Type": "application/x-www-form-urlencoded", **headers},
    )
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def raw_exchange(site: Site, request: bytes, wait: float = 5.0) -> bytes:
    """Send ``request`` bytes as they are; what the server answers until it
    closes the connection or ``wait`` seconds pass."""
    parts = urlsplit(site.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait) as sock:
        sock.sendall(request)
        received = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            received += chunk
        return received


# -- 1. DNS rebinding ---------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1.evil.example",
        "127.0.0.1.evil.example:{port}",
        "evil.example:{port}",
        "localhost.evil.example:{port}",
        "127.evil.example",
        "[::1].evil.example",
        "evil.example@127.0.0.1:{port}",
        "",
    ],
)
def test_a_foreign_host_name_gets_421(web: WebWorld, host: str) -> None:
    web.sync(spec("t.job"), at=now() - H)
    site = web.serve()
    port = str(urlsplit(site.url).port)
    reply = site.get("/api/overview", Host=host.format(port=port))
    assert reply.status == 421
    assert "t.job" not in reply.body
    assert "counts" not in reply.body


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "127.8.9.10:{port}", "[::1]:{port}"],
)
def test_loopback_names_are_answered(web: WebWorld, host: str) -> None:
    site = web.serve()
    port = str(urlsplit(site.url).port)
    assert site.get("/api/overview", Host=host.format(port=port)).status == 200


def test_other_names_only_from_dgs_web_allowed_hosts(
    web: WebWorld, sqlite_url: str, redis_url: str
) -> None:
    site = serve_with(web, sqlite_url, redis_url, dgs_web_allowed_hosts=["dgs.example.com"])
    assert site.get("/api/overview", Host="dgs.example.com:8377").status == 200
    assert site.get("/api/overview", Host="DGS.example.com").status == 200
    assert site.get("/api/overview", Host="other.example.com").status == 421
    assert site.get("/api/overview", Host="dgs.example.com.evil.example").status == 421


def test_a_non_loopback_bind_needs_the_allow_list(web: WebWorld) -> None:
    result = web.invoke("web", "--bind", f"0.0.0.0:{free_port()}")
    assert result.exit_code == 4, result.output
    assert "dgs_web_allowed_hosts" in result.output
    assert len(result.output.strip().splitlines()) == 1


# -- 2. what an anonymous reader sees ------------------------------------------------

URL_PASSWORD = "pw123-url-secret"
API_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
REDIS_PASSWORD = "RedisPW-9f8e7d6c"


@pytest.fixture
def secret_world(web: WebWorld) -> WebWorld:
    web.sync(
        spec(
            "t.feed",
            args=(f"https://reader:{URL_PASSWORD}@api.example.com/feed",),
            kwargs={"api_key": API_KEY, "limit": 5},
        ),
        at=now() - 2 * H,
    )
    web.record(
        "t.feed",
        "failure",
        now() - M,
        error=f"ConnectionError: Error connecting to redis://:{REDIS_PASSWORD}@127.0.0.1:6379/0",
    )
    return web


def test_an_anonymous_reader_sees_no_secret(secret_world: WebWorld) -> None:
    site = secret_world.serve()
    for path in ("/", "/schedules", "/schedule?name=t.feed", "/leases", "/api/overview"):
        reply = site.get(path)
        assert reply.status == 200, path
        for secret in (URL_PASSWORD, API_KEY, REDIS_PASSWORD):
            assert secret not in reply.body, (path, secret)
    page = site.get("/schedule?name=t.feed").body
    assert "https://reader:***@api.example.com/feed" in page  # the shape stays readable
    # The arguments as JSON, as the API and `celery dgs add` take them.
    assert "kwargs {&#34;api_key&#34;: &#34;***&#34;, &#34;limit&#34;: 5}" in page
    assert "redis://:***@127.0.0.1:6379/0" in page
    assert "redis://:***@127.0.0.1:6379/0" in site.get("/leases").body


def test_a_signed_in_operator_sees_the_arguments_but_no_error_secret(
    secret_world: WebWorld,
) -> None:
    site = secret_world.serve()
    sign_in(site, "t.feed")
    page = site.get("/schedule?name=t.feed").body
    assert URL_PASSWORD in page
    assert API_KEY in page
    assert REDIS_PASSWORD not in page


def test_the_503_page_names_no_server(web: WebWorld, sqlite_url: str) -> None:
    port = free_port()
    app = make_web_app(sqlite_url, f"redis://:{REDIS_PASSWORD}@127.0.0.1:{port}/0")
    try:
        reply = web.serve(app=app).get("/")
        assert reply.status == 503
        assert "Redis could not be read (ConnectionError)" in reply.body
        assert str(port) not in reply.body
        assert "127.0.0.1" not in reply.body
        assert REDIS_PASSWORD not in reply.body
    finally:
        app.close()


# -- 3. bounded requests -------------------------------------------------------------


def test_a_huge_body_gets_413_before_it_is_sent(web: WebWorld) -> None:
    site = web.serve()
    host = urlsplit(site.url).netloc.encode()
    head = (
        b"POST /login HTTP/1.1\r\nHost: " + host + b"\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
    )
    # 300 MB announced, none of it sent: the answer comes at once.
    answer = raw_exchange(site, head + b"Content-Length: 300000000\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # Chunked, without a length: refused once past the limit.
    chunk = b"a" * 8192
    body = b"".join(
        b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY_BYTES // 8192 + 2)
    )
    answer = raw_exchange(site, head + b"Transfer-Encoding: chunked\r\n\r\n" + body)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # Headers past 16 KiB: refused too.
    answer = raw_exchange(site, b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nX-Big: " + b"a" * 20000)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert site.get("/").status == 200  # the page goes on serving


def test_a_slow_request_is_cut(web: WebWorld) -> None:
    site = web.serve()
    parts = urlsplit(site.url)
    started = time.monotonic()
    closed_after = None
    with socket.create_connection((parts.hostname, parts.port), timeout=1) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        while time.monotonic() - started < REQUEST_TIMEOUT_S + 8:
            try:
                sock.sendall(b"X-Slow: a\r\n")  # one header line every half second
                if sock.recv(1024) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None, "a request dripping its headers stayed open"
    assert REQUEST_TIMEOUT_S - 1 < closed_after < REQUEST_TIMEOUT_S + 3


def test_an_idle_kept_alive_connection_is_closed(web: WebWorld) -> None:
    site = web.serve()
    parts = urlsplit(site.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=15) as sock:
        sock.sendall(b"GET /static/style.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        started = time.monotonic()
        while sock.recv(65536):
            pass
        assert time.monotonic() - started < 10


# -- 4. sessions ---------------------------------------------------------------------


def test_a_session_expires_on_the_server(web: WebWorld, sqlite_url: str, redis_url: str) -> None:
    web.sync(spec("t.job"), at=now() - H)
    # Long enough to sign in and read a page on a busy machine.
    lifetime = 5.0
    site = serve_with(web, sqlite_url, redis_url, dgs_web_session_lifetime=lifetime)
    # The page's first read of the state is made before the session starts.
    assert site.get("/schedule?name=t.job").status == 200
    csrf = sign_in(site)
    signed_in = time.monotonic()  # the session started before this
    cookie = next(c for c in site.jar if c.name == "dgs_web_session")
    assert cookie.expires is not None  # Max-Age set: the browser drops it too
    value = cookie.value or ""
    time.sleep(max(0.0, signed_in + lifetime + 0.2 - time.monotonic()))
    # The cookie replayed after its lifetime is worth nothing, whatever it says.
    reply = site.post(
        "/action",
        {"op": "pause", "name": "t.job", "csrf": csrf},
        Cookie=f"dgs_web_session={value}",
    )
    assert reply.status == 403
    assert not web.store.get("t.job").paused


def test_sign_out_ends_the_session_and_needs_the_csrf_value(web: WebWorld) -> None:
    web.sync(spec("t.job"), at=now() - H)
    site = web.serve()
    csrf = sign_in(site)
    value = session_cookie(site)
    assert site.post("/logout", {}).status == 403  # no CSRF value: still signed in
    assert site.post("/logout", {"csrf": "0" * 64}).status == 403
    assert 'action="/logout"' in site.get("/").body
    assert site.post("/logout", {"csrf": csrf}).status == 200  # redirected to the overview
    replay = Site(site.url, site.app)
    reply = replay.post(
        "/action",
        {"op": "pause", "name": "t.job", "csrf": csrf},
        Cookie=f"dgs_web_session={value}",
    )
    assert reply.status == 403
    assert not web.store.get("t.job").paused


# -- 5. the smaller points -----------------------------------------------------------


def test_wrong_tokens_meet_a_per_client_backoff(
    web: WebWorld, sqlite_url: str, redis_url: str
) -> None:
    site = serve_with(web, sqlite_url, redis_url, dgs_web_trusted_proxies=["127.0.0.1"])
    me, other = {"X-Forwarded-For": "198.51.100.7"}, {"X-Forwarded-For": "198.51.100.8"}
    assert site.post("/login", {"token": "wrong-token-0123456789"}, **me).status == 403
    # Even the right token waits now, from that client only.
    blocked = site.post("/login", {"token": TOKEN}, **me)
    assert blocked.status == 429
    assert blocked.headers["retry-after"] == "1"
    assert "try again in 1 s" in blocked.body
    assert site.post("/login", {"token": TOKEN}, **other).status == 200
    time.sleep(1.1)
    assert site.post("/login", {"token": "wrong-token-0123456789"}, **me).status == 403
    assert site.post("/login", {"token": TOKEN}, **me).headers["retry-after"] == "2"
    started, answers = time.monotonic(), set()
    while time.monotonic() - started < 1.0:  # guessing as fast as it can: never compared
        answers.add(site.post("/login", {"token": "guess-0123456789abcdef"}, **me).status)
    assert answers == {429}
    assert site.post("/login", {"token": TOKEN}, **me).status == 429
    time.sleep(2.1)
    assert site.post("/login", {"token": TOKEN}, **me).status == 200


@pytest.mark.parametrize("page", ["²", "9" * 4301, "abc", "-1", "1e3"])
def test_odd_page_values_are_400(web: WebWorld, page: str) -> None:
    site = web.serve()
    reply = site.get(f"/schedules?page={quote(page)}")
    assert reply.status == 400
    assert reply.body.count("\n") == 1
    assert reply.body.startswith("page must be a whole number")


def test_a_page_past_the_end_shows_the_last(web: WebWorld) -> None:
    web.sync(spec("t.job"), at=now() - H)
    reply = web.serve().get("/schedules?page=" + "9" * 12)
    assert reply.status == 200
    assert "t.job" in reply.body


@pytest.mark.parametrize("token", ["²", "9" * 4301, "x1"])
def test_an_odd_cancel_token_is_400(web: WebWorld, token: str) -> None:
    web.sync(spec("t.job"), at=now() - H)
    web.hold_lease("t.job")
    site = web.serve()
    csrf = sign_in(site)
    reply: Reply = site.post(
        "/action", {"op": "cancel", "name": "t.job", "csrf": csrf, "token": token}
    )
    assert reply.status == 400
    assert "t.job: a run's token is a whole number" in reply.body
    lease = web.leases.get("t.job")
    assert lease is not None
    assert not lease.cancel_requested


def refused_sign_in_logged(caplog: pytest.LogCaptureFixture) -> str:
    return next(
        r.getMessage()
        for r in caplog.records
        if r.name == "celery_dgs.web" and "refused sign-in" in r.getMessage()
    )


def test_forwarded_headers_count_only_from_a_named_proxy(
    web: WebWorld, sqlite_url: str, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    spoof = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}
    site = web.serve()
    proxied = serve_with(web, sqlite_url, redis_url, dgs_web_trusted_proxies=["127.0.0.0/8"])
    # Behind a TLS proxy the session cookie is marked Secure; on plain HTTP it is not.
    for served, secure in ((proxied, True), (site, False)):
        response = post_unfollowed(served, "/login", {"token": TOKEN}, **spoof)
        assert response.status == 303
        cookie = response.getheader("set-cookie")
        assert "dgs_web_session=" in cookie
        assert ("Secure" in cookie) is secure
    with caplog.at_level(logging.INFO, logger="celery_dgs.web"):
        site.post("/login", {"token": "wrong-token-0123456789"}, **spoof)
    logged = refused_sign_in_logged(caplog)
    assert "from 127.0.0.1:" in logged
    assert "203.0.113.9" not in logged
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="celery_dgs.web"):
        proxied.post("/login", {"token": "wrong-token-0123456789"}, **spoof)
    assert "from 203.0.113.9:" in refused_sign_in_logged(caplog)
