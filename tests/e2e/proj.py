"""The Celery project the end-to-end tests run in real worker and beat processes.

Configured from the environment by the fixtures (broker/Redis URL, SQLite file,
short timings). Every task appends its start and end to a Redis list
(``e2e:events``) so the test can see the order and overlap of runs from
outside the system under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from datetime import timedelta
from typing import Any

import redis
from celery import Celery

import celery_dgs
from tests.support.window_env import apply_window_env

app = Celery("e2e", broker=os.environ["E2E_REDIS_URL"])
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_backend=None,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=1,
    dgs_database_url=os.environ["E2E_DATABASE_URL"],
    dgs_key_prefix=os.environ.get("E2E_PREFIX", "e2e"),
    # celery-dgs's own Redis traffic, when a test routes it through a proxy
    # (the broker and the test's event list stay direct).
    dgs_redis_url=os.environ.get("E2E_DGS_REDIS_URL") or None,
    dgs_ping_interval=float(os.environ.get("E2E_PING_INTERVAL", "0.5")),
    dgs_ping_timeout=float(os.environ.get("E2E_PING_TIMEOUT", "1.5")),
    dgs_steal_delay=float(os.environ.get("E2E_STEAL_DELAY", "1.0")),
    dgs_dispatch_timeout=float(os.environ.get("E2E_DISPATCH_TIMEOUT", "4")),
    dgs_worker_ttl=float(os.environ.get("E2E_WORKER_TTL", "3")),
    dgs_store_poll_interval=float(os.environ.get("E2E_STORE_POLL", "0.2")),
    dgs_termination_grace=2.0,
    dgs_beat_leader_timeout=float(os.environ.get("E2E_BEAT_LEADER_TIMEOUT", "2.0")),
    # Schedules declared without a cooldown are eligible again as soon as they
    # end (seed 000's rule), as these tests were written for.
    dgs_default_cooldown_fraction=0,
    beat_max_loop_interval=float(os.environ.get("E2E_MAX_LOOP", "1")),
    # Fixed-capacity mode (tests/e2e/test_capacity_e2e.py).
    dgs_worker_register=os.environ.get("E2E_WORKER_REGISTER", "1") == "1",
    dgs_capacity=int(os.environ["E2E_CAPACITY"]) if "E2E_CAPACITY" in os.environ else None,
    dgs_metrics_port=(
        int(os.environ["E2E_METRICS_PORT"]) if "E2E_METRICS_PORT" in os.environ else None
    ),
)
if os.environ.get("E2E_ACKS_LATE") == "1":  # the broker-redelivery test
    app.conf.task_acks_late = True
    app.conf.broker_transport_options = {
        "visibility_timeout": float(os.environ.get("E2E_VISIBILITY_TIMEOUT", "3600")),
        # kombu sweeps for expired unacked messages every 10 x 10 s by default
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
# Relative-laxity floor (tests/e2e/test_laxity_e2e.py); "none": plain deadline
# order. Unset: the product's default.
if os.environ.get("E2E_ACK_EMULATION") == "0":  # benchmarks/refill.py --no-ack-emulation
    app.conf.broker_transport_options = {"ack_emulation": False}
if "E2E_LAXITY_FLOOR" in os.environ:
    _floor = os.environ["E2E_LAXITY_FLOOR"]
    app.conf.dgs_laxity_floor = None if _floor.lower() == "none" else float(_floor)
# Priority elevator (tests/e2e/test_priority_e2e.py); "none": strict classes.
if "E2E_ELEVATOR_INTERVAL" in os.environ:
    _interval = os.environ["E2E_ELEVATOR_INTERVAL"]
    app.conf.dgs_elevator_interval = None if _interval.lower() == "none" else float(_interval)
# Revisit groups (tests/e2e/test_revisit_groups_e2e.py); "none": today's order.
if os.environ.get("E2E_ADAPTIVE_GROUPS") == "none":
    app.conf.dgs_adaptive_group_shares = None
# The retry backoff in seconds, comma-separated (tests/e2e/test_items_e2e.py).
if "E2E_RETRY_BACKOFF" in os.environ:
    app.conf.dgs_retry_backoff = [float(s) for s in os.environ["E2E_RETRY_BACKOFF"].split(",")]
# Look-ahead admission: on by default (tests/e2e/test_lookahead_e2e.py); "0": off.
if os.environ.get("E2E_LOOKAHEAD") == "0":
    app.conf.dgs_lookahead = False
# What beat gives up under overload (tests/e2e/test_overload_e2e.py).
if "E2E_OVERLOAD" in os.environ:
    app.conf.dgs_overload = os.environ["E2E_OVERLOAD"]
    app.conf.dgs_overload_floor = float(os.environ.get("E2E_OVERLOAD_FLOOR", "5"))
apply_window_env(app)  # beat's window of schedules, if the environment asks for one
dgs = celery_dgs.DGS(app)
_events = redis.Redis.from_url(os.environ["E2E_REDIS_URL"])
SCHEDULES = set(os.environ.get("E2E_SCHEDULES", "").split(",")) - {""}


def log_event(kind: str, name: str, **extra: Any) -> None:
    event = {
        "kind": kind,
        "name": name,
        "t": time.time(),
        "pid": os.getpid(),
        "host": os.environ.get("E2E_NODE", "?"),
        **extra,
    }
    _events.rpush("e2e:events", json.dumps(event))


def work(name: str, seconds: float, fail: bool = False) -> str:
    log_event("start", name, token=celery_dgs.current_token())
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)
            celery_dgs.progress(min(1.0, 1 - (deadline - time.monotonic()) / seconds))
        if fail:
            raise RuntimeError(f"{name} failed on purpose")
        return name
    finally:
        log_event("end", name)


def declare(kind: str, **fields: Any) -> Any:
    def deco(task: Any) -> Any:
        if task.name.rsplit(".", 1)[-1] in SCHEDULES or not SCHEDULES:
            return getattr(dgs, kind)(**fields)(task)
        return task

    return deco


# Deadline order: never run, periods 100 s .. 400 s -> should_start_by in that order;
# the cooldown keeps a finished one from being chosen again at once.
@declare("periodic", period=timedelta(seconds=400), cooldown=timedelta(seconds=60))
@app.task(name="e2e.p40")
def p40() -> str:
    return work("p40", 0.8)


@declare("periodic", period=timedelta(seconds=100), cooldown=timedelta(seconds=60))
@app.task(name="e2e.p10")
def p10() -> str:
    return work("p10", 0.8)


@declare("periodic", period=timedelta(seconds=300), cooldown=timedelta(seconds=60))
@app.task(name="e2e.p30")
def p30() -> str:
    return work("p30", 0.8)


@declare("periodic", period=timedelta(seconds=200), cooldown=timedelta(seconds=60))
@app.task(name="e2e.p20")
def p20() -> str:
    return work("p20", 0.8)


@declare("periodic", period=timedelta(seconds=60), dont_run_on_nodes=["node1"])
@app.task(name="e2e.not_on_node1")
def not_on_node1() -> str:
    return work("not_on_node1", 0.2)


@declare("periodic", period=timedelta(hours=1), max_allowed_duration=timedelta(seconds=1.5))
@app.task(name="e2e.too_long")
def too_long() -> str:
    return work("too_long", 30)


@declare("periodic", period=timedelta(hours=1))
@app.task(name="e2e.long_run")
def long_run(seconds: float = 30) -> str:
    return work("long_run", seconds)


def _blackouts() -> list[tuple[str, str]]:
    """One daily window (UTC, ``HH:MM:SS``) the test places a few seconds ahead."""
    start, end = os.environ.get("E2E_BLACKOUT_START"), os.environ.get("E2E_BLACKOUT_END")
    return [(start, end)] if start and end else []


@declare("periodic", period=timedelta(hours=1), tz="UTC", blackouts=_blackouts())
@app.task(name="e2e.blackout_run")
def blackout_run(seconds: float = 30) -> str:
    return work("blackout_run", seconds)


@declare(
    "periodic",
    period=timedelta(hours=1),
    max_allowed_duration=timedelta(seconds=float(os.environ.get("E2E_MAX_ALLOWED", "1.5"))),
)
@app.task(name="e2e.stuck")
def stuck(seconds: float = 30) -> str:
    """Blocked in one C-level call (no bytecode runs until it returns)."""
    log_event("start", "stuck", token=celery_dgs.current_token())
    try:
        time.sleep(seconds)
        return "stuck"
    finally:
        log_event("end", "stuck")


@declare(
    "periodic",
    period=timedelta(hours=1),
    max_allowed_duration=timedelta(seconds=float(os.environ.get("E2E_MAX_ALLOWED", "1.5"))),
)
@app.task(name="e2e.swallows")
def swallows(seconds: float = 30) -> str:
    """Loops with ``except Exception: pass``, as careless task code does; an
    interruption (a BaseException) must still get through."""
    log_event("start", "swallows", token=celery_dgs.current_token())
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # careless on purpose
                time.sleep(0.05)
        return "swallows"
    finally:
        log_event("end", "swallows")


@declare("periodic", period=timedelta(seconds=1))
@app.task(name="e2e.rate_limited", rate_limit="6/m")
def rate_limited() -> str:
    """Celery's rate limiter holds every run after the first 10 s in the
    worker, dispatched and not started."""
    return work("rate_limited", 0.1)


@app.task(name="e2e.plain_sleep")
def plain_sleep(seconds: float) -> str:
    """A task no schedule declares: Celery's own, run beside scheduled runs."""
    return work("plain_sleep", seconds)


