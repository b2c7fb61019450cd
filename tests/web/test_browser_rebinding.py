"""DNS rebinding in a real browser: Chromium resolves two foreign names to
127.0.0.1 (``--host-resolver-rules``), as a web site that points its own name
at the operator's machine would make it. Loaded through those names, and
fetched by a script of that origin, the page gives 421 and nothing it shows;
through ``localhost`` the same browser reads it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from tests.cli.conftest import now, spec
from tests.web.conftest import WebWorld, chromium, text_of

H = timedelta(hours=1)
#: Names a foreign site owns; the first is the one of the issue's curl.
FOREIGN = ("127.0.0.1.evil.example", "rebind.evil.example")
SECRET_ARG = "https://reader:pw123-rebind@api.example.com/feed"

FETCH = """
const done = arguments[arguments.length - 1];
fetch(arguments[0]).then(r => r.text().then(t => done([r.status, t])))
    .catch(e => done(["error", String(e)]));
"""


def fetched(driver: Any, path: str) -> list[Any]:
    """``[status, body]`` of a same-origin ``fetch`` by a script of the loaded page."""
    return driver.execute_async_script(FETCH, path)  # type: ignore[no-any-return]


def test_a_rebound_name_reads_nothing(web: WebWorld) -> None:
    web.sync(spec("t.private_feed", args=(SECRET_ARG,)), at=now() - 2 * H)
    site = web.serve()
    port = urlsplit(site.url).port
    rules = ", ".join(f"MAP {name} 127.0.0.1" for name in FOREIGN)
    with chromium(f"--host-resolver-rules={rules}") as driver:
        driver.set_script_timeout(10)
        driver.get(f"http://localhost:{port}/schedule?name=t.private_feed")
        assert text_of(driver, "[data-name]") == "t.private_feed"  # the page itself works
        for name in FOREIGN:
            origin = f"http://{name}:{port}"
            driver.get(origin + "/schedule?name=t.private_feed")
            body = text_of(driver, "body") or ""
            assert "misdirected request" in body, (name, body[:300])
            assert "t.private_feed" not in body
            # What the foreign site's script would do once its name points here.
            for path in ("/api/overview", "/schedules", "/schedule?name=t.private_feed"):
                status, text = fetched(driver, origin + path)
                assert status == 421, (name, path, status)
                assert "t.private_feed" not in text
                assert "api.example.com" not in text
