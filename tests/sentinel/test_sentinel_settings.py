"""Configuring a ``sentinel://`` dgs_redis_url: the URL as Celery and kombu read
it, dgs_redis_master_name and dgs_redis_sentinel_kwargs, and the one line each
misconfiguration gets (no server needed here)."""

from __future__ import annotations

import pytest

from celery_dgs.connection import redis_from_url
from celery_dgs.errors import SettingsError
from celery_dgs.failures import redact_url
from celery_dgs.sentinel import parse_sentinel_url
from celery_dgs.settings import DgsSettings

URL = "sentinel://:s3cret@h1:26380/2;sentinel://h2;sentinel://h3:26382"


def test_the_url_lists_the_sentinels_and_the_first_part_names_the_primary_s_auth_and_db() -> None:
    sentinels, primary = parse_sentinel_url(URL)
    assert sentinels == [("h1", 26380), ("h2", 26379), ("h3", 26382)]
    assert primary == {"password": "s3cret", "db": 2}


def test_tls_to_the_primary_is_ssl_true_in_the_url() -> None:
    _, primary = parse_sentinel_url("sentinel://h1:26379/0?ssl=true&ssl_cert_reqs=required")
    assert primary["ssl"] is True
    assert primary["ssl_cert_reqs"] == "required"
    with pytest.raises(SettingsError, match="TLS options ssl_ca_certs need ssl=true"):
        parse_sentinel_url("sentinel://h1:26379/0?ssl_ca_certs=/ca.pem")


def test_settings_accept_a_sentinel_url_with_a_master_name() -> None:
    settings = DgsSettings.from_conf(
        {
            "dgs_redis_url": URL,
            "dgs_redis_master_name": "mymaster",
            "dgs_redis_sentinel_kwargs": {"password": "sentinel-pw"},
        }
    )
    assert settings.redis_master_name == "mymaster"
    assert settings.resolved_redis_url("redis://broker") == URL


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (
            {"dgs_redis_url": URL},
            "dgs_redis_url is a sentinel:// URL: set dgs_redis_master_name to the primary's "
            "name the sentinels monitor (SENTINEL MONITOR <name> ...)",
        ),
        (
            {"dgs_redis_url": "redis://h:6379/0", "dgs_redis_master_name": "m"},
            "dgs_redis_master_name is set, but dgs_redis_url is not a sentinel://host:port URL "
            "(list the sentinels there, separated by ';')",
        ),
        (
            {"dgs_redis_master_name": "m"},
            "dgs_redis_master_name is set, but dgs_redis_url is not a sentinel://host:port URL",
        ),
        (
            {"dgs_redis_url": "redis://h", "dgs_redis_sentinel_kwargs": {"password": "x"}},
            "dgs_redis_sentinel_kwargs is set, but dgs_redis_url is not a sentinel://",
        ),
        (
            {"dgs_redis_url": URL, "dgs_redis_master_name": "  "},
            "dgs_redis_master_name must be the primary's name the sentinels monitor, got '  '",
        ),
        (
            {"dgs_redis_url": URL, "dgs_redis_master_name": "m", "dgs_redis_sentinel_kwargs": "pw"},
            "dgs_redis_sentinel_kwargs must be a mapping of connection options for the sentinels",
        ),
        (
            {"dgs_redis_url": URL + ";redis://h4:6379", "dgs_redis_master_name": "m"},
            "dgs_redis_url part 4 (redis://h4:6379) is not a sentinel://host:port URL",
        ),
        (
            {
                "dgs_redis_url": "sentinel://:pw@h1:26379;sentinel://:pw2@:26379",
                "dgs_redis_master_name": "m",
            },
            "dgs_redis_url part 2 (sentinel://:**@:26379) names no host",
        ),
        (
            {
                "dgs_redis_url": URL,
                "dgs_redis_master_name": "m",
                "dgs_redis_cluster": True,
                "dgs_redis_cluster_hash_tag": True,
            },
            "dgs_redis_cluster and a sentinel:// dgs_redis_url exclude each other",
        ),
    ],
)
def test_each_misconfiguration_is_one_line_naming_the_setting(
    conf: dict[str, object], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        DgsSettings.from_conf(conf)
    assert str(raised.value).startswith(message), str(raised.value)
    assert "\n" not in str(raised.value)
    assert "s3cret" not in str(raised.value)
    assert ":pw@" not in str(raised.value)


def test_the_client_needs_the_master_name() -> None:
    with pytest.raises(SettingsError, match="set dgs_redis_master_name"):
        redis_from_url(URL)
    with pytest.raises(SettingsError, match="exclude each other"):
        redis_from_url(URL, cluster=True, sentinel_master="m")


def test_every_password_of_a_sentinel_url_is_redacted() -> None:
    assert redact_url("sentinel://:a@h1:1/0;sentinel://:b@h2:2") == (
        "sentinel://:**@h1:1/0;sentinel://:**@h2:2"
    )


def test_the_client_s_connections_are_tls_with_ssl_true() -> None:
    """Nothing connects before the first command: the pool's connection class
    is what ``ssl=true`` chose (the suite's server has no TLS to try it on)."""
    from redis.connection import SSLConnection

    plain = redis_from_url("sentinel://h1:26379/0", sentinel_master="m")
    tls = redis_from_url("sentinel://h1:26379/0?ssl=true&ssl_cert_reqs=none", sentinel_master="m")
    assert not issubclass(plain.connection_pool.connection_class, SSLConnection)
    assert issubclass(tls.connection_pool.connection_class, SSLConnection)
    assert tls.connection_pool.connection_kwargs["ssl_cert_reqs"] == "none"