# -- celery dgs CLI (tests/e2e/test_cli_e2e.py) ----------------------------------
@declare("periodic", period=timedelta(hours=1))
@app.task(name="e2e.cli_long")
def cli_long(seconds: float = 120) -> str:
    """Holds its worker's slot until cancelled."""
    return work("cli_long", seconds)


@declare("periodic", period=timedelta(seconds=1))
@app.task(name="e2e.cli_fail")
def cli_fail() -> str:
    """Always fails: ERROR one second after it is stored (the health check's case)."""
    return work("cli_fail", 0.1, fail=True)


# -- beat high availability (tests/e2e/test_beat_ha_e2e.py) -------------------------
@declare("periodic", period=timedelta(seconds=1))
@app.task(name="e2e.ha_a")
def ha_a() -> str:
    return work("ha_a", 0.2)


@declare("periodic", period=timedelta(seconds=1))
@app.task(name="e2e.ha_b")
def ha_b() -> str:
    return work("ha_b", 0.2)


@declare("periodic", period=timedelta(seconds=1.5))
@app.task(name="e2e.ha_c")
def ha_c() -> str:
    return work("ha_c", 0.2)


from celery_dgs.beat.scheduler import DeadlineScheduler  # noqa: E402  (HA tests only)


class PausingScheduler(DeadlineScheduler):
    """A real beat that, once the file ``E2E_PAUSE_FILE`` exists, stops itself
    (SIGSTOP) just before its next dispatch write: the worst moment, after it
    decided what to dispatch as leader and before the fenced write."""

    def setup_schedule(self) -> None:
        super().setup_schedule()
        assert self.engine is not None
        records = self.engine.dispatches
        add_many = records.add_many

        def stop_then_add(*args: Any, **kwargs: Any) -> Any:
            flag = os.environ.get("E2E_PAUSE_FILE", "")
            if flag and os.path.exists(flag):
                os.remove(flag)
                log_event("beat_stopped", "beat")
                os.kill(os.getpid(), signal.SIGSTOP)
            return add_many(*args, **kwargs)

        records.add_many = stop_then_add


