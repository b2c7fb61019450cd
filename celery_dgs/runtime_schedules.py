"""Runtime schedules: the ones a program adds, changes and removes while beat
runs (a lister discovering sources), as opposed to those declared in code.

``dgs.schedules`` (:class:`RuntimeSchedules`) is the API; ``celery dgs add /
remove / import / export`` are its commands. A schedule is given as a mapping
with the fields of a declaration (``name`` or ``task`` + ``configuration``,
``kind``, ``period`` / ``cron`` + ``within``, ``args``, ``kwargs``, ...) and
validated by the same code as a declaration
(:func:`~celery_dgs.declarations.entry_spec`).

Ownership: the store keeps who owns each schedule. The API never changes or
removes a declared schedule (:class:`~celery_dgs.errors.OwnershipError`, or
a row error in bulk), and ``sync`` never changes or deactivates a runtime one.

In bulk (:meth:`RuntimeSchedules.upsert_many`) every bad row is reported
with its line, schedule and field (:class:`RowError`) and the good rows are
written, all in one store transaction: a failure of the store writes none.

Adaptive schedules (kind ``adaptive``) take one more field, ``last_modified``:
the source's last change as the lister saw it (not part of the spec). Any
upsert of a disabled adaptive schedule enables it again.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .core.clock import Clock, SystemClock
from .core.spec import AdaptiveSpec, ScheduleSpec, given_differences
from .core.spec_values import DEFAULT_MAX_ARGUMENT_BYTES
from .core.timing import DEFAULT_COOLDOWN_FRACTION
from .declarations import friendly_name, given_names
from .entry_shapes import EntryShapes
from .errors import OwnershipError, ScheduleConfigError, UnknownScheduleError
from .store.base import ScheduleStore
from .store.convert import spec_json
from .store.ownership import owned_by_sync
from .store.records import OWNER_RUNTIME, RemoveReport, StoredSchedule, UpsertReport
from .task_arguments import ArgumentChecks, unknown_task

#: Rows per read of :meth:`RuntimeSchedules.iter_list`.
LIST_PAGE = 1000

#: A schedule as the API takes it: a mapping of declaration fields or a spec.
Entry = Mapping[str, Any] | ScheduleSpec


@dataclass(frozen=True)
class RowError:
    """A row that was not applied: where it is (``line``, 1-based), which
    schedule (``"?"`` when the row names none) and field, and why."""

    line: int
    schedule: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: schedule {self.schedule!r}, field {self.field!r}: {self.message}"


@dataclass(frozen=True)
class BulkReport:
    """What :meth:`RuntimeSchedules.upsert_many` did: the store's report of the
    good rows, and the rows that were not applied, by line."""

    applied: UpsertReport
    errors: list[RowError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _given_again(
    line: int, first: tuple[int, ScheduleSpec, str], spec: ScheduleSpec, text: str, row: Entry
) -> RowError | None:
    """The error of a row naming a schedule an earlier row of the batch gave
    with other fields (named as this row gives them, else by their friendly
    name; fields derived from others, like a default cooldown, left out);
    None for the same schedule."""
    differ = [] if first[2] == text else given_differences(first[1], spec)
    if not differ:
        return None
    names = given_names(row) if isinstance(row, Mapping) else {}
    shown = [names.get(key, friendly_name(key)) for key in differ]
    return RowError(
        line,
        spec.name,
        shown[0],
        f"schedule given again with different {', '.join(shown)} "
        f"(first on line {first[0]}, which is applied)",
    )


def parse_last_modified(name: str, raw: Any) -> datetime:
    """A source's last change as a lister gives it: an aware ``datetime``, an
    ISO 8601 text with its UTC offset (``Z`` too), or seconds since the epoch;
    ScheduleConfigError naming ``name`` and field ``last_modified`` otherwise."""
    moment: datetime | None = None
    if isinstance(raw, datetime):
        moment = raw
    elif isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
        except ValueError:
            moment = None
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw):
        try:
            moment = datetime.fromtimestamp(raw, timezone.utc)
        except (OverflowError, OSError, ValueError):
            moment = None
    if moment is None or moment.tzinfo is None or moment.utcoffset() is None:
        raise ScheduleConfigError(
            name,
            "last_modified",
            f"must be an aware datetime, an ISO 8601 time with its UTC offset or seconds "
            f"since the epoch, got {raw!r}",
        )
    return moment.astimezone(timezone.utc)


class RuntimeSchedules:
    """Add, change, remove and read runtime schedules in the store.

    ``store``: a :class:`~celery_dgs.store.base.ScheduleStore`, or a callable
    giving the current one (``dgs.schedules`` asks the process's runtime
    each time, so a forked worker child uses its own connections).
    ``known_tasks``: a callable giving the registered task names; a schedule
    of any other task is refused (field ``task``), as a declaration is. None:
    tasks are not checked (the store alone, no app).
    When it gives the tasks by name (``app.tasks``), a schedule's ``args``
    and ``kwargs`` must fit its task's signature
    (:mod:`celery_dgs.task_arguments`).
    ``default_cooldown_fraction``: the cooldown of a periodic schedule given
    none, as ``dgs_default_cooldown_fraction`` gives a declaration's.
    ``max_argument_bytes``: the most bytes a schedule's ``args`` and
    ``kwargs`` may take as JSON (``dgs_max_argument_bytes``; None: no limit).
    """

    def __init__(
        self,
        store: ScheduleStore | Callable[[], ScheduleStore],
        *,
        known_tasks: Callable[[], Collection[str]] | None = None,
        clock: Clock | None = None,
        default_cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
        max_argument_bytes: int | None = DEFAULT_MAX_ARGUMENT_BYTES,
    ) -> None:
        self._store = store
        self._known_tasks = known_tasks
        self._clock: Clock = clock or SystemClock()
        self._cooldown_fraction = default_cooldown_fraction
        self._max_argument_bytes = max_argument_bytes

    @classmethod
    def for_app(
        cls, app: Any, settings: Any, *, store: ScheduleStore | None = None
    ) -> RuntimeSchedules:
        """The API on ``store`` (default: the process's store of ``app``,
        ``dgs_database_url``), checking tasks against the app's registered
        tasks (its task modules imported once)."""
        from .runtime import runtime_for

        loaded: list[Collection[str]] = []

        def known() -> Collection[str]:
            if not loaded:
                app.loader.import_default_modules()
                app.finalize(auto=True)
                loaded.append(app.tasks)
            return loaded[0]

        options: dict[str, Any] = {
            "known_tasks": known,
            "default_cooldown_fraction": settings.default_cooldown_fraction,
            "max_argument_bytes": settings.max_argument_bytes,
        }
        if store is not None:
            return cls(store, **options)
        return cls(lambda: runtime_for(app, settings).store, **options)

    @property
    def store(self) -> ScheduleStore:
        return self._store if isinstance(self._store, ScheduleStore) else self._store()

    # -- writes -----------------------------------------------------------------------

    def upsert(self, task: str, **fields: Any) -> str:
        """Add or change one runtime schedule; returns ``"inserted"``,
        ``"updated"``, ``"reactivated"`` (removed before) or ``"unchanged"``
        (nothing written). ``task`` may be ``task@configuration``; ``fields``
        are a declaration's (``kind``, ``period``, ``cron``, ``within``,
        ``configuration``, ``args``, ``kwargs``, ...). Raises
        :class:`~celery_dgs.errors.ScheduleConfigError` naming the schedule
        and field, :class:`~celery_dgs.errors.OwnershipError` for a declared
        schedule."""
        report = self.upsert_many([{"task": task, **fields}])
        if report.errors:
            err = report.errors[0]
            if err.field == "owner":
                raise OwnershipError(err.schedule, err.message)
            raise ScheduleConfigError(err.schedule, err.field, err.message)
        applied = report.applied
        for action in ("inserted", "updated", "reactivated"):
            if getattr(applied, action):
                return action
        return "unchanged"

    def upsert_many(self, rows: Iterable[Entry]) -> BulkReport:
        """Add or change many runtime schedules in one store transaction.

        Each row is validated as a declaration; a bad one (invalid field,
        unknown task, a declared schedule, a name given again with other
        fields) is reported in :attr:`BulkReport.errors` with its line (the
        row's 1-based position) and is not applied; the good rows are. A row
        equal to the stored schedule writes nothing."""
        return self.upsert_lines(enumerate(rows, start=1))

    def upsert_lines(self, rows: Iterable[tuple[int, Entry | RowError]]) -> BulkReport:
        """:meth:`upsert_many` of rows numbered by the caller (a file's line
        numbers); a :class:`RowError` given in place of a row (a line that
        did not parse) is reported with the others.

        The cyclic GC is paused meanwhile, as for beat's load: a batch
        allocates several objects per row and no cycles, and each collection
        would walk all of them (a third of the CPU of a 200,000-row call)."""
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._upsert_lines(rows)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _upsert_lines(self, rows: Iterable[tuple[int, Entry | RowError]]) -> BulkReport:
        good: dict[str, tuple[int, ScheduleSpec, str]] = {}
        hints: dict[str, datetime] = {}
        errors: list[RowError] = []
        known = self._known_tasks() if self._known_tasks is not None else None
        arguments = ArgumentChecks(
            known if isinstance(known, Mapping) else None,
            max_argument_bytes=self._max_argument_bytes,
        )
        shapes = EntryShapes(self._cooldown_fraction)
        for line, row in rows:
            if isinstance(row, RowError):
                errors.append(row)
                continue
            try:
                spec, text, hint = self._spec_text_and_hint(row, shapes)
            except ScheduleConfigError as exc:
                errors.append(RowError(line, exc.schedule, exc.field, exc.message))
                continue
            if known is not None and spec.task not in known:
                errors.append(RowError(line, spec.name, "task", unknown_task(spec.task, known)))
                continue
            try:
                arguments.check(spec, size_known_below=len(text))
            except ScheduleConfigError as exc:
                errors.append(RowError(line, exc.schedule, exc.field, exc.message))
                continue
            name = spec.name
            first = good.get(name)
            if first is not None:
                error = _given_again(line, first, spec, text, row)
                if error is not None:
                    errors.append(error)
                continue
            good[name] = (line, spec, text)
            if hint is not None:
                hints[name] = hint
        applied = self.store.upsert_runtime_texts(
            [(spec, text) for _, spec, text in good.values()],
            self._clock.now(),
            last_modified=hints or None,
        )
        for name in applied.refused:
            errors.append(RowError(good[name][0], name, "owner", owned_by_sync(name)))
        errors.sort(key=lambda e: e.line)
        return BulkReport(applied, errors)

    @staticmethod
    def _spec_text_and_hint(
        row: Entry, shapes: EntryShapes
    ) -> tuple[ScheduleSpec, str, datetime | None]:
        """The row's validated spec, its canonical JSON (validated once per
        shape of row: :class:`~celery_dgs.entry_shapes.EntryShapes`) and its
        ``last_modified`` (an adaptive schedule's upstream hint, not part of
        the spec)."""
        if isinstance(row, ScheduleSpec):
            return row, spec_json(row), None
        if not isinstance(row, Mapping):
            raise ScheduleConfigError("?", "row", f"must be a mapping of fields, got {row!r}")
        if "last_modified" not in row:
            return (*shapes.spec_and_text(row), None)
        fields = dict(row)
        raw = fields.pop("last_modified")
        spec, text = shapes.spec_and_text(fields)
        if raw is None:
            return spec, text, None
        if not isinstance(spec, AdaptiveSpec):
            raise ScheduleConfigError(
                spec.name, "last_modified", f"only an adaptive schedule takes it ({spec.kind})"
            )
        return spec, text, parse_last_modified(spec.name, raw)

    def remove(self, name: str) -> bool:
        """Remove one runtime schedule: True if it was active, False if there
        is no such schedule or it was already removed. Beat stops dispatching
        it at its next store poll; a live run ends as usual; its history
        stays. :class:`~celery_dgs.errors.OwnershipError` for a declared one."""
        report = self.remove_many([name])
        if report.refused:
            raise OwnershipError(name, owned_by_sync(name))
        return bool(report.removed)

    def remove_many(self, names: Sequence[str]) -> RemoveReport:
        """Remove many runtime schedules in one store transaction; declared
        ones are listed in ``refused`` and left as they are."""
        return self.store.remove_runtime(list(names), self._clock.now())

    # -- reads ------------------------------------------------------------------------

    def get(self, name: str) -> StoredSchedule:
        """The stored runtime schedule ``name`` (removed ones too);
        :class:`~celery_dgs.errors.UnknownScheduleError` if there is none, or
        it is a declared schedule."""
        row = self.store.get(name)
        if row.owner != OWNER_RUNTIME:
            raise UnknownScheduleError(
                f"schedule {name!r} is a declared schedule, not a runtime one"
            )
        return row

    def list(self, *, include_removed: bool = False) -> list[StoredSchedule]:
        """The runtime schedules, by name; removed ones with ``include_removed``."""
        return self.store.list_schedules(include_removed, owner=OWNER_RUNTIME)

    def iter_list(
        self, *, include_removed: bool = False, page: int | None = None
    ) -> Iterator[StoredSchedule]:
        """:meth:`list` read ``page`` rows at a time (by name; :data:`LIST_PAGE`
        by default), so a reader of a million holds one page."""
        page = page or LIST_PAGE
        after: str | None = None
        while True:
            rows = self.store.list_schedules(
                include_removed, owner=OWNER_RUNTIME, after=after, limit=page
            )
            yield from rows
            if len(rows) < page:
                return
            after = rows[-1].name
