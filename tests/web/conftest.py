"""Fixtures of the status page tests: the real app (uvicorn on a free port of
127.0.0.1, in a thread) over a real SQLite store and the session's real
Redis-compatible server, crafted schedules, runs, leases and workers, and a
headless Debian Chromium driven through chromedriver."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest
import redis
import uvicorn
from celery import Celery

from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.ops.env import Env
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.web.app import create_app
from celery_dgs.web.server import server_config
from tests.cli.conftest import PREFIX, World
from tests.conftest import IN_CI

TOKEN = "operator-token-0123456789"

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@dataclass
class Reply:
    status: int
    body: str
    headers: dict[str, str]


@dataclass
class Site:
    """A served status page and an HTTP client with its own cookies."""

    url: str
    app: Any
    jar: CookieJar = field(default_factory=CookieJar)

    def _open(self, req: urllib.request.Request) -> Reply:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        try:
            with opener.open(req, timeout=10) as resp:
                return Reply(resp.status, resp.read().decode(), _lower(resp.headers.items()))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read().decode(), _lower(exc.headers.items()))

    def get(self, path: str, **headers: str) -> Reply:
        return self._open(urllib.request.Request(self.url + path, headers=headers))

    def post(self, path: str, data: dict[str, str], **headers: str) -> Reply:
        body = urllib.parse.urlencode(data).encode()
        return self._open(urllib.request.Request(self.url + path, data=body, headers=headers))


def _lower(items: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in items}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server(uvicorn.Server):
    thread: threading.Thread


def serve_app(app: Celery, *, max_age: float = 0.0, refresh: float = 0.5) -> tuple[Site, Server]:
    """The real status page of ``app`` on uvicorn as ``celery dgs web`` serves
    it (:func:`~celery_dgs.web.server.server_config`), on a free port of
    127.0.0.1, in a thread (stop: ``server.should_exit = True``, then join
    ``server.thread``)."""
    asgi = create_app(Env(app=app), refresh=refresh, max_age=max_age)
    # Port 0: the kernel picks a free port as uvicorn binds (no race with other processes).
    server = Server(server_config(asgi, "127.0.0.1", 0, log_level="warning", lifespan="off"))
    server.thread = threading.Thread(target=server.run, daemon=True)
    server.thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert server.thread.is_alive(), "the status page stopped at start"
        assert time.monotonic() < deadline, "the status page did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return Site(f"http://127.0.0.1:{port}", asgi), server


@dataclass
class WebWorld(World):
    registry: WorkerRegistry = field(default=None)  # type: ignore[assignment]
    servers: list[Server] = field(default_factory=list)
    #: Apps served besides the world's own, closed by :meth:`stop`.
    apps: list[Celery] = field(default_factory=list)

    def register_worker(
        self, name: str = "w1@node1", slots: int = 2, queues: tuple[str, ...] = ("celery",)
    ) -> None:
        node = name.partition("@")[2]
        self.registry.register(
            WorkerInfo(
                name=name,
                node=node,
                queues=(*queues, f"{name}.dq2"),  # as a worker registers: its direct queue too
                slots=slots,
                pool="prefork",
                pid=os.getpid(),
            )
        )

    def serve(
        self, *, app: Celery | None = None, max_age: float = 0.0, refresh: float = 0.5
    ) -> Site:
        """Serve the page of ``app`` (the world's, with the token, by default)."""
        site, server = serve_app(app or self.app, max_age=max_age, refresh=refresh)
        self.servers.append(server)
        return site

    def stop(self) -> None:
        for server in self.servers:
            server.should_exit = True
        for server in self.servers:
            server.thread.join(10)
        for app in self.apps:
            app.close()


def make_web_app(
    sqlite_url: str, redis_url: str, token: str | None = None, **settings: Any
) -> Celery:
    """A Celery app with celery-dgs on the test store and Redis; ``settings``:
    more ``dgs_*`` settings."""
    app = Celery("webtest", broker=redis_url, set_as_current=False)
    app.conf.update(
        dgs_database_url=sqlite_url,
        dgs_key_prefix=PREFIX,
        dgs_ping_interval=1.0,
        dgs_ping_timeout=5.0,
        dgs_steal_delay=2.0,
        dgs_web_token=token,
        **settings,
    )
    from celery_dgs.dgs import DGS

    DGS(app, install_worker_hooks=False)
    return app


@pytest.fixture
def web(sqlite_url: str, redis_url: str, redis_client: redis.Redis) -> Iterator[WebWorld]:
    from click.testing import CliRunner

    app = make_web_app(sqlite_url, redis_url, TOKEN)
    store = SqlScheduleStore.open(sqlite_url)
    keys = KeySpace(PREFIX)
    leases = RedisLeases(redis_client, keys, ping_timeout=5.0, steal_delay=2.0)
    world = WebWorld(
        app=app,
        store=store,
        leases=leases,
        runner=CliRunner(),
        registry=WorkerRegistry(redis_client, keys, ttl=60.0),
    )
    yield world
    world.stop()
    store.close()
    app.close()


# -- the browser ----------------------------------------------------------------------


def browser_missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


@contextlib.contextmanager
def chromium(*flags: str) -> Iterator[Any]:
    """A headless Chromium driven through chromedriver, with more command-line
    ``flags``. Missing: skipped locally, a failure under CI=true."""
    missing = browser_missing()
    if missing is not None:
        if IN_CI:
            pytest.fail(f"the browser tests need Chromium under CI: {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="dgs-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1360,1000",
        f"--user-data-dir={profile}",
        *flags,
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session (a new one costs about a second)."""
    with chromium() as driver:
        yield driver


@pytest.fixture
def shots() -> Path:
    """Where the browser tests save their screenshots (DGS_SCREENSHOTS or a temp dir)."""
    path = Path(os.environ.get("DGS_SCREENSHOTS") or tempfile.gettempdir()) / "dgs-web-shots"
    path.mkdir(parents=True, exist_ok=True)
    return path


# htmx swaps the live parts in place: an element found by one WebDriver call may be
# gone by the next. These read what the page shows in one script call instead.


def text_of(driver: Any, selector: str) -> str | None:
    """The text of the first element matching ``selector`` (None: no such element)."""
    return driver.execute_script(  # type: ignore[no-any-return]
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null",
        selector,
    )


def attribute_of(driver: Any, selector: str, name: str) -> str | None:
    """An attribute of the first element matching ``selector`` (None: none or unset)."""
    return driver.execute_script(  # type: ignore[no-any-return]
        "const e = document.querySelector(arguments[0]);"
        "return e ? e.getAttribute(arguments[1]) : null",
        selector,
        name,
    )


def counts_shown(driver: Any) -> dict[str, int]:
    """The overview's ``data-count`` figures."""
    pairs = driver.execute_script(
        "return [...document.querySelectorAll('[data-count]')]"
        ".map(e => [e.getAttribute('data-count'), e.textContent])"
    )
    return {name: int(text) for name, text in pairs}


def click(driver: Any, selector: str) -> None:
    """Click the first element matching ``selector``, found and clicked in one call."""
    driver.execute_script("document.querySelector(arguments[0]).click()", selector)
