"""Pure tests: key layout, URL validation, and strict parsing of stored hashes."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest
from redis.exceptions import ResponseError

from celery_dgs.connection import redis_from_url
from celery_dgs.dispatches import DispatchRecord
from celery_dgs.errors import MalformedDataError, SettingsError
from celery_dgs.keys import KeySpace
from celery_dgs.leases import LeaseInfo
from celery_dgs.leases.codec import (
    HashRecord,
    datetime_to_ms,
    hash_reply,
    ms_to_datetime,
    records_from_reply,
    seconds_to_ms,
)
from celery_dgs.leases.lua import ScriptSet
from celery_dgs.registry import WorkerInfo

GOOD = {
    b"format": b"1",
    b"schedule": b"s",
    b"owner_node": b"n",
    b"owner_name": b"celery@n",
    b"owner_tag": b"A",
    b"started_at": b"1700000000000",
    b"last_ping_at": b"1700000000500",
    b"token": b"7",
    b"progress": b"",
    b"cancel_requested": b"0",
    b"dispatch_id": b"",
}


def test_key_layout() -> None:
    k = KeySpace()
    assert k.lease("a:b") == "dgs:lease:a:b" == k.lease_prefix() + "a:b"
    assert (k.token("a"), k.lease_index()) == ("dgs:token:a", "dgs:leases")
    assert (k.dispatch("a"), k.dispatch_index()) == ("dgs:dispatch:a", "dgs:dispatches")
    assert (k.worker("celery@h"), k.worker_index()) == ("dgs:worker:celery@h", "dgs:workers")
    assert k.leader() == "dgs:leader:beat"
    tagged = KeySpace("app", hash_tag=True)
    assert tagged.lease("x") == "{app}:lease:x"
    assert tagged.pattern() == "{app}:*"
    assert KeySpace("a*b").pattern() == "a\\*b:*"
    assert KeySpace("p") == KeySpace("p") != KeySpace("p", hash_tag=True)


@pytest.mark.parametrize(
    "build",
    [
        lambda: KeySpace(""),
        lambda: KeySpace("{x}", hash_tag=True),
        lambda: KeySpace().lease(""),
        lambda: KeySpace().worker(""),
    ],
)
def test_key_space_rejects_bad_names(build: object) -> None:
    with pytest.raises(ValueError, match="must"):
        build()  # type: ignore[operator]


def test_redis_from_url_validation() -> None:
    with pytest.raises(SettingsError, match="scheme"):
        redis_from_url("http://localhost")
    with pytest.raises(SettingsError, match=r"ssl_ca_certs.*rediss"):
        redis_from_url("redis://localhost", ssl_ca_certs="/ca.pem")
    with pytest.raises(SettingsError, match="decode_responses"):
        redis_from_url("redis://localhost", decode_responses=True)
    client = redis_from_url("rediss://:pw@localhost:6390/2", ssl_cert_reqs="none")
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["password"], kwargs["db"], kwargs["ssl_cert_reqs"]) == ("pw", 2, "none")
    assert kwargs["decode_responses"] is False
    client.close()


def test_every_script_documents_its_keys_and_argv() -> None:
    scripts = ScriptSet("celery_dgs.leases", "scripts")
    from importlib import resources

    names = [
        p.name
        for p in resources.files("celery_dgs.leases").joinpath("scripts").iterdir()
        if p.name.endswith(".lua") and not p.name.startswith("_")
    ]
    assert len(names) >= 12  # every lease, dispatch and registry transition
    for name in names:
        header = scripts.source(name).split("\n\n", 1)[0]
        assert header.startswith(f"-- {name}:"), name
        for part in ("KEYS[1]", "ARGV[1]", "Returns"):
            assert part in header, name


def test_lease_info_parses_times_as_aware_utc() -> None:
    info = LeaseInfo.from_hash("dgs:lease:s", "s", GOOD)
    assert info.started_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)
    assert (info.last_ping_at - info.started_at).total_seconds() == 0.5
    assert (info.token, info.progress, info.dispatch_id, info.steal_start_at) == (
        7,
        None,
        None,
        None,
    )
    full = LeaseInfo.from_hash(
        "k",
        "s",
        {
            **GOOD,
            b"progress": b"0.5",
            b"dispatch_id": b"d",
            b"steal_start_at": b"1700000001000",
            b"cancel_requested": b"1",
        },
    )
    assert (full.progress, full.dispatch_id, full.cancel_requested) == (0.5, "d", True)
    assert full.steal_start_at == ms_to_datetime(1700000001000)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({b"format": b"2"}, "format version is '2', expected 1"),
        ({b"format": None}, "format version is missing"),
        ({b"owner_tag": None}, "'owner_tag' is missing"),
        ({b"token": b"x"}, "'token' is not an integer"),
        ({b"last_ping_at": b"1.5e3"}, "'last_ping_at' is not an integer"),
        ({b"progress": b"nan"}, "'progress' is not finite"),
        ({b"progress": b"half"}, "'progress' is not a number"),
        ({b"cancel_requested": b"yes"}, "'cancel_requested' is not 0 or 1"),
        ({b"owner_name": b"\xff"}, "'owner_name' is not UTF-8"),
        ({b"schedule": b"other"}, "'schedule' is 'other', expected 's'"),
    ],
)
def test_lease_info_rejects_malformed_hashes(
    change: dict[bytes, bytes | None], message: str
) -> None:
    data = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(MalformedDataError, match="Redis key 'dgs:lease:s'") as err:
        LeaseInfo.from_hash("dgs:lease:s", "s", data)
    assert message in str(err.value)
    with pytest.raises(MalformedDataError, match="no lease fields"):
        LeaseInfo.from_hash("dgs:lease:s", "s", {})


def test_worker_and_dispatch_parsing() -> None:
    worker = {
        b"format": b"1",
        b"node": b"h",
        b"queues": b'["a", "b"]',
        b"slots": b"3",
        b"pool": b"prefork",
        b"pid": b"9",
        b"started_at": b"0",
        b"expires_at": b"1000",
    }
    info = WorkerInfo.from_hash("k", "celery@h", worker)
    assert info.queues == ("a", "b")
    assert info.expires_at == ms_to_datetime(1000)
    with pytest.raises(MalformedDataError, match="'queues' is not a JSON list"):
        WorkerInfo.from_hash("k", "celery@h", {**worker, b"queues": b'{"a": 1}'})
    record = {
        b"format": b"1",
        b"schedule": b"s",
        b"dispatch_id": b"d",
        b"worker": b"w",
        b"dispatched_at": b"0",
        b"expires_at": b"5",
    }
    assert DispatchRecord.from_hash("k", "s", record).dispatch_id == "d"
    with pytest.raises(MalformedDataError, match="'worker' is missing"):
        DispatchRecord.from_hash("k", "s", {k: v for k, v in record.items() if k != b"worker"})


def test_time_and_duration_conversions() -> None:
    moment = datetime(2026, 3, 8, 7, 0, 0, 123000, tzinfo=timezone.utc)
    assert ms_to_datetime(datetime_to_ms(moment)) == moment
    with pytest.raises(ValueError, match="aware"):
        datetime_to_ms(datetime(2026, 1, 1))
    assert seconds_to_ms("x", 0.3) == 300
    for bad in (-1.0, float("inf"), True):
        with pytest.raises(ValueError, match="x must"):
            seconds_to_ms("x", bad)


WORKER_HASH = {
    b"format": b"1",
    b"node": b"h",
    b"queues": b'["a"]',
    b"slots": b"3",
    b"pool": b"prefork",
    b"pid": b"9",
    b"started_at": b"0",
    b"expires_at": b"1000",
}
DISPATCH_HASH = {
    b"format": b"1",
    b"schedule": b"s",
    b"dispatch_id": b"d",
    b"worker": b"w",
    b"dispatched_at": b"0",
    b"expires_at": b"5",
}


@pytest.mark.parametrize(
    ("record", "good", "kind"),
    [
        (LeaseInfo, GOOD, "lease"),
        (DispatchRecord, DISPATCH_HASH, "dispatch record"),
        (WorkerInfo, WORKER_HASH, "worker registration"),
    ],
    ids=["lease", "dispatch", "worker"],
)
def test_every_stored_hash_is_checked_the_same_way(
    record: type[HashRecord], good: dict[bytes, bytes], kind: str
) -> None:
    """Empty, another format version, another name: each named with the key."""
    assert record.from_hash("k", "s", good)
    with pytest.raises(MalformedDataError, match=f"Redis key 'k': no {kind} fields"):
        record.from_hash("k", "s", {})
    with pytest.raises(MalformedDataError, match="Redis key 'k': format version is '7'"):
        record.from_hash("k", "s", {**good, b"format": b"7"})
    if b"schedule" in good:
        with pytest.raises(MalformedDataError, match="field 'schedule' is 's', expected 'x'"):
            record.from_hash("k", "x", good)


def test_a_hash_reply_is_a_script_list_a_pipeline_dict_or_an_error() -> None:
    assert hash_reply("k", [b"f", b"v", b"g", b"w"]) == {b"f": b"v", b"g": b"w"}
    assert hash_reply("k", {b"f": b"v"}) == {b"f": b"v"}
    with pytest.raises(MalformedDataError, match="Redis key 'k': WRONGTYPE"):
        hash_reply("k", ResponseError("WRONGTYPE Operation against a key"))
    with pytest.raises(MalformedDataError, match="Redis key 'k': not a hash"):
        hash_reply("k", b"not a hash")


def test_records_from_a_script_reply_skip_and_log_foreign_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a_hash = [x for k, v in {**DISPATCH_HASH, b"schedule": b"a"}.items() for x in (k, v)]
    flat = [b"a", a_hash, b"b", b"WRONGTYPE"]
    log = logging.getLogger("test.records")
    with caplog.at_level(logging.ERROR, logger="test.records"):
        got = records_from_reply(DispatchRecord, flat, lambda n: f"dgs:dispatch:{n}", log)
    assert [r.schedule for r in got] == ["a"]
    assert "skipping a dispatch record: Redis key 'dgs:dispatch:b': WRONGTYPE" in caplog.text
