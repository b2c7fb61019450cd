"""A small fleet of "scrapers" scheduled by freshness constraints.

Run it against any Redis and SQL database:

    DGS_EXAMPLE_REDIS_URL=redis://localhost:6379/0 celery -A example_project.proj worker -n w1@node1
    DGS_EXAMPLE_REDIS_URL=redis://localhost:6379/0 \
        celery -A example_project.proj beat -S celery_dgs:DeadlineScheduler
"""

from __future__ import annotations

import os
import random
import time
from datetime import timedelta

import redis
from celery import Celery

import celery_dgs

from . import upstream

REDIS_URL = os.environ.get("DGS_EXAMPLE_REDIS_URL", "redis://localhost:6379/0")
app = Celery("example", broker=REDIS_URL)
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_backend=None,
    worker_prefetch_multiplier=1,
    dgs_database_url=os.environ.get("DGS_EXAMPLE_DATABASE_URL", "sqlite:///example-dgs.sqlite3"),
    dgs_ping_interval=5,
    dgs_ping_timeout=15,
    dgs_steal_delay=10,
    dgs_dispatch_timeout=60,
    # One retry a minute after each failure (the default ladder is 5 min, 1 h,
    # 4 h): every period and `within` below is longer, so one failed run is a
    # WARNING, not a certain ERROR (`celery dgs check` warns about that case).
    dgs_retry_backoff=[60],
)
dgs = celery_dgs.DGS(app)


def scrape(seconds: float, failure_rate: float = 0.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.2)
        celery_dgs.progress(min(1.0, 1 - (deadline - time.monotonic()) / seconds))
    if random.random() < failure_rate:
        raise RuntimeError("the site answered 503")


@dgs.periodic(period=timedelta(minutes=2), cooldown=timedelta(seconds=30))
@app.task(name="example.scrape_bills")
def scrape_bills() -> None:
    scrape(8)


@dgs.periodic(period=timedelta(minutes=3), cooldown=timedelta(seconds=45))
@app.task(name="example.scrape_votes")
def scrape_votes() -> None:
    scrape(12)


# Fails 40 % of the time: WARNING last_run_failed, retried a minute later; only
# four failures in a row (2.6 %) outlast its 5-minute period.
@dgs.periodic(period=timedelta(minutes=5), cooldown=timedelta(seconds=20))
@app.task(name="example.flaky_committee_pages")
def flaky_committee_pages() -> None:
    scrape(5, failure_rate=0.4)


# No cooldown given: it waits dgs_default_cooldown_fraction of its period after
# each good run instead of running again as soon as a slot is free.
@dgs.periodic(period=timedelta(minutes=5), dont_run_on_nodes=["node1"])
@app.task(name="example.heavy_archive_sync")
def heavy_archive_sync() -> None:
    scrape(20)


# Every 5 minutes except over lunch, when it must not run at all (a cron time
# inside the blackout could never finish within 4 minutes: `check` would say so).
@dgs.cron(
    "*/5 0-11,13-23 * * *",
    within=timedelta(minutes=4),
    tz="America/New_York",
    blackouts=[("12:00", "13:00")],
)
@app.task(name="example.nightly_report")
def nightly_report() -> None:
    scrape(10)


# A lister: it discovers the sources of a (fake) upstream and keeps one
# adaptive runtime schedule per source. Visits that find changes shorten a
# source's interval, visits that find none lengthen it (15 s steps here, one
# day by default); a source whose upstream reports a change is visited at once.
VISIT = "example.visit_source"
#: The adaptive ladder's unit for the visits: 15 s, so the demo shows it move.
VISIT_INTERVAL_UNIT = timedelta(seconds=15)


@dgs.periodic(period=timedelta(minutes=2), cooldown=timedelta(seconds=30))
@app.task(name="example.list_sources")
def list_sources() -> str:
    now = time.time()
    rows: list[dict[str, object]] = []
    for src in upstream.SOURCES:
        row: dict[str, object] = {
            "task": VISIT,
            "configuration": src.name,
            "kind": "adaptive",
            "interval_unit": VISIT_INTERVAL_UNIT,
            "kwargs": {"source": src.name},
        }
        changed_at = src.last_modified(now)
        if changed_at is not None:
            row["last_modified"] = changed_at
        rows.append(row)
    report = dgs.schedules.upsert_many(rows)
    if report.errors:
        raise RuntimeError("; ".join(str(error) for error in report.errors))
    listed = {f"{VISIT}@{src.name}" for src in upstream.SOURCES}
    gone = [
        stored.name
        for stored in dgs.schedules.list()
        if stored.name.startswith(f"{VISIT}@") and stored.name not in listed
    ]
    if gone:
        dgs.schedules.remove_many(gone)
    applied = report.applied
    return (
        f"{len(applied.inserted)} new, {len(applied.updated)} changed, "
        f"{len(applied.unchanged)} unchanged, {len(gone)} removed"
    )


@app.task(name=VISIT)
def visit_source(source: str) -> bool:
    """Fetches ``source`` and tells the scheduler whether it changed since the
    last visit (the versions seen are kept in Redis, like a scraper's own store)."""
    scrape(1)
    version = upstream.source(source).version(time.time())
    seen = _seen_versions().getset(f"example:seen:{source}", version)
    changed = seen is None or int(seen) != version
    celery_dgs.eventful(changed)
    return changed


def _seen_versions() -> redis.Redis:
    return redis.Redis.from_url(REDIS_URL)


# Deferred checks (seed 002): a shop places orders (example_project/shop.py)
# and asks "is it shipped yet?" ORDER_FIRST_CHECK after each; an order still
# unshipped raises a first alert and is checked once more ORDER_ESCALATION
# after the first check, where it raises the final alert. A shipped order's
# check ends without one. The orders and alerts are kept in Redis.
CHECK_ORDER = "example.check_order"
ORDER_FIRST_CHECK = timedelta(seconds=20)
ORDER_ESCALATION = timedelta(seconds=40)


@dgs.deferred(within=timedelta(seconds=30), max_checks=2, priority=20)  # alerts before scrapes
@app.task(name=CHECK_ORDER)
def check_order(order: str) -> object:
    check = celery_dgs.current_check()
    if check is None or upstream.order_shipped(_seen_versions(), order, time.time()):
        return None  # shipped (or run by hand): done, no alert
    level = "first" if check.check_count == 0 else "final"
    _seen_versions().rpush("example:alerts", f"{level} alert: order {order} not shipped")
    if check.check_count == 0 and check.first_check_at is not None:
        return check.first_check_at + ORDER_ESCALATION  # check again then
    return None


def place_order(order: str) -> str:
    """Record a new order and add its shipping check (what a shop's order
    handler does); returns ``"added"`` (or ``"kept"`` for an order placed twice)."""
    upstream.place_order(_seen_versions(), order, time.time())
    return dgs.check_at(CHECK_ORDER, order, after=ORDER_FIRST_CHECK, kwargs={"order": order})