# -- fencing (tests/e2e/test_fencing_e2e.py) --------------------------------------
@declare("periodic", period=timedelta(hours=1))
@app.task(name="e2e.retries", bind=True)
def retries(self: Any) -> str:
    """Asks Celery for a broker retry with a countdown, as task code often does."""
    log_event("start", "retries", token=celery_dgs.current_token())
    try:
        raise self.retry(exc=ValueError("flaky upstream"), countdown=1)
    finally:
        log_event("end", "retries")


@declare("periodic", period=timedelta(hours=1))
@app.task(name="e2e.autoretries", autoretry_for=(ValueError,), retry_kwargs={"countdown": 1})
def autoretries() -> str:
    """Fails with an exception Celery is told to retry automatically."""
    log_event("start", "autoretries", token=celery_dgs.current_token())
    try:
        raise ValueError("flaky upstream")
    finally:
        log_event("end", "autoretries")


# -- relative laxity vs deadline order (tests/e2e/test_laxity_e2e.py) -------------
# Never run, so both are eligible at registration (reg) with error_at = reg + period;
# duration_override is the exact margin (error_at - should_start_by):
#   lax_a: should = reg + 30, laxity at reg = 40 / (10 + floor)
#   lax_b: should = reg + 19, laxity at reg = 20 / (1 + floor)
# Deadline order runs lax_b first; with a 1 s floor laxity runs lax_a first
# (3.6 < 10). The cooldowns keep a finished one from running again during the test.
@declare(
    "periodic",
    period=timedelta(seconds=40),
    cooldown=timedelta(seconds=30),
    duration_override=timedelta(seconds=10),
)
@app.task(name="e2e.lax_a")
def lax_a() -> str:
    return work("lax_a", 0.5)


