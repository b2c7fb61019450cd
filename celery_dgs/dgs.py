"""``DGS(app)``: the one object a project creates.

It reads ``app.conf.dgs_*``, collects schedule declarations (decorators and
``dgs_schedules``), turns on Celery's per-worker direct queues (beat routes
each dispatch to one chosen worker) and installs the worker signal hooks.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from .declarations import DEFAULT_PRIORITY, Declarations
from .settings import DgsSettings

if TYPE_CHECKING:
    from .runtime_schedules import RuntimeSchedules

T = TypeVar("T")

_INSTANCES: weakref.WeakKeyDictionary[Any, DGS] = weakref.WeakKeyDictionary()

Duration = timedelta | float | int
TimeWindow = tuple[str, str]


class DGS:
    """Deadline greedy scheduling for one Celery app.

    ``DGS(app)`` is cheap and idempotent per app (a second call returns the
    same declarations). Settings are read lazily, so ``app.conf`` may be
    completed after this object is created.
    """

    def __init__(self, app: Any, *, install_worker_hooks: bool = True) -> None:
        self.app = app
        existing = _INSTANCES.get(app)
        self.declarations: Declarations = (
            existing.declarations if existing is not None else Declarations()
        )
        self._settings: DgsSettings | None = None
        self._conf_loaded = False
        _INSTANCES[app] = self
        # Beat routes every dispatch to one worker's own queue.
        app.conf.worker_direct = True
        if install_worker_hooks:
            from .worker.hooks import install_worker_hooks as install

            install(app, self)

    # -- settings and declarations ------------------------------------------------
    @property
    def settings(self) -> DgsSettings:
        if self._settings is None:
            self._settings = DgsSettings.from_conf(self.app.conf)
        return self._settings

    @cached_property
    def schedules(self) -> RuntimeSchedules:
        """Runtime schedules, which the API adds and removes while beat runs
        (:class:`~celery_dgs.runtime_schedules.RuntimeSchedules`)."""
        from .runtime_schedules import RuntimeSchedules

        return RuntimeSchedules.for_app(self.app, self.settings)

    def load_conf_schedules(self) -> Declarations:
        """Add ``app.conf.dgs_schedules`` to the declarations (once)."""
        if not self._conf_loaded:
            self.declarations.declare_from_conf(self.settings.schedules)
            self._conf_loaded = True
        return self.declarations

    def all_declarations(self, *, import_modules: bool = True) -> Declarations:
        """Decorated tasks (importing the app's task modules) plus config entries,
        with a check that every schedule's task exists, and periodic schedules
        declared without a cooldown given the default one
        (``dgs_default_cooldown_fraction``); beat, ``sync``, ``simulate`` and
        workers all read these specs."""
        if import_modules:
            self.app.loader.import_default_modules()
            self.app.finalize(auto=True)
        decl = self.load_conf_schedules()
        decl.check_tasks(self.app.tasks)
        return decl.with_default_cooldown(self.settings.default_cooldown_fraction)

    def _task_name(self, task: Any) -> str:
        name = getattr(task, "name", None)
        if isinstance(name, str):
            return name
        from celery.utils.imports import gen_task_name

        return str(gen_task_name(self.app, task.__name__, task.__module__))

    def _decorator(self, kind: str, fields: dict[str, Any]) -> Callable[[T], T]:
        def decorate(task: T) -> T:
            self.declarations.declare(
                kind, self._task_name(task), fields, source=f"@dgs.{kind}"
            )
            return task

        return decorate

    def periodic(
        self,
        period: Duration,
        *,
        cooldown: Duration | None = None,
        configuration: str = "",
        tz: Any = "UTC",
        blackouts: Iterable[TimeWindow] = (),
        max_expected_duration: Duration | None = None,
        max_allowed_duration: Duration | None = None,
        dont_run_on_nodes: Iterable[str] = (),
        duration_override: Duration | None = None,
        avoid_blackout_overlap: bool = False,
        pool: str | None = None,
        priority: int = DEFAULT_PRIORITY,
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Callable[[T], T]:
        """Declare that the task's data must never be older than ``period``.

        Place it above ``@app.task``. ``cooldown`` is the minimum time after the
        last good run ends before it may start again; ``None`` (the default):
        ``dgs_default_cooldown_fraction`` of the time from that end to its
        ``should_start_by``, at most that fraction of ``period``; ``0``:
        eligible again as soon as it ends (seed 000's rule). ``priority``
        (0-99, lower first) decides who waits when not every due schedule can
        start (``docs/configuration.md``, "Priorities").
        """
        return self._decorator("periodic", _fields(locals()))

    def cron(
        self,
        schedule: str,
        *,
        within: Duration,
        configuration: str = "",
        tz: Any = "UTC",
        blackouts: Iterable[TimeWindow] = (),
        max_expected_duration: Duration | None = None,
        max_allowed_duration: Duration | None = None,
        dont_run_on_nodes: Iterable[str] = (),
        duration_override: Duration | None = None,
        avoid_blackout_overlap: bool = False,
        pool: str | None = None,
        priority: int = DEFAULT_PRIORITY,
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Callable[[T], T]:
        """Declare a run at each ``schedule`` time (5-field cron, in ``tz``) that
        must finish ``within`` that long after it."""
        return self._decorator("cron", _fields(locals()))


def _fields(arguments: dict[str, Any]) -> dict[str, Any]:
    """A decorator's keyword arguments as declaration fields. The friendly names
    (``period``, ``within``, ``blackouts``, ...) are mapped to spec fields by
    :data:`~celery_dgs.declarations.FIELD_ALIASES`, and the spec validates them."""
    fields = {key: value for key, value in arguments.items() if key != "self"}
    if fields.get("kwargs") is None:  # anything else is validated by the spec
        fields["kwargs"] = {}
    return fields


def get_dgs(app: Any) -> DGS:
    """The app's :class:`DGS`, created (config-only declarations) if there is none."""
    existing = _INSTANCES.get(app)
    return existing if existing is not None else DGS(app)
