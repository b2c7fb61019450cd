"""The Redis list of run outcomes a worker could not store: entries read
back as written, malformed ones named by key and field, on a real Redis."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import redis

from celery_dgs.core.items import ItemCounts
from celery_dgs.errors import MalformedDataError
from celery_dgs.keys import KeySpace
from celery_dgs.outcome_spool import OutcomeSpool, SpooledOutcome

ENDED = datetime(2030, 5, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)


def test_entries_read_back_oldest_first_and_go_once_removed(redis_client: redis.Redis) -> None:
    spool = OutcomeSpool(redis_client, KeySpace("sp"))
    first = SpooledOutcome(
        schedule="t.a",
        run_id="r1",
        outcome="success",
        ended_at=ENDED,
        duration_s=1.5,
        eventful=True,
        verdict={"shipped": [1, "x"]},
        items=ItemCounts(ok=3, failed=1),
    )
    second = SpooledOutcome(
        schedule="t.b", run_id="r2", outcome="failure", ended_at=ENDED, error="boom", progress=0.5
    )
    assert spool.put(first) == 1
    assert spool.put(second) == 2
    assert spool.key == "sp:outcomes"
    read = spool.oldest(10)
    assert [entry for _, entry in read] == [first, second]
    spool.remove(read[0][0])
    assert [entry for _, entry in spool.oldest(10)] == [second]
    assert spool.count() == 1
    assert spool.oldest(0) == spool.oldest(1)  # at least one is read


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"{not json", "an entry is not JSON"),
        (b"[1]", "an entry is not a JSON object"),
        (b'{"format": 9}', "entry format 9, expected 1"),
        (
            b'{"format": 1, "schedule": "t.a", "run_id": "r", "outcome": "success", '
            b'"ended_at": "2030-05-01T12:00:00"}',
            "entry field 'ended_at': no time zone",
        ),
        (
            b'{"format": 1, "schedule": "", "run_id": "r", "outcome": "success", '
            b'"ended_at": "2030-05-01T12:00:00+00:00"}',
            "entry field 'schedule': expected a non-empty string, got ''",
        ),
        (
            b'{"format": 1, "schedule": "t.a", "run_id": "r", "outcome": "success", '
            b'"ended_at": "2030-05-01T12:00:00+00:00", "duration_s": "1"}',
            "entry field 'duration_s': expected a number or null, got '1'",
        ),
        (
            b'{"format": 1, "schedule": "t.a", "run_id": "r", "outcome": "success", '
            b'"ended_at": "2030-05-01T12:00:00+00:00", "items": [1]}',
            "entry field 'items'",
        ),
    ],
)
def test_a_malformed_entry_is_named_and_the_others_still_read(
    redis_client: redis.Redis, raw: bytes, why: str
) -> None:
    spool = OutcomeSpool(redis_client, KeySpace("sp"))
    redis_client.rpush(spool.key, raw)
    good = SpooledOutcome(schedule="t.a", run_id="r1", outcome="success", ended_at=ENDED)
    spool.put(good)
    (bad_raw, bad), (_, fine) = spool.oldest(10)
    assert bad_raw == raw
    assert isinstance(bad, MalformedDataError)
    assert str(bad).startswith("Redis key 'sp:outcomes': ")
    assert why in str(bad)
    assert fine == good


def test_a_key_of_another_type_is_malformed_data(redis_client: redis.Redis) -> None:
    spool = OutcomeSpool(redis_client, KeySpace("sp"))
    redis_client.set(spool.key, "x")
    with pytest.raises(MalformedDataError, match="Redis key 'sp:outcomes': WRONGTYPE"):
        spool.oldest(5)
