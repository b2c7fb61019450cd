"""Celery's routing of a scheduled task, which beat's dispatches do not follow.

Beat sends each run to one worker of the schedule's ``pool`` (the app's
default queue when none is declared), through that worker's own queue:
``task_routes`` and a task's own ``queue`` do not apply. A project moving
from Celery beat that routed a task to a queue of its own would see its runs
land on the default queue's workers without a word. :func:`routing_warnings`
names each scheduled task that Celery routes elsewhere than its schedules'
pool, with the ``pool=`` to declare; ``celery dgs check`` prints them and beat
logs them at its start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core.spec import ScheduleSpec

#: Schedules a warning names per task; the others are counted.
SHOWN_SCHEDULES = 3


def routed_queue(app: Any, task_name: str) -> str | None:
    """The queue Celery sends ``task_name`` to (``task_routes``, else the
    task's ``queue``, else the default queue); ``None`` when the router
    cannot say without a call's arguments (a routing function that fails)."""
    task = app.tasks.get(task_name)
    own = getattr(task, "queue", None)
    try:
        options = app.amqp.router.route({"queue": own} if own else {}, task_name, (), {})
    except Exception:
        return None
    queue = options.get("queue")
    name = getattr(queue, "name", queue)
    return str(name) if name else None


def routing_warnings(app: Any, specs: Mapping[str, ScheduleSpec]) -> list[str]:
    """One line per scheduled task whose Celery route is not the pool of
    some of its ``specs``."""
    default = str(app.conf.task_default_queue or "celery")
    routed: dict[str, str | None] = {}
    astray: dict[tuple[str, str, str], list[str]] = {}
    for name, spec in sorted(specs.items()):
        if spec.task not in routed:
            routed[spec.task] = routed_queue(app, spec.task)
        queue, pool = routed[spec.task], spec.pool or default
        if queue is not None and queue != pool:
            astray.setdefault((spec.task, queue, pool), []).append(name)
    lines = []
    for (task, queue, pool), names in astray.items():
        shown = ", ".join(names[:SHOWN_SCHEDULES])
        more = len(names) - SHOWN_SCHEDULES
        which = shown + (f" and {more} more" if more > 0 else "")
        on = f"the default queue {pool!r}" if pool == default else f"pool {pool!r}"
        lines.append(
            f"Celery routes task {task!r} to queue {queue!r} (task_routes or the task's "
            f"queue), but beat sends the runs of {which} to the workers of {on}, through "
            f"each worker's own queue: declare pool={queue!r} to run them on that "
            "queue's workers"
        )
    return lines
