"""Fast reading of many schedule rows: the spec cache and the row converter.

Start-up reads every active schedule (a million, at the scale the store is built
for). Rebuilding each spec from its JSON, with the full validation of
:mod:`celery_dgs.core.spec` (zones, croniter, blackouts, JSON-ability), and
each row through the ORM, made start-up cost ~120 µs per schedule. Here:

* **Specs by shape.** Schedules usually differ only in their name: thousands
  of configurations of a few tasks, with the same period, zone and arguments.
  :class:`SpecCache` keys a parsed spec by its *shape*: the stored JSON text
  with the ``task`` and ``configuration`` values blanked out. The first row of
  a shape is parsed and validated in full; the next ones get
  :func:`~celery_dgs.core.spec.with_name` of it (a copy with their own
  name, whose two fields are checked). A shape is only remembered when its
  text is exactly the canonical JSON the store writes (``spec_json``) and the
  name fields occur in it once: then two texts with the same shape differ
  only in those two top-level values, so the copy equals what the full parse
  would give. Anything else (hand-edited, other versions) takes the full path
  and a malformed row is reported exactly as before (``spec_error``).
  ``args`` and ``kwargs`` are blanked out of the shape too (runtime schedules
  give each source its own arguments): when each key occurs once, its value
  is decoded on its own (a list and an object, no NaN or infinite number,
  so always what the spec's checks accept) and given to the copy; otherwise
  the shape keeps them.
* **Rows without the ORM.** :func:`stored_schedule_from_values` builds the
  :class:`~celery_dgs.store.base.StoredSchedule` from the driver's raw values,
  and equal datetimes / durations are shared (:class:`ValueMemo`): most
  schedules share ``registered_at`` (one sync) and their last start/end pairs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from ..core.spec import ScheduleSpec, with_name
from ..core.stats import ScheduleStats
from ..errors import ScheduleConfigError
from .base import StoredSchedule
from .convert import checked_durations, checked_index, parse_spec, spec_json, stored_duration
from .models import utc_from_db

#: Distinct spec shapes remembered by one store; the cache is emptied past it
#: (a store with more distinct shapes than this gains little from caching).
SPEC_CACHE_MAX_SHAPES = 100_000
#: Distinct datetimes / durations shared by one :class:`ValueMemo` before it
#: is emptied (each entry costs ~150 bytes while it lives).
VALUE_MEMO_MAX_ENTRIES = 1_000_000

_encode: Any = json.encoder.encode_basestring_ascii  # the C encoder json.dumps uses
_ARGS_KEY = '"args":'
_KWARGS_KEY = '"kwargs":'
_BLANK = "?"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON-serializable argument")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


#: Decodes a spec's ``args`` / ``kwargs`` as the spec's checks would accept them.
_ARGUMENTS = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_TASK_BLANK = '"task":?'
_CONFIGURATION_BLANK = '"configuration":?'

#: The columns :func:`stored_schedule_from_values` reads, in this order.
SCHEDULE_COLUMNS: tuple[str, ...] = (
    "name", "task", "configuration", "kind", "spec", "active", "paused",
    "registered_at", "last_good_start_at", "last_good_end_at", "last_start_at",
    "last_end_at", "failure_count", "average_good_duration_s", "current_token",
    "run_requested_at", "change_seq", "updated_at", "duration_deviation_s",
    "declaration_error", "owner", "interval_index", "next_target_at", "upstream_modified_at",
    "disabled_reason", "run_requested_priority",
)  # fmt: skip


class SpecCache:
    """Parsed specs by shape (the spec JSON without its name fields)."""

    def __init__(self, max_shapes: int = SPEC_CACHE_MAX_SHAPES) -> None:
        self.max_shapes = max_shapes
        self._shapes: dict[str, ScheduleSpec] = {}
        self._task_fields: dict[str, str] = {}  # task -> its JSON member, '"task":"..."'
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._shapes)

    def parse(
        self, text: Any, task: Any, configuration: Any
    ) -> tuple[ScheduleSpec | None, str | None]:
        """``(spec, None)`` or ``(None, why)``, as :func:`~.convert.parse_spec` of ``text``.

        ``task`` and ``configuration`` are the row's columns; a text whose name
        fields disagree with them is parsed in full (and not cached).
        """
        if not (isinstance(text, str) and isinstance(task, str) and isinstance(configuration, str)):
            return parse_spec(text)
        task_field = self._task_fields.get(task)
        if task_field is None:
            if len(self._task_fields) >= self.max_shapes:
                self._task_fields.clear()
            task_field = self._task_fields[task] = '"task":' + _encode(task)
        configuration_field = '"configuration":' + _encode(configuration)
        if text.count(task_field) != 1 or text.count(configuration_field) != 1:
            self.misses += 1
            return parse_spec(text)
        shape = text.replace(task_field, _TASK_BLANK).replace(
            configuration_field, _CONFIGURATION_BLANK
        )
        blanked = _blank_arguments(shape)
        if blanked is not None:
            shape = blanked[0]
        template = self._shapes.get(shape)
        if template is not None:
            self.hits += 1
            try:
                copy = with_name(template, task, configuration)
            except ScheduleConfigError as exc:
                return None, f"{type(exc).__name__}: {exc}"
            if blanked is not None:
                object.__setattr__(copy, "args", tuple(blanked[1]))
                object.__setattr__(copy, "kwargs", blanked[2])
            return copy, None
        self.misses += 1
        spec, error = parse_spec(text)
        if (
            spec is not None
            and spec.task == task
            and spec.configuration == configuration
            and spec_json(spec) == text
        ):
            if len(self._shapes) >= self.max_shapes:
                self._shapes.clear()
            # A copy: the caller may change its spec's kwargs, never the template's.
            self._shapes[shape] = with_name(spec, task, configuration)
        return spec, error


def _blank_arguments(text: str) -> tuple[str, list[Any], dict[str, Any]] | None:
    """``text`` with the values of its ``args`` and ``kwargs`` members blanked
    out, and those values decoded; None unless each key occurs exactly once
    (then it is the top-level member: inside a string a quote is escaped, and
    a nested key of that name would be a second occurrence) and the values are
    a list and an object of finite numbers."""
    at_args, at_kwargs = text.find(_ARGS_KEY), text.find(_KWARGS_KEY)
    if (
        at_args < 0 or at_kwargs < 0
        or text.find(_ARGS_KEY, at_args + 1) >= 0
        or text.find(_KWARGS_KEY, at_kwargs + 1) >= 0
    ):  # fmt: skip
        return None
    start_args, start_kwargs = at_args + len(_ARGS_KEY), at_kwargs + len(_KWARGS_KEY)
    try:
        args, end_args = _ARGUMENTS.raw_decode(text, start_args)
        kwargs, end_kwargs = _ARGUMENTS.raw_decode(text, start_kwargs)
    except (ValueError, RecursionError):
        return None
    if type(args) is not list or type(kwargs) is not dict:
        return None
    if start_args < start_kwargs:
        if end_args > at_kwargs:
            return None
        shape = (text[:start_args] + _BLANK + text[end_args:start_kwargs] + _BLANK
                 + text[end_kwargs:])  # fmt: skip
    else:
        if end_kwargs > at_args:
            return None
        shape = (text[:start_kwargs] + _BLANK + text[end_kwargs:start_args] + _BLANK
                 + text[end_args:])  # fmt: skip
    return shape, args, kwargs


class ValueMemo:
    """Equal datetimes and durations read from the database, shared as one object.

    ``moments[raw]`` converts like :class:`~celery_dgs.store.models.UTCDateTime`
    (aware UTC out, ``None`` stays ``None``); ``durations[seconds]`` gives a
    ``timedelta``. Both are dicts filled on a miss (a C-level lookup on a hit).
    """

    def __init__(self, max_entries: int = VALUE_MEMO_MAX_ENTRIES) -> None:
        self.moments = _Memo(utc_from_db, max_entries)
        self.durations = _Memo(_timedelta_or_none, max_entries)


def _timedelta_or_none(seconds: Any) -> timedelta | None:
    return stored_duration(seconds)


class _Memo(dict[Any, Any]):
    def __init__(self, convert: Callable[[Any], Any], max_entries: int) -> None:
        super().__init__({None: None})
        self._convert = convert
        self._max_entries = max_entries

    def __missing__(self, raw: Any) -> Any:
        if len(self) >= self._max_entries:
            self.clear()
            self[None] = None
        value = self[raw] = self._convert(raw)
        return value


def stored_schedule_from_values(
    values: Sequence[Any], specs: SpecCache, memo: ValueMemo
) -> StoredSchedule:
    """A :class:`StoredSchedule` from one row's raw values, in :data:`SCHEDULE_COLUMNS` order."""
    (name, task, configuration, kind, spec_text, active, paused, registered_at,
     last_good_start_at, last_good_end_at, last_start_at, last_end_at, failure_count,
     average_s, current_token, run_requested_at, change_seq, updated_at,
     deviation_s, declaration_error, owner, interval_index, next_target_at,
     upstream_modified_at, disabled_reason, run_priority) = values  # fmt: skip
    spec, error = specs.parse(spec_text, task, configuration)
    moment = memo.moments.__getitem__
    (average, deviation), bad = checked_durations(
        (average_s, deviation_s), memo.durations.__getitem__
    )
    index, bad_index = checked_index(interval_index)
    bad = bad or bad_index
    if bad is not None:  # a hand-edited row: unschedulable, reported by beat
        spec, error = None, bad
    stats = ScheduleStats(
        registered_at=moment(registered_at),
        last_good_start_at=moment(last_good_start_at),
        last_good_end_at=moment(last_good_end_at),
        last_start_at=moment(last_start_at),
        last_end_at=moment(last_end_at),
        failure_count=failure_count,
        average_good_duration=average,
        duration_deviation=deviation,
        interval_index=index,
        next_target_at=moment(next_target_at),
        upstream_modified_at=moment(upstream_modified_at),
    )
    # StoredSchedule's frozen-dataclass __init__ (one object.__setattr__ per
    # field, nothing checked) costs ~3x filling its __dict__ at once; these
    # are exactly its fields (tests/store/test_load_path.py compares the two).
    row = object.__new__(StoredSchedule)
    row.__dict__.update(
        name=name,
        task=task,
        configuration=configuration,
        kind=kind,
        spec=spec,
        spec_error=error,
        stats=stats,
        active=bool(active),
        paused=bool(paused),
        current_token=current_token,
        run_requested_at=moment(run_requested_at),
        change_seq=change_seq,
        updated_at=moment(updated_at),
        declaration_error=declaration_error,
        owner=owner,
        disabled_reason=disabled_reason,
        run_requested_priority=run_priority,
    )
    return row
