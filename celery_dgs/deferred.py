"""Deferred checks' API: ``@dgs.deferred`` declares a task as a check, and
``dgs.checks`` (:class:`DeferredChecks`) adds and cancels checks of it.

A check is identified by its task and an entity key (``"order-42"``); it runs
its task at a time, with its ``args``/``kwargs``, and its task's return
value says what comes next (:mod:`celery_dgs.core.checks`). Checks live in the
store; beat dispatches them as it dispatches schedules (within free capacity,
under the same lease), holding only the checks due soon in memory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from .core.checks import ON_EXISTS_CHOICES, ON_EXISTS_KEEP, first_check_time
from .core.clock import Clock, SystemClock
from .core.durations import parse_duration
from .core.schedule_names import CHECK_CONFIGURATION_PREFIX, check_key, schedule_name
from .core.spec import CheckSpec
from .core.spec_build import spec_fields, suggestion
from .core.spec_values import DEFAULT_MAX_ARGUMENT_BYTES
from .errors import ScheduleConfigError
from .runtime_schedules import RowError
from .store.base import ScheduleStore
from .store.check_types import CheckAddReport, CheckHistoryRecord, NewCheck
from .store.convert import spec_json
from .store.spec_text import ENCODER, SpecPieces, encode_str, plain_dict, plain_list
from .task_arguments import ArgumentChecks, TaskRegistry

#: The fields of an item of :meth:`DeferredChecks.at_many`.
_ITEM_FIELDS = frozenset({"task", "key", "at", "after", "args", "kwargs"})
#: The key of the template spec a ``@dgs.deferred`` declaration is kept as.
_TEMPLATE_KEY = "template"


#: ``@dgs.deferred``'s keywords that are no spec field by that name.
_DECORATOR_ONLY = frozenset({"blackouts", "on_exists"})


def check_template(task: str, fields: Mapping[str, Any]) -> CheckSpec:
    """The spec every check of ``task`` is built from (``fields``: a
    ``@dgs.deferred`` declaration); ScheduleConfigError naming the task and field."""
    known = set(spec_fields(CheckSpec)) - {"task", "configuration", "key", "args", "kwargs"}
    for name in fields:
        if name not in known:
            hint = suggestion(str(name), sorted(known - {"blackout_periods"} | _DECORATOR_ONLY))
            raise ScheduleConfigError(task, str(name), f"is not an option of @dgs.deferred{hint}")
    try:
        return CheckSpec(task=task, key=_TEMPLATE_KEY, **dict(fields))
    except ScheduleConfigError as err:  # named by the task, not the template's name
        raise ScheduleConfigError(task, err.field, err.message) from None


#: Stand-ins for the values a template's checks differ in (see :class:`_TemplateText`).
_SENTINELS = {"key": "\x00dgs-key\x00", "args": "\x00dgs-args\x00", "kwargs": "\x00dgs-kwargs\x00"}


def _plain_text(value: tuple[Any, ...] | dict[str, Any]) -> str | None:
    """The canonical JSON text of ``args`` or ``kwargs`` holding only strings
    and ints, without the encoder (the common case); None for anything else."""
    return plain_list(value) if type(value) is tuple else plain_dict(cast(dict[str, Any], value))


def _encoded(name: str, field_name: str, value: tuple[Any, ...] | dict[str, Any]) -> str | None:
    """``value``'s canonical JSON text (None when only the plain encoder takes
    it: a mapping whose keys do not sort); ScheduleConfigError naming the check
    and field if it is not JSON-serializable."""
    text = _plain_text(value)
    if text is not None:
        return text
    try:
        return str(ENCODER.encode(value))
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        why = f"must be JSON-serializable: {exc}"
        raise ScheduleConfigError(name, field_name, why) from exc
    return None


def _arguments(
    name: str, args: Any, kwargs: Any
) -> tuple[tuple[Any, ...], dict[str, Any], str | None, str | None]:
    """The validated ``args`` and ``kwargs`` and their canonical JSON texts."""
    if (
        type(args) is not tuple
        and type(args) is not list
        and (isinstance(args, (str, bytes, Mapping)) or not isinstance(args, Iterable))
    ):
        raise ScheduleConfigError(name, "args", f"must be a list or tuple, got {args!r}")
    if kwargs is None:
        kwargs = {}
    if (type(kwargs) is not dict and not isinstance(kwargs, Mapping)) or not all(
        type(k) is str or isinstance(k, str) for k in kwargs
    ):
        raise ScheduleConfigError(
            name, "kwargs", f"must be a mapping with string keys, got {kwargs!r}"
        )
    args, kwargs = tuple(args), dict(kwargs)
    args_text = _encoded(name, "args", args)
    kwargs_text = _encoded(name, "kwargs", kwargs) if kwargs else "{}"
    return args, kwargs, args_text, kwargs_text


def _check_and_texts(
    template: CheckSpec, key: Any, args: Any, kwargs: Any
) -> tuple[CheckSpec, str | None, str | None]:
    """:func:`check_from_template`, with the JSON texts of the arguments.

    The check is ``with_name(template, task, "check:" + key)`` with its own
    arguments, built here without ``with_name``'s checks of the name: the
    template's task was checked when it was built, and a configuration made of
    the check prefix and a key that ``check_key`` accepts is always valid."""
    task = template.task
    key = check_key(task, key)
    configuration = CHECK_CONFIGURATION_PREFIX + key
    args, kwargs, args_text, kwargs_text = _arguments(
        schedule_name(task, configuration), args, kwargs
    )
    spec = object.__new__(type(template))
    fields = spec.__dict__
    fields.update(template.__dict__)
    fields["configuration"], fields["key"] = configuration, key
    fields["args"], fields["kwargs"] = args, kwargs
    return spec, args_text, kwargs_text


def check_from_template(
    template: CheckSpec, key: Any, args: Any = (), kwargs: Any = None
) -> CheckSpec:
    """``template``'s check for ``key`` with ``args``/``kwargs`` (validated;
    ScheduleConfigError naming the check and field)."""
    return _check_and_texts(template, key, args, kwargs)[0]


class _TemplateText:
    """A template's canonical JSON text (``spec_json``) in pieces around the
    three values its checks differ in (``key``, ``args``, ``kwargs``): a
    check's text is the pieces joined with its own values, instead of its
    whole spec encoded again. The first check joined is compared with
    ``spec_json``; if the texts differ (or the text cannot be cut at exactly
    one place per value), ``spec_json`` gives every check's text."""

    __slots__ = ("pieces", "verified")

    def __init__(self, template: CheckSpec) -> None:
        self.pieces: SpecPieces | None = SpecPieces(template.to_dict(), _SENTINELS)
        self.verified = False

    def text(self, spec: CheckSpec, args: str | None, kwargs: str | None) -> str | None:
        """``spec_json(spec)`` of ``spec``, a check of this template whose
        arguments encode as ``args`` and ``kwargs`` (None for arguments that
        have no canonical text: the store then encodes the spec itself)."""
        if args is None or kwargs is None:
            return None
        joined = (
            None if self.pieces is None else self.pieces.join((encode_str(spec.key), args, kwargs))
        )
        if joined is None:
            return spec_json(spec)
        if not self.verified:
            if joined != spec_json(spec):
                self.pieces = None
                return spec_json(spec)
            self.verified = True
        return joined