@declare(
    "periodic",
    period=timedelta(seconds=20),
    cooldown=timedelta(seconds=15),
    duration_override=timedelta(seconds=1),
)
@app.task(name="e2e.lax_b")
def lax_b() -> str:
    return work("lax_b", 0.5)


# Priorities (tests/e2e/test_priority_e2e.py): two class-10 schedules whose
# 1.5 s runs overfill one slot (period 2 s: one of them is always due, and
# waits 2 s for it), and a class-90 one due from registration + 3.5 s and in
# ERROR from + 4 s; all three in pool E2E_PRIO_POOL (unset: the default queue).
_PRIO_POOL = os.environ.get("E2E_PRIO_POOL")


@declare(
    "periodic",
    period=timedelta(seconds=2),
    priority=10,
    duration_override=timedelta(seconds=1),
    pool=_PRIO_POOL,
)
@app.task(name="e2e.prio_hi1")
def prio_hi1() -> str:
    return work("prio_hi1", 1.5)


@declare(
    "periodic",
    period=timedelta(seconds=2),
    priority=10,
    duration_override=timedelta(seconds=1),
    pool=_PRIO_POOL,
)
@app.task(name="e2e.prio_hi2")
def prio_hi2() -> str:
    return work("prio_hi2", 1.5)


@declare(
    "periodic",
    period=timedelta(seconds=4),
    priority=90,
    duration_override=timedelta(seconds=0.5),
    pool=_PRIO_POOL,
)
@app.task(name="e2e.prio_lo")
def prio_lo() -> str:
    return work("prio_lo", 0.5)


# Look-ahead (tests/e2e/test_lookahead_e2e.py): seed 000's greedy trap on two
# slots. Two long jobs of 4 s every 10 s need 0.8 of a slot, and a short one of
# 0.2 s every 2 s (not within 1.5 s of its last start) needs a tenth: one long
# run at a time leaves the short job its slot.
@declare("periodic", period=timedelta(seconds=10), duration_override=timedelta(seconds=4))
@app.task(name="e2e.la_long1")
def la_long1() -> str:
    return work("la_long1", 4.0)


@declare("periodic", period=timedelta(seconds=10), duration_override=timedelta(seconds=4))
@app.task(name="e2e.la_long2")
def la_long2() -> str:
    return work("la_long2", 4.0)


@declare(
    "periodic",
    period=timedelta(seconds=2),
    cooldown=timedelta(seconds=1.5),
    duration_override=timedelta(seconds=0.2),
)
@app.task(name="e2e.la_short")
def la_short() -> str:
    return work("la_short", 0.2)


# Runtime schedules (tests/e2e/test_runtime_e2e.py): no declaration; a lister
# task adds one schedule of e2e.scrape per source, with the source as argument
# (the cooldown keeps a finished one from running again at once).
@app.task(name="e2e.scrape")
def scrape(source: str, seconds: float = 0.05) -> str:
    return work(f"scrape@{source}", seconds)


# The simulator against a real run (tests/e2e/test_sim_vs_real_e2e.py): each run
# lasts what the simulator's keyed draw gives that schedule's run of that number.
@app.task(name="e2e.drawn")
def drawn(name: str, mean_s: float, sigma: float, seed: int) -> str:
    from celery_dgs.sim.draws import keyed_run

    run = int(_events.incr(f"e2e:drawn:{name}")) - 1
    seconds, failed = keyed_run(seed, name, run, mean_s, sigma)
    return work(name, seconds, fail=failed)


@app.task(name="e2e.lister")
def lister(count: int) -> int:
    rows = [
        {"name": f"e2e.scrape@s{i:02d}", "period": 3600, "cooldown": 3000, "args": [f"s{i:02d}"]}
        for i in range(count)
    ]
    report = dgs.schedules.upsert_many(rows)
    log_event(
        "listed",
        "lister",
        inserted=len(report.applied.inserted),
        errors=[str(e) for e in report.errors],
    )
    return len(report.applied.inserted)


