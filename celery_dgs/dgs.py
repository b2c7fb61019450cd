"""``DGS(app)``: the one object a project creates.

It reads ``app.conf.dgs_*``, collects schedule declarations (decorators and
``dgs_schedules``), turns on Celery's per-worker direct queues (beat routes
each dispatch to one chosen worker) and installs the worker signal hooks.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from .celery_settings import apply_plugin_defaults
from .core.spec import CheckSpec
from .declarations import DEFAULT_PRIORITY, FIELD_ALIASES, Declarations
from .errors import ScheduleConfigError
from .settings import DgsSettings

if TYPE_CHECKING:
    from .deferred import DeferredChecks
    from .runtime_schedules import RuntimeSchedules

T = TypeVar("T")

logger = logging.getLogger("celery_dgs")

_INSTANCES: weakref.WeakKeyDictionary[Any, DGS] = weakref.WeakKeyDictionary()

#: A duration: a timedelta, seconds, or text as the command line takes it ("1h30m").
Duration = timedelta | float | int | str
TimeWindow = tuple[str, str]
#: The default of a required decorator field: left out, it is reported as the
#: declaration's error (``field 'period' is required``), not a ``TypeError``.
_LEFT_OUT: Any = object()


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
        #: Tasks declared as deferred checks (``@dgs.deferred``): their template
        #: spec and their ``on_exists`` choice, by task name.
        self.check_templates: dict[str, CheckSpec] = (
            existing.check_templates if existing is not None else {}
        )
        self.check_on_exists: dict[str, str] = (
            existing.check_on_exists if existing is not None else {}
        )
        #: Tasks whose ``@dgs.deferred`` declaration is invalid, by task name:
        #: not declared (``check_at`` says why); ``check`` lists them, the
        #: worker and beat log them at their start.
        self.check_template_errors: dict[str, ScheduleConfigError] = (
            existing.check_template_errors if existing is not None else {}
        )
        self._settings: DgsSettings | None = None
        self._conf_loaded = False
        #: The Celery settings this object set (:func:`apply_plugin_defaults`), one line each.
        self.celery_defaults_set: list[str] = (
            existing.celery_defaults_set if existing is not None else []
        )
        _INSTANCES[app] = self
        # Beat routes every dispatch to one worker's own queue.
        app.conf.worker_direct = True
        if existing is None:
            if app.configured:
                self._set_celery_defaults()
            else:
                app.on_after_configure.connect(self._set_celery_defaults, weak=False)
        if install_worker_hooks:
            from .worker.hooks import install_worker_hooks as install

            install(app, self)

    def _set_celery_defaults(self, **_: Any) -> None:
        """Give the Celery settings the plugin needs their value where the
        application did not set them; a worker or beat logs each line when it
        starts (its logging is set up by then)."""
        lines = apply_plugin_defaults(self.app.conf)
        if not lines:
            return
        self.celery_defaults_set.extend(lines)
        from celery.signals import beat_init, worker_init

        worker_init.connect(self._log_celery_defaults, weak=False)
        beat_init.connect(self._log_celery_defaults, weak=False)

    def _log_celery_defaults(self, sender: Any = None, **_: Any) -> None:
        if sender is not None and getattr(sender, "app", None) is not self.app:
            return
        for line in self.celery_defaults_set:
            logger.info("celery-dgs: %s", line)

    # -- settings and declarations ------------------------------------------------
    @property
    def settings(self) -> DgsSettings:
        if self._settings is None:
            namespace = getattr(self.app, "namespace", None)
            self._settings = DgsSettings.from_conf(self.app.conf, namespace=namespace)
        return self._settings

    @cached_property
    def schedules(self) -> RuntimeSchedules:
        """Runtime schedules, which the API adds and removes while beat runs
        (:class:`~celery_dgs.runtime_schedules.RuntimeSchedules`)."""
        from .runtime_schedules import RuntimeSchedules

        return RuntimeSchedules.for_app(self.app, self.settings)

    @cached_property
    def checks(self) -> DeferredChecks:
        """Deferred checks of the ``@dgs.deferred`` tasks: add, move, cancel
        (:class:`~celery_dgs.deferred.DeferredChecks`)."""
        from .deferred import DeferredChecks

        return DeferredChecks.for_app(
            self.app,
            self.settings,
            self.check_templates,
            self.check_on_exists,
            invalid=self.check_template_errors,
        )

    def check_at(
        self,
        task: Any,
        key: Any,
        *,
        at: datetime | None = None,
        after: Duration | None = None,
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
        on_exists: str | None = None,
    ) -> str:
        """Add the check of ``task`` for ``key`` at ``at`` (an aware datetime) or
        ``after`` from now: :meth:`DeferredChecks.at <celery_dgs.deferred.DeferredChecks.at>`."""
        return self.checks.at(
            task, key, at=at, after=after, args=args, kwargs=kwargs, on_exists=on_exists
        )

    def cancel(self, task: Any, key: Any) -> bool:
        """Cancel the pending check of ``task`` for ``key``; True if one was pending."""
        return self.checks.cancel(task, key)

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
        decl.check_tasks(self.app.tasks, max_argument_bytes=self.settings.max_argument_bytes)
        return decl.with_default_cooldown(self.settings.default_cooldown_fraction)

    def _task_name(self, task: Any) -> str:
        name = getattr(task, "name", None)
        if isinstance(name, str):
            return name
        from celery.utils.imports import gen_task_name

        return str(gen_task_name(self.app, task.__name__, task.__module__))

    def _decorator(self, kind: str, fields: dict[str, Any]) -> Callable[[T], T]:
        def decorate(task: T) -> T:
            self.declarations.declare(kind, self._task_name(task), fields, source=f"@dgs.{kind}")
            return task

        return decorate

    def periodic(
        self,
        period: Duration = _LEFT_OUT,
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
        partial_failure_threshold: float | None = None,
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
        **unknown: NoReturn,
    ) -> Callable[[T], T]:
        """Declare that the task's data must never be older than ``period``.

        Place it above ``@app.task``. ``cooldown`` is the minimum time after the
        last good run ends before it may start again; ``None`` (the default):
        ``dgs_default_cooldown_fraction`` of the time from that end to its
        ``should_start_by``, at most that fraction of ``period``; ``0``:
        eligible again as soon as it ends (seed 000's rule). ``priority``
        (0-99, lower first) decides who waits when not every due schedule can
        start (``docs/configuration.md``, "Priorities").
        ``partial_failure_threshold`` (a share in (0, 1]; ``None``:
        ``dgs_partial_failure_threshold``): a run that reports its items with
        ``celery_dgs.report_items`` has failed when more than this share failed.
        """
        return self._decorator("periodic", _fields(locals()))

    def cron(
        self,
        schedule: str = _LEFT_OUT,
        *,
        within: Duration = _LEFT_OUT,
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
        partial_failure_threshold: float | None = None,
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
        **unknown: NoReturn,
    ) -> Callable[[T], T]:
        """Declare a run at each ``schedule`` time (5-field cron, in ``tz``) that
        must finish ``within`` that long after it (other fields as for
        :meth:`periodic`)."""
        return self._decorator("cron", _fields(locals()))

    def deferred(
        self,
        *,
        within: Duration = timedelta(minutes=5),
        max_checks: int = 5,
        horizon: Duration = timedelta(days=30),
        max_failures: int = 3,
        slot: Duration | None = None,
        on_exists: str = "keep",
        max_expected_duration: Duration | None = None,
        max_allowed_duration: Duration | None = None,
        dont_run_on_nodes: Iterable[str] = (),
        pool: str | None = None,
        priority: int = DEFAULT_PRIORITY,
        tz: Any = "UTC",
        blackouts: Iterable[TimeWindow] = (),
        **unknown: NoReturn,
    ) -> Callable[[T], T]:
        """Declare the task as a deferred check (seed 002): ``dgs.check_at(task,
        key, at=...)`` runs it then; its return value, a datetime or timedelta,
        runs it again then, and ``None`` ends the check.

        A check should start within ``within`` of its time. Guards: at most
        ``max_checks`` checks; a next check not in the future or further than
        ``horizon`` ends it; ``max_failures`` consecutive failures end it;
        ``max_allowed_duration`` terminates a run. ``slot`` rounds check times
        up to a multiple of it, so checks batch. ``on_exists``: adding a check
        that is pending ``keep``s it (the default) or ``move``s it. Placement
        and ``priority`` as for schedules. An invalid declaration (a bad value,
        a misspelt keyword) never raises: it is kept in
        :attr:`check_template_errors`, naming the task and field, and the task
        is not a deferred check until it is fixed."""
        from .core.checks import ON_EXISTS_CHOICES
        from .deferred import bad_on_exists, check_template

        fields = {
            "within": within,
            "max_checks": max_checks,
            "horizon": horizon,
            "max_failures": max_failures,
            "slot": slot,
            "max_expected_duration": max_expected_duration,
            "max_allowed_duration": max_allowed_duration,
            "dont_run_on_nodes": tuple(dont_run_on_nodes),
            "pool": pool,
            "priority": priority,
            "tz": tz,
            "blackout_periods": blackouts,
        }

        def decorate(task: T) -> T:
            name = self._task_name(task)
            try:
                if on_exists not in ON_EXISTS_CHOICES:
                    raise bad_on_exists(name, on_exists)
                template = check_template(name, {**fields, **unknown})
            except ScheduleConfigError as err:
                self.check_templates.pop(name, None)
                self.check_template_errors[name] = err  # named by the task and field
                logger.debug("celery-dgs: @dgs.deferred of %s: %s", name, err)
                return task
            self.check_template_errors.pop(name, None)
            self.check_templates[name] = template
            self.check_on_exists[name] = on_exists
            return task

        return decorate


def _fields(arguments: dict[str, Any]) -> dict[str, Any]:
    """A decorator's keyword arguments as declaration fields. The friendly names
    (``period``, ``within``, ``blackouts``, ...) are mapped to spec fields by
    :data:`~celery_dgs.declarations.FIELD_ALIASES`, and the spec validates them.
    A required field left out, or an unknown keyword (a typo: the type checker
    refuses it, Python would not), is the declaration's error, reported with
    the others (beat, the workers and ``check`` go on), not a ``TypeError``
    at import."""
    unknown = arguments.get("unknown") or {}
    fields = {
        key: value
        for key, value in arguments.items()
        if key not in ("self", "unknown") and value is not _LEFT_OUT
    }
    if fields.get("kwargs") is None:  # anything else is validated by the spec
        fields["kwargs"] = {}
    # A field given by another of its names (``max_duration``, ``queue``,
    # ``blackout_periods``: docs/configuration.md) replaces the keyword of that
    # field left at its default; both given is the declaration's error.
    given = {FIELD_ALIASES.get(key, key) for key in unknown}
    for key in [k for k in fields if FIELD_ALIASES.get(k, k) in given and k not in unknown]:
        if fields[key] == _DEFAULTS.get(key, _LEFT_OUT):
            del fields[key]
    return {**fields, **unknown}


#: The decorators' keyword defaults (the same in ``periodic`` and ``cron``).
_DEFAULTS: dict[str, Any] = {
    name: param.default
    for method in (DGS.periodic, DGS.cron)
    for name, param in inspect.signature(method).parameters.items()
    if param.default is not inspect.Parameter.empty
}


def get_dgs(app: Any) -> DGS:
    """The app's :class:`DGS`, created (config-only declarations) if there is none."""
    existing = _INSTANCES.get(app)
    return existing if existing is not None else DGS(app)
