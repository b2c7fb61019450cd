"""Which Celery settings are safe with celery-dgs, checked when a worker starts.

celery-dgs does not need the broker to redeliver anything: a dispatch that no
worker started within ``dgs_dispatch_timeout`` is taken back and dispatched
again by beat, and a run whose worker died is taken over through its lease.
Redelivery only adds duplicate messages (each is recognised by its dispatch id
and recorded as a skip, never run twice). Recommended::

    task_acks_late = False              # the default
    task_reject_on_worker_lost = False  # the default
    worker_prefetch_multiplier = 1
    # only if task_acks_late is True, on a Redis broker:
    broker_transport_options = {"visibility_timeout": <above the longest max_allowed_duration>}

``DGS(app)`` sets the ones in :data:`PLUGIN_DEFAULTS` that the application did
not set (:func:`apply_plugin_defaults`), and logs it.
:func:`check_celery_settings` returns one :class:`CeleryAdvice` per unsafe
value, naming the setting and the safe value; the worker logs each as a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .core.spec import ScheduleSpec

#: kombu's Redis transport default (seconds) when broker_transport_options has none.
REDIS_DEFAULT_VISIBILITY_TIMEOUT_S = 3600.0
_REDIS_SCHEMES = ("redis", "rediss", "sentinel", "redis+socket")


@dataclass(frozen=True, kw_only=True)
class CeleryAdvice:
    setting: str
    found: Any
    safe: str
    why: str

    def __str__(self) -> str:
        return (
            f"{self.setting} = {self.found!r} is unsafe with celery-dgs: {self.why}; "
            f"use {self.safe}"
        )


#: Celery settings celery-dgs needs, with the value ``DGS(app)`` gives them
#: when the application did not set them, and why.
PLUGIN_DEFAULTS: dict[str, tuple[Any, str]] = {
    "worker_prefetch_multiplier": (
        1,
        "Celery's default of 4 lets a worker reserve dispatches it cannot start yet",
    ),
}
#: The names Celery's old-style configuration gives them.
_OLD_NAMES = {"worker_prefetch_multiplier": "CELERYD_PREFETCH_MULTIPLIER"}


def set_by_application(conf: Any, setting: str) -> bool:
    """Whether the application gave ``setting`` a value in ``conf`` (a Celery
    ``Settings``): in its changes, its configuration source or another
    plugin's defaults; not only Celery's own default (the last map)."""
    names = {setting, _OLD_NAMES.get(setting, setting)}
    own = [conf.changes, *conf.defaults[:-1]]
    return any(name in m for m in own for name in names)


def apply_plugin_defaults(conf: Any) -> list[str]:
    """Set each of :data:`PLUGIN_DEFAULTS` the application did not set; one
    line for each set, saying so."""
    lines = []
    for setting, (value, why) in PLUGIN_DEFAULTS.items():
        if set_by_application(conf, setting):
            continue
        conf[setting] = value
        lines.append(
            f"{setting} = {value!r} set by celery-dgs ({why}); set it in the app's "
            "configuration to choose another value"
        )
    return lines


def _redis_broker(conf: Mapping[str, Any]) -> bool:
    url = conf.get("broker_url") or ""
    first = str(url).split(";", 1)[0]
    return first.split("://", 1)[0].lower() in _REDIS_SCHEMES


def check_celery_settings(
    conf: Mapping[str, Any],
    specs: Mapping[str, ScheduleSpec],
    tasks: Mapping[str, Any] | None = None,
) -> list[CeleryAdvice]:
    """The unsafe Celery settings of ``conf`` for the scheduled ``specs``.

    ``tasks`` (name → task object) lets a task's own ``acks_late`` /
    ``reject_on_worker_lost`` attribute override the app's setting, as in Celery.
    """
    advice: list[CeleryAdvice] = []
    prefetch = conf.get("worker_prefetch_multiplier", 4)
    if prefetch != 1:
        advice.append(
            CeleryAdvice(
                setting="worker_prefetch_multiplier",
                found=prefetch,
                safe="1",
                why="a worker reserves messages it cannot start yet; a scheduled run "
                "waits behind a long one until its dispatch times out and is taken back",
            )
        )
    tasks = tasks or {}

    def task_flag(spec: ScheduleSpec, attr: str, setting: str) -> bool:
        value = getattr(tasks.get(spec.task), attr, None)
        return bool(conf.get(setting, False) if value is None else value)

    late = {n: s for n, s in specs.items() if task_flag(s, "acks_late", "task_acks_late")}
    if not late:
        return advice
    rejecting = sorted(
        n
        for n, s in late.items()
        if task_flag(s, "reject_on_worker_lost", "task_reject_on_worker_lost")
    )
    if rejecting:
        advice.append(
            CeleryAdvice(
                setting="task_reject_on_worker_lost",
                found=True,
                safe="False",
                why="with acks_late the message of a killed worker is requeued and delivered "
                f"again (schedules {', '.join(rejecting)}); celery-dgs already takes the "
                "run over through its lease",
            )
        )
    if _redis_broker(conf):
        options = conf.get("broker_transport_options") or {}
        vt = float(options.get("visibility_timeout", REDIS_DEFAULT_VISIBILITY_TIMEOUT_S))
        unbounded = sorted(n for n, s in late.items() if s.max_allowed_duration is None)
        bounded = {
            n: s.max_allowed_duration.total_seconds()
            for n, s in late.items()
            if s.max_allowed_duration is not None
        }
        longest = max(bounded.values(), default=0.0)
        if unbounded or longest >= vt:
            if unbounded:
                which = f"schedules {', '.join(unbounded[:5])} have no max_allowed_duration"
            else:
                which = f"schedule {max(bounded, key=bounded.__getitem__)} may run {longest:g}s"
            advice.append(
                CeleryAdvice(
                    setting="broker_transport_options['visibility_timeout']",
                    found=vt,
                    safe="task_acks_late=False, or a max_allowed_duration on every acks_late "
                    "schedule and a visibility_timeout above the longest"
                    + ("" if unbounded else f" ({longest:g}s)"),
                    why=f"with task_acks_late the Redis broker redelivers a message still running "
                    f"after visibility_timeout ({which}); each redelivery is dropped as a skip row "
                    "(or discarded with no row once the message has expired)",
                )
            )
    return advice
