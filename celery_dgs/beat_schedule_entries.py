"""Celery's own ``beat_schedule``, which the deadline scheduler does not run.

A project moving from Celery beat keeps its ``beat_schedule`` entries in its
configuration; ``celery_dgs:DeadlineScheduler`` serves only the schedules
declared to celery-dgs, so those entries would silently stop running. Beat
logs :func:`beat_schedule_warning` at its start and ``celery dgs check``
prints it: each entry named, with the ``dgs_schedules`` entry that declares
the same task (a period for an interval; for a ``crontab`` its expression,
``within`` its shortest gap between fires, a cron schedule's required
deadline, and the entry's ``options`` queue as its ``pool``), where one can be
derived. An entry whose task is declared to celery-dgs already is not named.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import Any

from .core.cron import shortest_cron_gap

#: Entries a warning shows with their equivalent; the others are counted.
SHOWN_ENTRIES = 5


def beat_schedule_warning(conf: Any, declared_tasks: Collection[str] = ()) -> str | None:
    """One line on the app's ``beat_schedule`` entries whose task is not among
    ``declared_tasks`` (``None``: it has none)."""
    entries = getattr(conf, "beat_schedule", None) or {}
    if not isinstance(entries, Mapping) or not entries:
        return None
    names = sorted((n for n in entries if _task_of(entries[n]) not in declared_tasks), key=str)
    if not names:
        return None
    zone = getattr(conf, "timezone", None)
    zone = None if zone in (None, "UTC") else str(zone)
    shown = [_entry_text(str(name), entries[name], zone) for name in names[:SHOWN_ENTRIES]]
    more = len(names) - len(shown)
    count = f"{len(names)} entr{'y' if len(names) == 1 else 'ies'}"
    return (
        f"beat_schedule has {count} that celery-dgs does not run: declare each task "
        f"in dgs_schedules (or with @dgs.periodic / @dgs.cron), e.g. "
        + "; ".join(shown)
        + (f"; and {more} more" if more > 0 else "")
    )


def _task_of(entry: Any) -> str | None:
    """An entry's task name (``None``: it names none)."""
    task = entry.get("task") if isinstance(entry, Mapping) else None
    return str(task) if task else None


def _entry_text(name: str, entry: Any, zone: str | None) -> str:
    """``NAME -> "task": {...}``: the entry and its ``dgs_schedules``
    equivalent (a ``crontab`` in the app's ``timezone``, as Celery beat reads
    it), or why there is none."""
    if not isinstance(entry, Mapping) or not entry.get("task"):
        return f"{name!r} (no task)"
    task = str(entry["task"])
    fields = schedule_fields(entry.get("schedule"))
    if fields is None:
        return f"{name!r} ({task}: its schedule has no dgs equivalent to derive)"
    if fields["kind"] == "cron":
        if zone is not None:
            fields["tz"] = zone
        gap = shortest_cron_gap(fields["cron"], zone or "UTC")
        if gap is not None:
            fields["within"] = int(gap.total_seconds())
    options = entry.get("options")
    queue = options.get("queue") if isinstance(options, Mapping) else None
    if isinstance(queue, str) and queue:
        fields["pool"] = queue
    for key in ("args", "kwargs"):
        if entry.get(key):
            fields[key] = list(entry[key]) if key == "args" else dict(entry[key])
    try:
        declared = json.dumps({task: fields})[1:-1]
    except (TypeError, ValueError):  # arguments JSON cannot carry
        return f"{name!r} ({task}: its arguments are not JSON)"
    return f"{name!r} -> {declared}"


def schedule_fields(schedule: Any) -> dict[str, Any] | None:
    """The ``dgs_schedules`` fields of a Celery beat ``schedule`` value: a
    number of seconds or a ``timedelta`` (or Celery's ``schedule`` of one) is
    a period; a ``crontab`` is its expression; ``None`` for anything else."""
    every = getattr(schedule, "run_every", schedule)
    if isinstance(every, timedelta):
        every = every.total_seconds()
    if isinstance(every, (int, float)) and not isinstance(every, bool) and every > 0:
        return {"kind": "periodic", "period": every}
    parts = [
        getattr(schedule, f"_orig_{field}", None)
        for field in ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
    ]
    if all(isinstance(p, (str, int)) for p in parts):
        return {"kind": "cron", "cron": " ".join(str(p) for p in parts)}
    return None
