"""Many processes racing to take one expired lease: exactly one wins,
and the token counter moves by exactly one. Real Redis server, one OS process
per contender, all released by one barrier just before the lease turns
takeable, each calling acquire in a tight loop."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest
import redis

from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases

pytestmark = [pytest.mark.faults, pytest.mark.timeout(60)]

CONTENDERS = 12
PING_TIMEOUT, STEAL_DELAY = 0.4, 0.3


def _leases(url: str) -> RedisLeases:
    return RedisLeases(
        redis.Redis.from_url(url),
        KeySpace("race"),
        ping_timeout=PING_TIMEOUT,
        steal_delay=STEAL_DELAY,
    )


def _contend(url: str, i: int, barrier: Any, out: Any) -> None:
    leases = _leases(url)
    barrier.wait()
    deadline = time.monotonic() + PING_TIMEOUT + STEAL_DELAY + 1.5
    statuses: dict[str, int] = {}
    won: list[tuple[int, str | None]] = []
    while time.monotonic() < deadline:
        result = leases.acquire("s", owner_node=f"n{i}", owner_name=f"c{i}", owner_tag=f"tag{i}")
        statuses[result.status.name] = statuses.get(result.status.name, 0) + 1
        if result.granted and not result.renewed:
            prev = result.took_over_from.owner_tag if result.took_over_from else None
            won.append((int(result.token or 0), prev))
        time.sleep(0.001)
    out.put((i, won, statuses))


def test_exactly_one_of_many_processes_takes_an_expired_lease(redis_url: str) -> None:
    leases = _leases(redis_url)
    first = leases.acquire("s", owner_node="n", owner_name="dead", owner_tag="dead")
    assert first.granted
    assert first.token == 1
    counter_key = KeySpace("race").token("s")
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(CONTENDERS), ctx.Queue()
    procs = [
        ctx.Process(target=_contend, args=(redis_url, i, barrier, out)) for i in range(CONTENDERS)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(10)
    winners = [(i, w) for i, won, _ in results for w in won]
    totals: dict[str, int] = {}
    for _, _, statuses in results:
        for k, n in statuses.items():
            totals[k] = totals.get(k, 0) + n
    print(
        f"{CONTENDERS} processes, {sum(totals.values())} acquire calls {totals}; winners {winners}"
    )
    assert len(winners) == 1, winners
    ((_, (token, previous)),) = winners
    assert (token, previous) == (2, "dead"), "took it over from the dead owner, token + 1"
    assert int(redis.Redis.from_url(redis_url).get(counter_key) or 0) == 2, "one increment"
    assert totals.get("STEAL_PENDING", 0) > 0
    assert totals.get("HELD", 0) > 0