@dataclass(frozen=True, kw_only=True)
class CheckBulkReport(CheckAddReport):
    """What :meth:`DeferredChecks.at_many` did: the store's report of the good
    items, and the items that were not added, by line (their 1-based position)."""

    errors: list[RowError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def bad_on_exists(name: str, on_exists: object) -> ScheduleConfigError:
    """The error of an ``on_exists`` that is none of the choices."""
    choices = ", ".join(ON_EXISTS_CHOICES)
    return ScheduleConfigError(name, "on_exists", f"must be one of {choices}, got {on_exists!r}")


class DeferredChecks:
    """Add, move, cancel and read deferred checks (``dgs.checks``).

    ``templates``: the declared check tasks, by task name (``@dgs.deferred``).
    ``store``: the store, or a callable giving it (read on first use).
    ``tasks``: the app's registered tasks by name (``app.tasks``), or a
    callable giving them: a check's ``args``/``kwargs`` must then fit its
    task's signature, and a task name that is not registered is named so.
    ``max_argument_bytes``: the most bytes a check's ``args`` and ``kwargs``
    may take as JSON (``dgs_max_argument_bytes``; None: no limit)."""

    def __init__(
        self,
        store: ScheduleStore | Callable[[], ScheduleStore],
        templates: Mapping[str, CheckSpec],
        *,
        clock: Clock | None = None,
        on_exists: Mapping[str, str] | None = None,
        tasks: TaskRegistry | Callable[[], TaskRegistry] | None = None,
        max_argument_bytes: int | None = DEFAULT_MAX_ARGUMENT_BYTES,
        invalid: Mapping[str, ScheduleConfigError] | None = None,
    ) -> None:
        self._store = store
        self._templates = templates
        self._invalid = invalid or {}
        self._on_exists = on_exists or {}
        self._clock: Clock = clock or SystemClock()
        self._tasks = tasks
        self._arguments = ArgumentChecks(tasks, max_argument_bytes=max_argument_bytes)
        #: Each template's JSON text in pieces, by task (with the template it was cut from).
        self._texts: dict[str, tuple[CheckSpec, _TemplateText]] = {}

    @classmethod
    def for_app(
        cls,
        app: Any,
        settings: Any,
        templates: Mapping[str, CheckSpec],
        on_exists: Mapping[str, str],
        *,
        invalid: Mapping[str, ScheduleConfigError] | None = None,
    ) -> DeferredChecks:
        """The API on the process's store of ``app`` (``dgs_database_url``),
        checking arguments against the app's registered tasks; ``invalid``:
        the tasks whose ``@dgs.deferred`` declaration is invalid."""
        from .runtime import runtime_for

        return cls(
            lambda: runtime_for(app, settings).store,
            templates,
            on_exists=on_exists,
            tasks=lambda: app.tasks,
            max_argument_bytes=settings.max_argument_bytes,
            invalid=invalid,
        )

    @property
    def store(self) -> ScheduleStore:
        return self._store if isinstance(self._store, ScheduleStore) else self._store()

    def _template(self, task: Any) -> CheckSpec:
        name = task if isinstance(task, str) else getattr(task, "name", None)
        if not isinstance(name, str):
            raise ScheduleConfigError(repr(task), "task", "must be a task or a task name")
        template = self._templates.get(name)
        if template is None:
            tasks = self._tasks() if callable(self._tasks) else self._tasks
            invalid = self._invalid.get(name)
            if invalid is not None:
                why = (
                    f"its @dgs.deferred declaration is invalid (field {invalid.field!r}: "
                    f"{invalid.message})"
                )
            elif tasks is None or name in tasks:
                why = "is not declared as a deferred check (decorate it with @dgs.deferred(...))"
            else:
                hint = suggestion(name, self._templates)
                why = f"no such task {name!r} is registered{hint}"
            raise ScheduleConfigError(name, "task", why)
        return template

    def new_check(
        self,
        task: Any,
        key: Any,
        *,
        at: datetime | None = None,
        after: timedelta | float | str | None = None,
        args: Any = (),
        kwargs: Any = None,
        now: datetime | None = None,
    ) -> NewCheck:
        """The check of ``task`` for ``key`` at ``at`` or ``after`` from now
        (a timedelta or seconds), validated; nothing is stored."""
        template = self._template(task)
        spec, args_text, kwargs_text = _check_and_texts(template, key, args, kwargs)
        self._arguments.check(spec, texts=(args_text, kwargs_text))
        try:
            delay = _delay(after)
        except ValueError as exc:
            raise ScheduleConfigError(spec.name, "after", str(exc)) from None
        try:
            when = first_check_time(spec, now or self._clock.now(), at=at, after=delay)
        except ValueError as exc:
            field = "after" if after is not None and at is None else "at"
            raise ScheduleConfigError(spec.name, field, str(exc).split(": ", 1)[-1]) from None
        cut = self._texts.get(template.task)
        if cut is None or cut[0] is not template:
            cut = self._texts[template.task] = (template, _TemplateText(template))
        return NewCheck(spec, when, cut[1].text(spec, args_text, kwargs_text))

    def at(
        self,
        task: Any,
        key: Any,
        *,
        at: datetime | None = None,
        after: timedelta | float | str | None = None,
        args: Any = (),
        kwargs: Any = None,
        on_exists: str | None = None,
    ) -> str:
        """Add the check of ``task`` for ``key``, due ``at`` (an aware datetime)
        or ``after`` from now; returns ``"added"``, ``"kept"`` (it was pending
        and is left as it was: the default) or ``"moved"`` (pending, and
        ``on_exists="move"`` gave it the new time and arguments)."""
        if on_exists is not None and on_exists not in ON_EXISTS_CHOICES:
            check = self.new_check(task, key, at=at, after=after, args=args, kwargs=kwargs)
            raise bad_on_exists(check.spec.name, on_exists)
        report = self.at_many(
            [{"task": task, "key": key, "at": at, "after": after, "args": args, "kwargs": kwargs}],
            on_exists=on_exists,
        )
        if report.errors:
            err = report.errors[0]
            raise ScheduleConfigError(err.schedule, err.field, err.message)
        return "added" if report.added else "moved" if report.moved else "kept"

    def _item_check(self, item: Any, now: datetime) -> NewCheck:
        """The validated check of one :meth:`at_many` item."""
        if not isinstance(item, Mapping):
            raise ScheduleConfigError("?", "item", f"must be a mapping of fields, got {item!r}")
        if not _ITEM_FIELDS.issuperset(item):
            unknown = sorted(map(str, set(item) - _ITEM_FIELDS))[0]
            task = item.get("task")
            task = getattr(task, "name", task)  # a Celery task object: its name
            key = item.get("key")
            name = (
                str(task)
                if key is None
                else schedule_name(str(task), f"{CHECK_CONFIGURATION_PREFIX}{key}")
            )
            hint = suggestion(unknown, sorted(_ITEM_FIELDS))
            raise ScheduleConfigError(name, unknown, f"is not a field of a check{hint}")
        return self.new_check(
            item.get("task"),
            item.get("key"),
            at=item.get("at"),
            after=item.get("after"),
            args=item.get("args") or (),
            kwargs=item.get("kwargs"),
            now=now,
        )

    def at_many(
        self, items: Iterable[Mapping[str, Any]], *, on_exists: str | None = None
    ) -> CheckBulkReport:
        """Add many checks in one store transaction (one per ``on_exists``
        choice). Each item has ``task``, ``key``, ``at`` or ``after``, and
        optionally ``args``/``kwargs``. An invalid item is reported in
        :attr:`CheckBulkReport.errors` with its line (its 1-based position),
        check and field, and is not added; the good items are, as
        :meth:`RuntimeSchedules.upsert_many
        <celery_dgs.runtime_schedules.RuntimeSchedules.upsert_many>` does.
        ``on_exists``: for every item (default: the task's
        ``@dgs.deferred(on_exists=...)``, else ``"keep"``); an invalid one
        raises ScheduleConfigError before anything is stored."""
        if on_exists is not None and on_exists not in ON_EXISTS_CHOICES:
            raise bad_on_exists("(every item)", on_exists)
        now = self._clock.now()
        by_choice: dict[str, list[NewCheck]] = {}
        errors: list[RowError] = []
        for line, item in enumerate(items, start=1):
            try:
                check = self._item_check(item, now)
            except ScheduleConfigError as exc:
                errors.append(RowError(line, exc.schedule, exc.field, exc.message))
                continue
            choice = on_exists or self._on_exists.get(check.spec.task, ON_EXISTS_KEEP)
            by_choice.setdefault(choice, []).append(check)
        report = CheckBulkReport(errors=errors)
        for choice, checks in by_choice.items():
            part = self.store.add_checks(checks, now, on_exists=choice)
            report.added.extend(part.added)
            report.kept.extend(part.kept)
            report.moved.extend(part.moved)
        return report

    def cancel(self, task: Any, key: Any) -> bool:
        """Cancel the pending check of ``task`` for ``key`` (seed 002's
        ``delete_at_jobs``); True if one was pending. Its history records it
        as ``cancelled``."""
        return bool(self.cancel_many([(task, key)]))

    def cancel_many(self, checks: Sequence[tuple[Any, Any]]) -> list[str]:
        """Cancel the pending checks of these ``(task, key)`` pairs; the names cancelled."""
        names = []
        for task, key in checks:
            template = self._template(task)
            names.append(
                f"{template.task}@{CHECK_CONFIGURATION_PREFIX}{check_key(template.task, key)}"
            )
        return self.store.cancel_checks(names, self._clock.now())

    def history(self, task: Any, key: Any, limit: int = 20) -> list[CheckHistoryRecord]:
        """The ended checks of ``task`` for ``key``, the latest first."""
        template = self._template(task)
        name = f"{template.task}@{CHECK_CONFIGURATION_PREFIX}{check_key(template.task, key)}"
        return self.store.check_history(name=name, limit=limit)


def _delay(after: Any) -> Any:
    """``after`` as a timedelta when it is seconds or duration text (``"90s"``,
    ``"1h30m"``); anything else as given, for :func:`first_check_time` to
    refuse. ``ValueError`` for seconds that are not finite."""
    if isinstance(after, (int, float)) and not isinstance(after, bool):
        if not math.isfinite(after):
            raise ValueError(f"must be a finite number of seconds, got {after!r}")
        return timedelta(seconds=after)
    if isinstance(after, str):
        return parse_duration(after)
    return after
