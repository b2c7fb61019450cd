"""The status page's guards one by one: which ``Host`` names count as this
machine, the settings that name other hosts and proxies, the server-side
sessions, the sign-in backoff and the scrubbing of text and arguments."""

from __future__ import annotations

import pytest

from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings
from celery_dgs.web.hosts import HostPolicy, host_name, is_loopback_name
from celery_dgs.web.scrub import redact_value, scrub
from celery_dgs.web.sessions import Sessions
from celery_dgs.web.throttle import MAX_WAIT_S, LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_loopback_names_are_addresses_not_prefixes() -> None:
    for name in ("localhost", "127.0.0.1", "127.200.1.9", "::1", "[::1]"):
        assert is_loopback_name(name), name
    for name in ("127.0.0.1.evil.example", "127.evil", "localhost.evil", "0.0.0.0", "10.0.0.1"):
        assert not is_loopback_name(name), name


def test_host_headers_are_parsed_strictly() -> None:
    assert host_name("LocalHost:8377") == "localhost"
    assert host_name("[::1]:8377") == "::1"
    assert host_name("dgs.example.com") == "dgs.example.com"
    for bad in ("", None, "a@127.0.0.1", "127.0.0.1/x", "127.0.0.1:80:80", "[::1", "h:port", "::1"):
        assert host_name(bad) is None, bad
    policy = HostPolicy(["DGS.example.com", "[fd00::5]"])
    assert policy.allows("dgs.example.com:443")
    assert policy.allows("[fd00::5]:8377")
    assert not policy.allows("dgs.example.com.evil.example")


def test_the_web_settings_are_checked() -> None:
    settings = DgsSettings.from_conf(
        {
            "dgs_web_allowed_hosts": "dgs.example.com, 10.0.0.5",
            "dgs_web_trusted_proxies": ["127.0.0.1", "10.0.0.0/8"],
        }
    )
    assert settings.web_allowed_hosts == ("dgs.example.com", "10.0.0.5")
    assert settings.web_trusted_proxies == ("127.0.0.1", "10.0.0.0/8")
    assert DgsSettings().web_session_lifetime == 8 * 3600
    for key, value, words in (
        ("dgs_web_allowed_hosts", ["https://dgs.example.com"], "not a host name"),
        ("dgs_web_allowed_hosts", ["*.example.com"], "not a host name"),
        ("dgs_web_allowed_hosts", 5, "must be a list"),
        ("dgs_web_trusted_proxies", ["proxy.local"], "not an IP address"),
        ("dgs_web_session_lifetime", 0, "dgs_web_session_lifetime"),
    ):
        with pytest.raises(SettingsError, match=words):
            DgsSettings.from_conf({key: value})


def test_sessions_expire_and_end() -> None:
    clock = Clock()
    sessions = Sessions(60.0, clock)
    a, b = sessions.start(), sessions.start()
    assert sessions.alive(a)
    sessions.end(a)
    assert not sessions.alive(a)
    assert sessions.alive(b)
    clock.now += 60.0
    assert not sessions.alive(b)
    assert not sessions.alive("made-up")


def test_the_backoff_doubles_up_to_a_minute_and_clears_on_success() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock)
    assert throttle.wait("10.0.0.1") == 0
    waits = [throttle.failed("10.0.0.1") for _ in range(9)]
    assert waits == [1, 2, 4, 8, 16, 32, MAX_WAIT_S, MAX_WAIT_S, MAX_WAIT_S]
    assert throttle.wait("10.0.0.1") == MAX_WAIT_S
    assert throttle.wait("10.0.0.2") == 0
    clock.now += 30
    assert throttle.wait("10.0.0.1") == 30
    throttle.succeeded("10.0.0.1")
    assert throttle.wait("10.0.0.1") == 0


def test_text_is_scrubbed_of_credentials() -> None:
    cases = {
        "Error connecting to redis://:hunter22@h:6379": "Error connecting to redis://:***@h:6379",
        "api_key: sk_live_abc and more": "api_key: *** and more",
        'body {"password": "x1", "user": "bob"}': 'body {"password": "***", "user": "bob"}',
        "Authorization: Bearer abc.def": "Authorization: Bearer ***",
        "DB_PASSWORD=xyz; next": "DB_PASSWORD=***; next",
        "the configured one: s3cret here": "the configured one: *** here",
        "HTTP 503 from https://api.example.com/x": "HTTP 503 from https://api.example.com/x",
        "failed (redis://u:p@ss@h:6379/0).": "failed (redis://u:***@h:6379/0).",
        "at redis://h:6379/0?password=pw&db=1": "at redis://h:6379/0?password=***&db=1",
        "sentinel://:a1@h1:1;sentinel://:b2@h2:2 down": (
            "sentinel://:***@h1:1;sentinel://:***@h2:2 down"
        ),
        "user@host:6379 no password": "user@host:6379 no password",
    }
    for text, shown in cases.items():
        assert scrub(text, ["s3cret"]) == shown


def test_arguments_are_redacted_by_key_and_by_url() -> None:
    value = [
        "https://u:pw@h/x",
        {"api_key": "sk_1", "limit": 5, "auth": {"token": "t"}, "empty_password": ""},
        ("plain", 3),
    ]
    assert redact_value(value, []) == [
        "https://u:***@h/x",
        {"api_key": "***", "limit": 5, "auth": "***", "empty_password": ""},
        ["plain", 3],
    ]
