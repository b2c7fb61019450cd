"""Celery's ``task_routes`` (and a task's own ``queue``), which beat's
dispatches do not follow: ``celery dgs check`` names each scheduled task
routed elsewhere than its schedules' pool, with the ``pool=`` to declare
(celery_dgs/task_routing.py); beat logs the same lines at its start
(tests/e2e/test_startup_e2e.py)."""

from __future__ import annotations

from celery_dgs.task_routing import routing_warnings
from tests.cli.conftest import World, make_app


def test_check_names_a_scheduled_task_routed_to_another_queue(world: World) -> None:
    app = world.app
    app.conf.dgs_schedules = {
        "proj.report@daily": {"kind": "periodic", "period": 86400},
        "proj.report@weekly": {"kind": "periodic", "period": 604800},
        "proj.sync": {"kind": "periodic", "period": 60, "pool": "sync"},
        "proj.plain": {"kind": "periodic", "period": 60},
    }
    app.conf.task_routes = {"proj.report": {"queue": "reports"}, "proj.sync": {"queue": "sync"}}
    for name in ("proj.report", "proj.sync", "proj.plain"):
        app.task(name=name)(_noop)
    result = world.invoke("check")
    assert result.exit_code == 0, result.output  # a warning, not an invalid declaration
    [line] = [x for x in result.stderr.splitlines() if "routes" in x]
    assert line == (
        "WARNING Celery routes task 'proj.report' to queue 'reports' (task_routes or the "
        "task's queue), but beat sends the runs of proj.report@daily, proj.report@weekly to "
        "the workers of the default queue 'celery', through each worker's own queue: declare "
        "pool='reports' to run them on that queue's workers"
    )


def _noop() -> None:
    """A task body."""


def test_a_task_queue_and_a_declared_pool_and_an_unroutable_task(
    sqlite_url: str, redis_url: str
) -> None:
    from celery_dgs.core.spec import PeriodicSpec

    app = make_app(sqlite_url, redis_url)
    app.task(name="t.own", queue="gpu")(_noop)

    def refuse(name: str, args: object, kwargs: object, options: object, **kw: object) -> None:
        if name == "t.any":
            raise TypeError("needs the call's arguments")

    app.conf.task_routes = [{"t.fine": {"queue": "fine"}}, refuse]
    specs = {
        "t.own": PeriodicSpec(task="t.own", scheduling_period=60, pool="other"),
        "t.fine": PeriodicSpec(task="t.fine", scheduling_period=60, pool="fine"),
        "t.any": PeriodicSpec(task="t.any", scheduling_period=60),
    }
    assert routing_warnings(app, specs) == [
        "Celery routes task 't.own' to queue 'gpu' (task_routes or the task's queue), but "
        "beat sends the runs of t.own to the workers of pool 'other', through each worker's "
        "own queue: declare pool='gpu' to run them on that queue's workers"
    ]
    app.close()
