"""The Celery project the fault scenarios run in real worker and beat processes.

Configured from the environment (the ``E2E_*`` variables of
``tests/e2e/harness.py``, so its ``Cluster`` drives it, plus ``FAULTS_*``).
Every run appends its start (with its fencing token and run id) and its end
(with its outcome) to the history file ``FAULTS_HISTORY``, which the test owns.

Schedules:

- ``victim``: one long run (``FAULTS_RUN_SECONDS``, 30 s by default): the run a
  scenario hits with its fault;
- ``quick``: a run of 0.5 s, once an hour (or when a run is requested);
- ``soak_0`` .. ``soak_<N-1>`` (``FAULTS_SOAK_N`` > 0): period
  ``FAULTS_SOAK_PERIOD`` seconds, runs of a random 0.2 .. ``FAULTS_SOAK_RUN``
  seconds, for the soak mode.
"""

from __future__ import annotations

import os
import random
import time
from datetime import timedelta
from typing import Any

from celery import Celery, current_task

import celery_dgs
from celery_dgs.worker.supervisor import RunTerminated, current_supervisor
from tests.faults.history import History
from tests.support.window_env import apply_window_env

app = Celery("faults", broker=os.environ["E2E_REDIS_URL"])
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_backend=None,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=1,
    dgs_database_url=os.environ["E2E_DATABASE_URL"],
    dgs_key_prefix=os.environ.get("E2E_PREFIX", "e2e"),
    # tests/cluster: celery-dgs's Redis is a Redis Cluster, the broker a single server.
    dgs_redis_url=os.environ.get("E2E_DGS_REDIS_URL"),
    dgs_redis_cluster=os.environ.get("E2E_REDIS_CLUSTER") == "1",
    dgs_redis_cluster_hash_tag=os.environ.get("E2E_REDIS_CLUSTER") == "1",
    # tests/sentinel: celery-dgs's Redis behind Redis Sentinel (a sentinel:// URL).
    dgs_redis_master_name=os.environ.get("E2E_REDIS_MASTER_NAME"),
    dgs_ping_interval=float(os.environ.get("E2E_PING_INTERVAL", "0.5")),
    dgs_ping_timeout=float(os.environ.get("E2E_PING_TIMEOUT", "1.5")),
    dgs_steal_delay=float(os.environ.get("E2E_STEAL_DELAY", "1.0")),
    # Schedules declared without a cooldown are eligible again as soon as they
    # end (seed 000's rule), as these tests were written for.
    dgs_default_cooldown_fraction=0,
    dgs_dispatch_timeout=float(os.environ.get("E2E_DISPATCH_TIMEOUT", "4")),
    # Below ping_timeout + steal_delay: a dead worker has left the registry by
    # the time its lease is takeable, so beat does not dispatch the take-over to it.
    dgs_worker_ttl=float(os.environ.get("E2E_WORKER_TTL", "2")),
    dgs_store_poll_interval=0.2,
    dgs_termination_grace=2.0,
    # beat's reaper looks at the running rows this often (celery-dgs's default 60 s)
    dgs_reap_interval=float(os.environ.get("FAULTS_REAP_INTERVAL", "60")),
    dgs_retry_backoff=[0.5],  # a failed run retries soon
    # Celery >= 5.5: a cold shutdown first waits this long for the tasks (0: off).
    worker_soft_shutdown_timeout=float(os.environ.get("FAULTS_SOFT_SHUTDOWN", "0")),
    beat_max_loop_interval=1,
    dgs_beat_leader_timeout=float(os.environ.get("E2E_BEAT_LEADER_TIMEOUT", "2.0")),
    task_acks_late=os.environ.get("FAULTS_ACKS_LATE") == "1",
    # How long Celery waits for a dead pool process's result before it reports
    # the task lost (WorkerLostError); Celery's default 10 s.
    worker_lost_wait=float(os.environ.get("FAULTS_WORKER_LOST_WAIT", "10")),
    # Celery's own hard time limit of every task (none unless set).
    task_time_limit=float(os.environ["FAULTS_TIME_LIMIT"])
    if "FAULTS_TIME_LIMIT" in os.environ
    else None,
    broker_transport_options=(
        # kombu looks for unacked messages past the visibility timeout every
        # unacked_restore_interval seconds (10 s by default)
        {
            "visibility_timeout": float(os.environ["FAULTS_VISIBILITY_TIMEOUT"]),
            "unacked_restore_interval": 0.5,
        }
        if "FAULTS_VISIBILITY_TIMEOUT" in os.environ
        else {}
    ),
)
apply_window_env(app)  # beat's window of schedules, if the environment asks for one
dgs = celery_dgs.DGS(app)
history = History(os.environ["FAULTS_HISTORY"])
SCHEDULES = set(os.environ.get("E2E_SCHEDULES", "").split(",")) - {""}
HOST = os.environ.get("E2E_NODE", "?")


def work(name: str, seconds: float) -> str:
    sup = current_supervisor()
    run_id = sup.run_id if sup is not None else None
    dispatch_id = getattr(current_task.request, "dgs_dispatch_id", None) if current_task else None
    history.run_start(
        name, token=celery_dgs.current_token(), run_id=run_id, host=HOST, dispatch_id=dispatch_id
    )
    outcome = "error"
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)
        outcome = "success"
        return name
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        _record_end(name, run_id, outcome)


def _record_end(name: str, run_id: str | None, outcome: str) -> None:
    """Write the run's end to the history even when an interruption lands while
    it is written (the body had returned, or it is a second one); the
    interruption is raised again afterwards, so the run still ends as it must."""
    interrupted: RunTerminated | None = None
    for _ in range(5):
        try:
            history.run_end(name, run_id=run_id, outcome=outcome)
            break
        except RunTerminated as exc:
            interrupted = exc
    if interrupted is not None:
        raise interrupted


def _declared(name: str) -> bool:
    return name in SCHEDULES or not SCHEDULES


if _declared("victim"):

    @dgs.periodic(period=timedelta(hours=1))
    @app.task(name="faults.victim")
    def victim() -> str:
        return work("victim", float(os.environ.get("FAULTS_RUN_SECONDS", "30")))


if _declared("quick"):

    @dgs.periodic(period=timedelta(hours=1))
    @app.task(name="faults.quick")
    def quick() -> str:
        return work("quick", 0.5)


def _soak_task(i: int) -> Any:
    period = float(os.environ.get("FAULTS_SOAK_PERIOD", "4"))
    longest = float(os.environ.get("FAULTS_SOAK_RUN", "2"))

    @dgs.periodic(period=timedelta(seconds=period))
    @app.task(name=f"faults.soak_{i}")
    def soak() -> str:
        return work(f"soak_{i}", random.uniform(0.2, longest))

    return soak


soak_tasks = [_soak_task(i) for i in range(int(os.environ.get("FAULTS_SOAK_N", "0")))]
