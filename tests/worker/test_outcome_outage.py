"""A run's outcome outlives a database restart: the worker keeps retrying the
write for up to ``dgs_ping_timeout`` while it pings the lease, so the run is
recorded as it ended (not left ``running`` and later marked lost) and its
slot stays busy until then. A real PostgreSQL server of the test's own,
stopped while the body runs and started again seconds later."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from celery_dgs.beat.reaper import RunReaper
from celery_dgs.core.clock import SystemClock
from celery_dgs.outcome_spool import SpooledOutcome
from celery_dgs.runtime import Runtime
from celery_dgs.settings import DgsSettings
from celery_dgs.worker.runs import supervised_run
from tests.store.conftest import start
from tests.support.postgres import PostgresServer, postgres_available
from tests.worker.helpers import SPEC, Request, in_thread, only_run

#: Longer than the 5 quick attempts (0.2 + 0.4 + 0.8 + 1.6 s) a write is given.
OUTAGE_S = 5.0

pytestmark = pytest.mark.skipif(not postgres_available(), reason="PostgreSQL binaries not found")


@pytest.fixture
def pg() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.stop()


def test_an_outcome_waits_out_a_database_restart_with_its_lease_kept(
    pg: PostgresServer, redis_url: str
) -> None:
    settings = DgsSettings.from_conf(
        {
            "dgs_redis_url": redis_url,
            "dgs_database_url": pg.create_database("outage"),
            "dgs_ping_interval": 0.5,
            "dgs_ping_timeout": 20.0,
            "dgs_steal_delay": 1.0,
        }
    )
    rt = Runtime(settings)
    rt.store.insert_if_missing(SPEC, rt.leases.now())
    seen: dict[str, Any] = {}

    def restart() -> None:
        seen["lease held"] = SPEC.name in {lease.schedule for lease in rt.leases.all()}
        pg.resume()

    def body() -> str:
        pg.pause()  # the database goes away as the run ends
        timer = threading.Timer(OUTAGE_S, restart)
        timer.start()
        seen["timer"] = timer
        return "done"

    try:
        started = time.monotonic()
        box = in_thread(lambda: supervised_run(rt, SPEC, Request(), body, (), {}))
        assert box.get("value") == "done", box
        assert time.monotonic() - started >= OUTAGE_S, "the run waited for the store"
        seen["timer"].join()
        assert seen["lease held"], "the slot stayed busy while the outcome waited"
        run = only_run(rt)
        assert (run.outcome, run.error) == ("success", None)
        assert rt.leases.all() == [], "released once the outcome was stored"
    finally:
        rt.close()


def test_an_outcome_past_a_longer_outage_is_kept_in_redis_and_stored_by_the_reaper(
    pg: PostgresServer, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The database is away for longer than the worker retries the write
    (``dgs_ping_timeout``): the worker keeps the outcome in Redis and frees
    its slot; the reaper judges no row while the database refuses the kept
    outcome, and once it answers stores it as the run ended, not ``lost``."""
    settings = DgsSettings.from_conf(
        {
            "dgs_redis_url": redis_url,
            "dgs_database_url": pg.create_database("long_outage"),
            "dgs_ping_interval": 0.5,
            "dgs_ping_timeout": 2.0,
            "dgs_steal_delay": 1.0,
        }
    )
    rt = Runtime(settings)
    rt.store.insert_if_missing(SPEC, rt.leases.now())
    clock = {"mono": 0.0}
    reaper = RunReaper(
        rt.store,
        rt.leases,
        SystemClock(),
        grace_s=0.0,  # a row without its lease is judged lost at the first look
        ping_timeout_s=settings.ping_timeout,
        interval_s=1.0,
        batch_size=10,
        monotonic=lambda: clock["mono"],
        spool=rt.outcome_spool,
        alpha=settings.ewma_alpha,
    )

    def body() -> str:
        pg.pause()  # the database goes away as the run ends, for longer than 2 s
        time.sleep(0.5)
        return "done"

    try:
        box = in_thread(lambda: supervised_run(rt, SPEC, Request(), body, (), {}))
        assert box.get("value") == "done", box
        assert rt.leases.all() == [], "the slot is freed"
        assert rt.outcome_spool.count() == 1
        assert "kept in Redis (dgs:outcomes, 1 waiting) for the leading beat" in caplog.text
        for _ in range(2):  # the database still away: the outcome kept, nothing judged
            clock["mono"] += 2
            reaper.store_kept()
            assert reaper.maybe_reap() == 0
        assert reaper.kept_waiting
        assert rt.outcome_spool.count() == 1
        pg.resume()
        clock["mono"] += 2
        assert reaper.maybe_reap() == 0  # it answers, but an outcome waits: judge no row
        assert only_run(rt).outcome == "running", "not judged lost"
        reaper.store_kept()
        assert not reaper.kept_waiting
        assert rt.outcome_spool.count() == 0
        assert reaper.spooled_total == 1
        run = only_run(rt)
        assert (run.outcome, run.error) == ("success", None)
        assert run.duration_s is not None
        assert 0.5 <= run.duration_s < 2.0
        assert rt.store.get(SPEC.name).stats.last_good_end_at == run.ended_at
    finally:
        rt.close()


def test_a_kept_outcome_the_store_refuses_while_it_answers_is_set_aside(
    pg: PostgresServer, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL cannot hold a NUL in text: the store refuses that entry for
    good while it answers reads, so it is moved to its own list with an
    ERROR, and the entry behind it is stored."""
    settings = DgsSettings.from_conf(
        {"dgs_redis_url": redis_url, "dgs_database_url": pg.create_database("refused")}
    )
    rt = Runtime(settings)
    try:
        rt.store.insert_if_missing(SPEC, rt.leases.now())
        now = rt.leases.now()
        for run_id, token in (("bad", 1), ("good", 2)):
            start(rt.store, SPEC.name, run_id, token, now)
        spool = rt.outcome_spool
        bad = "a NUL \x00 in the error"
        spool.put(
            SpooledOutcome(
                schedule=SPEC.name, run_id="bad", outcome="failure", ended_at=now, error=bad
            )
        )
        spool.put(
            SpooledOutcome(schedule=SPEC.name, run_id="good", outcome="success", ended_at=now)
        )
        reaper = RunReaper(
            rt.store,
            rt.leases,
            SystemClock(),
            grace_s=60,
            ping_timeout_s=settings.ping_timeout,
            interval_s=60,
            batch_size=10,
            monotonic=time.monotonic,
            spool=spool,
        )
        reaper.store_kept()
        assert not reaper.kept_waiting
        assert spool.count() == 0
        assert rt.redis.llen(spool.refused_key) == 1
        assert "refused the kept outcome failure of run bad of s while it answers otherwise; " in (
            caplog.text
        )
        runs = {r.run_id: r.outcome for r in rt.store.runs(SPEC.name)}
        assert runs == {"bad": "running", "good": "success"}
    finally:
        rt.close()