# Adaptive runtime schedules (tests/e2e/test_adaptive_e2e.py): the test sets
# each source's behaviour in Redis (e2e:visit:<source>): "eventful" or
# "quiet" (reported with celery_dgs.eventful), "fail", or "silent"; a visit
# lasts ``seconds``.
@app.task(name="e2e.visit")
def visit(source: str, seconds: float = 0.05) -> str:
    mode = (_events.get(f"e2e:visit:{source}") or b"silent").decode()
    log_event("start", f"visit@{source}", mode=mode, token=celery_dgs.current_token())
    try:
        if mode == "fail":
            raise RuntimeError(f"{source} is unreachable")
        if mode in ("eventful", "quiet"):
            celery_dgs.eventful(mode == "eventful")
        time.sleep(seconds)
        return mode
    finally:
        log_event("end", f"visit@{source}", mode=mode)


# -- deferred checks (tests/e2e/test_checks_e2e.py): seed 002's order example ------
#: Alerts go to e2e:alerts; an order's state is e2e:order:<id> ("shipped", or
#: "slow": the check takes 4 s, for the SIGKILL test; anything else: unshipped).
@dgs.deferred(within=timedelta(seconds=2), max_checks=3)
@app.task(name="e2e.check_order")
def check_order(order: str, escalate_after: float = 3.0) -> Any:
    info = celery_dgs.current_check()
    assert info is not None, "a check runs with its state"
    log_event(
        "start",
        f"check_order:{order}",
        count=info.check_count,
        due=info.due_at.timestamp() if info.due_at else None,
    )
    try:
        state = (_events.get(f"e2e:order:{order}") or b"unshipped").decode()
        if state == "slow":
            time.sleep(4)
        if state == "shipped":
            return None  # done: no alert
        alert = "first" if info.check_count == 0 else "final"
        _events.rpush("e2e:alerts", json.dumps({"order": order, "alert": alert}))
        if info.check_count == 0 and info.first_check_at is not None:
            return info.first_check_at + timedelta(seconds=escalate_after)
        return None
    finally:
        log_event("end", f"check_order:{order}")


# -- a round's messages as the worker receives them (tests/e2e/test_batch_publish_e2e.py)
#: Each run reports what its request carries: its arguments, task id and the
#: headers beat set (the worker hooks read ``dgs_schedule``/``dgs_dispatch_id``).
@app.task(name="e2e.echo", bind=True)
def echo(self: Any, *args: Any, **kwargs: Any) -> str:
    request = self.request
    log_event(
        "echo",
        str(getattr(request, "dgs_schedule", "")),
        args=list(args),
        kwargs=kwargs,
        task_id=request.id,
        dispatch_id=getattr(request, "dgs_dispatch_id", None),
        stamp=getattr(request, "e2e_stamp", None),
    )
    return "echoed"


if os.environ.get("E2E_PUBLISH_SIGNALS") == "1":
    # Beat's publish signals: a header added before publishing (as a tracing
    # library adds its context) reaches the worker; each publish is counted.
    from celery.signals import after_task_publish, before_task_publish

    @before_task_publish.connect(weak=False)
    def _stamp(headers: dict[str, Any] | None = None, **_: Any) -> None:
        if headers is not None and headers.get("dgs_schedule"):
            headers["e2e_stamp"] = f"stamped {headers['dgs_schedule']}"

    @after_task_publish.connect(weak=False)
    def _published(headers: dict[str, Any] | None = None, **_: Any) -> None:
        if headers is not None and headers.get("dgs_schedule"):
            log_event("published", str(headers["dgs_schedule"]), stamp=headers.get("e2e_stamp"))


# -- partial failures (tests/e2e/test_items_e2e.py) ---------------------------------
#: Each run reads e2e:items, a JSON object {"ok": n, "failed": n, "seconds": s},
#: works for ``seconds`` and reports its items with celery_dgs.report_items.
@declare(
    "periodic",
    period=timedelta(hours=1),
    cooldown=timedelta(minutes=50),
    partial_failure_threshold=0.2,
)
@app.task(name="e2e.items")
def items() -> str:
    plan = json.loads(_events.get("e2e:items") or b'{"ok": 1, "failed": 0, "seconds": 0}')
    log_event("start", "items", **plan)
    try:
        time.sleep(float(plan["seconds"]))
        celery_dgs.report_items(ok=plan["ok"], failed=plan["failed"])
        return "scraped"
    finally:
        log_event("end", "items")
