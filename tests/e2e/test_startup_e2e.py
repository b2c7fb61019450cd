"""End to end: starting beat and workers while Redis or the database is not
there yet, or with a setting that can never work.

- A worker that cannot supervise its scheduled tasks (an invalid ``dgs_*``
  setting, Redis or the database refusing the password) refuses to start: one
  line naming the setting, exit status 78, and no scheduled task body runs.
- Beat with Redis or the database unreachable retries with a back-off, one
  line per attempt and no traceback, and leads and dispatches once they answer.
- Beat with a wrong Redis password exits (status 78) after one line.
- Beat names the app's Celery ``beat_schedule`` entries, which it does not run.
- A worker started with Redis down registers once Redis answers.
- A worker whose SQLite directory does not exist says so at its start, and
  runs once the directory is there.

Real Redis servers, SQLite files, ``celery worker`` / ``celery beat`` processes.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from celery_dgs.embedded import RedisServerProcess, free_port
from tests.e2e.harness import Cluster, wait_for
from tests.support.postgres import PostgresServer, postgres_available

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

EX_CONFIG = 78
#: Lines a beat log may have from its start up to its first dispatch, retries
#: included: the banner, the migrations, a line per attempt, leadership.
BEAT_START_LINES = 60


class StartupCluster(Cluster):
    app_module = "tests.e2e.robust_proj"


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Callable[..., StartupCluster]]:
    made: list[StartupCluster] = []

    def make(redis_url: str, **env: str) -> StartupCluster:
        cluster = StartupCluster(
            tmp_path, redis_url, ["marker"], E2E_MARKER=str(tmp_path / "marker"), **env
        )
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all()


@pytest.fixture
def later_redis(tmp_path: Path) -> Iterator[RedisServerProcess]:
    """A Redis server with a port of its own, not started yet."""
    server = RedisServerProcess(port=free_port())
    yield server
    server.cleanup()


def start_worker_process(cluster: Cluster, name: str = "w1") -> subprocess.Popen[bytes]:
    """A worker process, without waiting for it to register."""
    return cluster._start(
        name,
        [
            "worker",
            "-n",
            f"{name}@node1",
            "-P",
            "solo",
            "-l",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        node="node1",
    )


def exit_status(proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"process {proc.pid} still runs after {timeout}s") from None


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def assert_no_traceback(log: str) -> None:
    assert "Traceback" not in log, log
    assert 'File "' not in log, log


# -- workers -------------------------------------------------------------------------
def test_a_worker_with_an_unknown_dgs_setting_refuses_to_start_and_runs_nothing(
    clusters: Callable[..., StartupCluster], redis_url: str, tmp_path: Path
) -> None:
    cluster = clusters(redis_url, E2E_EXTRA_CONF='{"dgs_no_such_setting": 1}')
    # A scheduled task's message is waiting when the worker starts: a worker
    # that started anyway would run it unguarded (no lease, no run record).
    cluster.send("e2e.marker")
    proc = start_worker_process(cluster)
    assert exit_status(proc) == EX_CONFIG
    log = cluster.log_since("w1", 0)
    refusals = lines_with(log, "refuses to start")
    assert len(refusals) == 1, log
    assert "'dgs_no_such_setting'" in refusals[0]
    assert "unknown setting" in refusals[0]
    assert_no_traceback(log)
    assert " ready." not in log
    assert not (tmp_path / "marker").exists()
    assert cluster.starts() == []


def assert_refused_credentials(cluster: Cluster, setting: str, tmp_path: Path) -> None:
    """The worker ``w1`` refused to start in one line naming ``setting`` (the
    password never logged), and ran nothing."""
    log = cluster.log_since("w1", 0)
    (refusal,) = lines_with(log, "refuses to start")
    assert setting in refusal
    assert "refused the credentials" in refusal
    assert "not-the-password" not in log  # the password is never logged
    assert_no_traceback(log)
    assert " ready." not in log
    assert not (tmp_path / "marker").exists()


def test_a_worker_whose_redis_refuses_the_password_refuses_to_start(
    clusters: Callable[..., StartupCluster], redis_url: str, tmp_path: Path
) -> None:
    with RedisServerProcess(password="the-right-one") as guarded:
        wrong = f"redis://:not-the-password@127.0.0.1:{guarded.port}/0"
        cluster = clusters(redis_url, E2E_DGS_REDIS_URL=wrong)
        cluster.send("e2e.marker")
        proc = start_worker_process(cluster)
        assert exit_status(proc) == EX_CONFIG
    assert_refused_credentials(cluster, "dgs_redis_url", tmp_path)


def test_a_worker_whose_database_refuses_the_password_refuses_to_start(
    clusters: Callable[..., StartupCluster], redis_url: str, tmp_path: Path
) -> None:
    """A worker that cannot write its runs' records would take beat's
    dispatches and fail them (no run row) while other workers sit idle."""
    if not postgres_available():
        pytest.skip("PostgreSQL binaries not found")
    server = PostgresServer(password="the-right-one").start()
    try:
        wrong = server.url(password="not-the-password")
        cluster = clusters(redis_url, E2E_DATABASE_URL=wrong)
        cluster.send("e2e.marker")
        proc = start_worker_process(cluster)
        assert exit_status(proc) == EX_CONFIG
    finally:
        server.stop()
    assert_refused_credentials(cluster, "dgs_database_url", tmp_path)


def test_a_worker_started_with_redis_down_registers_once_it_answers(
    clusters: Callable[..., StartupCluster], redis_url: str, later_redis: RedisServerProcess
) -> None:
    # The broker is up; celery-dgs's own Redis (dgs_redis_url) is not yet.
    cluster = clusters(redis_url, E2E_DGS_REDIS_URL=later_redis.url)
    start_worker_process(cluster)
    wait_for(
        lambda: len(lines_with(cluster.log_since("w1", 0), "registering w1@node1 failed")) >= 2,
        30,
        "two failed registrations",
    )
    later_redis.start()
    wait_for(
        lambda: lines_with(cluster.log_since("w1", 0), "registered w1@node1 at attempt"),
        30,
        "the registration after Redis started",
    )
    log = cluster.log_since("w1", 0)
    failed = lines_with(log, "registering w1@node1 failed")
    assert all("is unreachable" in line and "retrying in" in line for line in failed), failed
    assert_no_traceback(log)


# -- beat ----------------------------------------------------------------------------
def test_a_worker_whose_sqlite_directory_is_missing_says_so_then_runs_once_it_exists(
    clusters: Callable[..., StartupCluster], redis_url: str, tmp_path: Path
) -> None:
    missing = tmp_path / "not-yet" / "dgs.sqlite3"
    cluster = clusters(redis_url, E2E_DATABASE_URL=f"sqlite:///{missing}")
    cluster.database_url = f"sqlite:///{missing}"
    start_worker_process(cluster)
    wait_for(lambda: " ready." in cluster.log_since("w1", 0), 30, "the worker to be ready")
    log = cluster.log_since("w1", 0)
    (line,) = lines_with(log, "of the SQLite file does not exist")
    assert f"the directory {str(missing.parent)!r}" in line
    assert "the schedule store cannot be read at start" in line
    assert "(dgs_database_url) is unreachable" in line
    assert "the scheduled runs sent to this worker fail until it can be" in line
    assert_no_traceback(log)
    missing.parent.mkdir()
    cluster.start_beat()
    wait_for(lambda: (tmp_path / "marker").exists(), 30, "the scheduled run")
    assert_no_traceback(cluster.log_since("w1", 0))


def test_beat_started_before_redis_retries_then_leads_and_dispatches(
    clusters: Callable[..., StartupCluster], later_redis: RedisServerProcess, tmp_path: Path
) -> None:
    cluster = clusters(later_redis.url)
    beat = cluster.start_beat()
    wait_for(
        lambda: len(lines_with(cluster.log_since("beat", 0), "cannot start (attempt")) >= 2,
        30,
        "two failed start-up attempts",
    )
    assert beat.poll() is None
    later_redis.start()
    wait_for(lambda: "leading as" in cluster.log_since("beat", 0), 30, "beat to lead")
    cluster.start_worker("w1", "node1")
    wait_for(lambda: (tmp_path / "marker").exists(), 30, "the scheduled run")
    log = cluster.log_since("beat", 0)
    attempts = lines_with(log, "cannot start (attempt")
    assert all(
        "Redis at" in a and "is unreachable" in a and "retrying in" in a for a in attempts
    ), attempts
    assert "retrying in 1s" in attempts[0]
    assert "retrying in 2s" in attempts[1]
    assert_no_traceback(log)
    up_to_lead = log[: log.index("leading as")]
    assert up_to_lead.count("\n") < BEAT_START_LINES, log
    assert cluster.outcomes("e2e.marker")[:1] in (["running"], ["success"])


def test_beat_names_the_celery_beat_schedule_it_does_not_run(
    clusters: Callable[..., StartupCluster], redis_url: str, tmp_path: Path
) -> None:
    """A project moving from Celery beat keeps its ``beat_schedule`` and its
    ``task_routes``: beat says at its start that it does not run those
    entries, and how to declare each, and that its runs do not follow the
    route; it serves the declared schedules all the same."""
    # e2e.p40: a task of the project not declared to celery-dgs here
    legacy = {
        "beat_schedule": {"every-10s": {"task": "e2e.p40", "schedule": 10}},
        "task_routes": {"e2e.marker": {"queue": "reports"}},
    }
    cluster = clusters(redis_url, E2E_EXTRA_CONF=json.dumps(legacy))
    cluster.start_beat()
    cluster.start_worker("w1", "node1")
    wait_for(lambda: (tmp_path / "marker").exists(), 30, "the declared schedule's run")
    (line,) = lines_with(cluster.log_since("beat", 0), "beat_schedule has")
    assert "WARNING" in line
    assert (
        "beat_schedule has 1 entry that celery-dgs does not run: declare each task in "
        """dgs_schedules (or with @dgs.periodic / @dgs.cron), e.g. 'every-10s' -> """
        """"e2e.p40": {"kind": "periodic", "period": 10}"""
    ) in line
    (routed,) = lines_with(cluster.log_since("beat", 0), "Celery routes task")
    assert "WARNING" in routed
    assert "'e2e.marker' to queue 'reports'" in routed
    assert "declare pool='reports'" in routed


def test_beat_started_before_its_database_is_reachable_retries_then_dispatches(
    clusters: Callable[..., StartupCluster], redis_url: str, tmp_path: Path
) -> None:
    missing = tmp_path / "not-yet" / "dgs.sqlite3"
    cluster = clusters(redis_url, E2E_DATABASE_URL=f"sqlite:///{missing}")
    cluster.database_url = f"sqlite:///{missing}"
    beat = cluster.start_beat()
    wait_for(
        lambda: len(lines_with(cluster.log_since("beat", 0), "cannot start (attempt")) >= 2,
        30,
        "two failed start-up attempts",
    )
    assert beat.poll() is None
    missing.parent.mkdir()
    wait_for(lambda: "leading as" in cluster.log_since("beat", 0), 30, "beat to lead")
    cluster.start_worker("w1", "node1")
    wait_for(lambda: (tmp_path / "marker").exists(), 30, "the scheduled run")
    log = cluster.log_since("beat", 0)
    attempts = lines_with(log, "cannot start (attempt")
    assert all(
        "the database at" in a and "(dgs_database_url) is unreachable" in a for a in attempts
    ), attempts
    assert all(
        f"the directory {str(missing.parent)!r} of the SQLite file does not exist" in a
        for a in attempts
    ), attempts
    assert_no_traceback(log)
    assert log[: log.index("leading as")].count("\n") < BEAT_START_LINES, log


def test_beat_with_a_wrong_redis_password_exits_after_one_line(
    clusters: Callable[..., StartupCluster], tmp_path: Path
) -> None:
    with RedisServerProcess(password="the-right-one") as guarded:
        cluster = clusters(f"redis://:not-the-password@127.0.0.1:{guarded.port}/0")
        beat = cluster.start_beat()
        assert exit_status(beat) == EX_CONFIG
    log = cluster.log_since("beat", 0)
    (line,) = lines_with(log, "celery-dgs beat: cannot start")
    assert "refused the credentials" in line
    assert "fix the password in broker_url" in line
    assert "not-the-password" not in log
    assert_no_traceback(log)


def test_beat_with_an_unknown_dgs_setting_exits_after_one_line(
    clusters: Callable[..., StartupCluster], redis_url: str
) -> None:
    cluster = clusters(redis_url, E2E_EXTRA_CONF='{"dgs_no_such_setting": 1}')
    beat = cluster.start_beat()
    assert exit_status(beat) == EX_CONFIG
    log = cluster.log_since("beat", 0)
    (line,) = lines_with(log, "celery-dgs beat: cannot start")
    assert "'dgs_no_such_setting'" in line
    assert_no_traceback(log)


def test_beat_with_postgresql_unreachable_retries_one_line_per_attempt(
    clusters: Callable[..., StartupCluster], redis_url: str
) -> None:
    url = f"postgresql+psycopg://dgs:secret@127.0.0.1:{free_port()}/dgs"
    cluster = clusters(redis_url, E2E_DATABASE_URL=url)
    beat = cluster.start_beat()
    wait_for(
        lambda: len(lines_with(cluster.log_since("beat", 0), "cannot start (attempt")) >= 2,
        30,
        "two failed start-up attempts",
    )
    assert beat.poll() is None  # still waiting for its database
    log = cluster.log_since("beat", 0)
    attempts = lines_with(log, "cannot start (attempt")
    where = "the database at postgresql+psycopg://dgs:**@127.0.0.1:"
    assert all(where in a and "(dgs_database_url) is unreachable" in a for a in attempts), attempts
    assert "secret" not in log
    assert_no_traceback(log)


# -- a dispatch the worker has no declaration for -------------------------------------
def test_a_dispatch_of_a_schedule_the_worker_does_not_declare_does_not_run(
    clusters: Callable[..., StartupCluster], redis_url: str, tmp_path: Path
) -> None:
    """Beat and the worker disagree on the declarations (a deploy in progress):
    a message beat sent for schedule ``e2e.marker@elsewhere``, which this worker
    does not declare, must not run unsupervised."""
    from celery import Celery

    cluster = clusters(redis_url)
    cluster.start_worker("w1", "node1")
    client = Celery("e2e-client", broker=redis_url)
    client.conf.task_serializer = "json"
    try:
        client.send_task(
            "e2e.marker",
            queue="celery",
            headers={
                "dgs_schedule": "e2e.marker@elsewhere",
                "dgs_dispatch_id": "d-elsewhere",
            },
        )
        client.send_task("e2e.marker", queue="celery")  # ad hoc: runs under the lease
    finally:
        client.close()
    wait_for(lambda: "success" in cluster.outcomes("e2e.marker"), 30, "the ad-hoc run")
    log = cluster.log_since("w1", 0)
    refused = lines_with(log, "which this worker does not declare")
    assert refused, log
    assert "e2e.marker@elsewhere" in refused[0]
    assert [e["name"] for e in cluster.starts()] == ["marker"]  # the ad-hoc run only
    assert "running it unsupervised" not in log


def test_beat_waiting_to_start_stops_at_once_on_sigterm(
    clusters: Callable[..., StartupCluster], later_redis: RedisServerProcess
) -> None:
    cluster = clusters(later_redis.url)
    beat = cluster.start_beat()
    wait_for(
        lambda: lines_with(cluster.log_since("beat", 0), "cannot start (attempt"),
        30,
        "a failed start-up attempt",
    )
    beat.send_signal(signal.SIGTERM)
    assert exit_status(beat, timeout=5) == 0
    log = cluster.log_since("beat", 0)
    assert_no_traceback(log)
    assert "leading as" not in log


def test_a_worker_stopped_while_redis_is_down_logs_no_traceback(
    clusters: Callable[..., StartupCluster], redis_url: str, later_redis: RedisServerProcess
) -> None:
    """Registration failed at start and leaving fails at the warm shutdown: each
    is one line (the registration expires by itself)."""
    cluster = clusters(redis_url, E2E_DGS_REDIS_URL=later_redis.url)
    proc = start_worker_process(cluster)
    wait_for(
        lambda: lines_with(cluster.log_since("w1", 0), "registering w1@node1 failed"),
        30,
        "a failed registration",
    )
    proc.send_signal(signal.SIGTERM)
    assert exit_status(proc) == 0
    log = cluster.log_since("w1", 0)
    assert lines_with(log, "deregistering w1@node1 failed"), log
    assert_no_traceback(log)
