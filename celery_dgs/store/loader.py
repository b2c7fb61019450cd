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
  :class:`~celery_dgs.store.records.StoredSchedule` from the driver's raw values,
  and equal datetimes / durations are shared (:class:`ValueMemo`): most
  schedules share ``registered_at`` (one sync) and their last start/end pairs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from ..core.spec import ScheduleSpec, with_name
from ..core.stats import ScheduleStats
from ..errors import ScheduleConfigError
from .convert import checked_durations, checked_index, parse_spec, spec_json, stored_duration
from .models import utc_from_db
from .records import StoredSchedule

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
_scan: Any = vars(_ARGUMENTS)["scan_once"]  # set by JSONDecoder.__init__
_ARGS_LEN, _KWARGS_LEN = len(_ARGS_KEY), len(_KWARGS_KEY)
_CONFIGURATION_BLANK = '"configuration":?'

#: The columns :func:`stored_schedule_from_values` reads, in this order.
SCHEDULE_COLUMNS: tuple[str, ...] = (
    "name",
    "task",
    "configuration",
    "kind",
    "spec",
    "active",
    "paused",
    "registered_at",
    "last_good_start_at",
    "last_good_end_at",
    "last_start_at",
    "last_end_at",
    "failure_count",
    "average_good_duration_s",
    "current_token",
    "run_requested_at",
    "change_seq",
    "updated_at",
    "duration_deviation_s",
    "declaration_error",
    "owner",
    "interval_index",
    "next_target_at",
    "upstream_modified_at",
    "disabled_reason",
    "run_requested_priority",
    "first_check_at",
    "check_count",
    "last_items_ok",
    "last_items_failed",
    "next_can_start_at",
    "should_start_by",
    "error_at",
    "margin_bucket",
)


#: :class:`ScheduleStats`' fields, in the order :func:`new_stats` takes them.
STATS_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ScheduleStats))
(
    _set_registered_at,
    _set_last_good_start_at,
    _set_last_good_end_at,
    _set_last_start_at,
    _set_last_end_at,
    _set_failure_count,
    _set_average_good_duration,
    _set_duration_deviation,
    _set_interval_index,
    _set_next_target_at,
    _set_upstream_modified_at,
    _set_last_items_ok,
    _set_last_items_failed,
) = (getattr(ScheduleStats, field).__set__ for field in STATS_FIELDS)


def new_stats(
    registered_at: Any,
    last_good_start_at: Any,
    last_good_end_at: Any,
    last_start_at: Any,
    last_end_at: Any,
    failure_count: Any,
    average_good_duration: Any,
    duration_deviation: Any,
    interval_index: Any,
    next_target_at: Any,
    upstream_modified_at: Any,
    last_items_ok: Any,
    last_items_failed: Any,
) -> ScheduleStats:
    """``ScheduleStats`` of the values in :data:`STATS_FIELDS` order, as its
    ``__init__`` would build them (it checks nothing), its slots set directly:
    the frozen dataclass's ``__init__`` (an ``object.__setattr__`` call per
    keyword argument) costs ~3x as much, a microsecond per loaded schedule."""
    stats: ScheduleStats = object.__new__(ScheduleStats)
    _set_registered_at(stats, registered_at)
    _set_last_good_start_at(stats, last_good_start_at)
    _set_last_good_end_at(stats, last_good_end_at)
    _set_last_start_at(stats, last_start_at)
    _set_last_end_at(stats, last_end_at)
    _set_failure_count(stats, failure_count)
    _set_average_good_duration(stats, average_good_duration)
    _set_duration_deviation(stats, duration_deviation)
    _set_interval_index(stats, interval_index)
    _set_next_target_at(stats, next_target_at)
    _set_upstream_modified_at(stats, upstream_modified_at)
    _set_last_items_ok(stats, last_items_ok)
    _set_last_items_failed(stats, last_items_failed)
    return stats


class SpecCache:
    """Parsed specs by shape (the spec JSON without its name fields)."""

    def __init__(self, max_shapes: int = SPEC_CACHE_MAX_SHAPES) -> None:
        self.max_shapes = max_shapes
        self._shapes: dict[str, ScheduleSpec] = {}
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

        The shape keeps the ``task`` member (a store has few tasks): a text
        whose shape is cached has the template's task, so the row's ``task``
        column must equal it (else the full parse). The ``configuration``
        member must occur exactly once: one ``replace``, whose length tells
        how many times it did.
        """
        if not (type(text) is str and type(task) is str and type(configuration) is str):
            return parse_spec(text)
        configuration_field = '"configuration":' + _encode(configuration)
        shape = text.replace(configuration_field, _CONFIGURATION_BLANK)
        if len(text) - len(shape) != len(configuration_field) - len(_CONFIGURATION_BLANK):
            self.misses += 1
            return parse_spec(text)
        blanked = _blank_arguments(shape)
        if blanked is not None:
            shape = blanked[0]
        template = self._shapes.get(shape)
        if template is not None and template.task == task:
            self.hits += 1
            if "@" in configuration:  # the one check of a name that the template's task passed
                try:
                    with_name(template, task, configuration)
                except ScheduleConfigError as exc:
                    return None, f"{type(exc).__name__}: {exc}"
            # with_name's copy, its fields filled at once (the template's task
            # object, this row's configuration, arguments and own kwargs dict).
            copy = object.__new__(type(template))
            fields = copy.__dict__
            fields.update(template.__dict__)
            fields["configuration"] = configuration
            if blanked is None:
                fields["kwargs"] = dict(template.kwargs)
            else:
                fields["args"] = tuple(blanked[1])
                fields["kwargs"] = blanked[2]
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
    find = text.find
    at_args, at_kwargs = find(_ARGS_KEY), find(_KWARGS_KEY)
    if (
        at_args < 0
        or at_kwargs < 0
        or find(_ARGS_KEY, at_args + 1) >= 0
        or find(_KWARGS_KEY, at_kwargs + 1) >= 0
    ):
        return None
    start_args, start_kwargs = at_args + _ARGS_LEN, at_kwargs + _KWARGS_LEN
    try:  # the decoder's C scanner itself (raw_decode without its Python wrapper)
        args, end_args = _scan(text, start_args)
        kwargs, end_kwargs = _scan(text, start_kwargs)
    except (StopIteration, ValueError, RecursionError):
        return None
    if type(args) is not list or type(kwargs) is not dict:
        return None
    if start_args < start_kwargs:
        if end_args > at_kwargs:
            return None
        shape = (
            text[:start_args] + _BLANK + text[end_args:start_kwargs] + _BLANK + text[end_kwargs:]
        )
    else:
        if end_kwargs > at_args:
            return None
        shape = (
            text[:start_kwargs] + _BLANK + text[end_kwargs:start_args] + _BLANK + text[end_args:]
        )
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


def _checked_numbers(
    average_s: Any, deviation_s: Any, interval_index: Any, duration: Callable[[Any], Any]
) -> tuple[Any, Any, Any, str | None]:
    """A row's average and deviation (through the memo's ``duration``) and its
    interval index, with why one of them is refused (``None``: all valid)."""
    bad = None
    try:  # the memo's converter raises ValueError for a value checked_durations refuses
        average, deviation = duration(average_s), duration(deviation_s)
    except ValueError:
        (average, deviation), bad = checked_durations((average_s, deviation_s), duration)
    index = interval_index
    if interval_index is not None:
        index, bad_index = checked_index(interval_index)
        bad = bad or bad_index
    return average, deviation, index, bad


def stored_schedule_from_values(
    values: Sequence[Any], specs: SpecCache, memo: ValueMemo
) -> StoredSchedule:
    """A :class:`StoredSchedule` from one row's raw values, in :data:`SCHEDULE_COLUMNS` order."""
    (
        name,
        task,
        configuration,
        kind,
        spec_text,
        active,
        paused,
        registered_at,
        last_good_start_at,
        last_good_end_at,
        last_start_at,
        last_end_at,
        failure_count,
        average_s,
        current_token,
        run_requested_at,
        change_seq,
        updated_at,
        deviation_s,
        declaration_error,
        owner,
        interval_index,
        next_target_at,
        upstream_modified_at,
        disabled_reason,
        run_priority,
        first_check_at,
        check_count,
        *last,  # last_items_ok, last_items_failed, then the kept columns (_kept_fields)
    ) = values
    spec, error = specs.parse(spec_text, task, configuration)
    moment = memo.moments.__getitem__
    average, deviation, index, bad = _checked_numbers(
        average_s, deviation_s, interval_index, memo.durations.__getitem__
    )
    if bad is not None:  # a hand-edited row: unschedulable, reported by beat
        spec, error = None, bad
    stats = new_stats(
        moment(registered_at),
        moment(last_good_start_at),
        moment(last_good_end_at),
        moment(last_start_at),
        moment(last_end_at),
        failure_count,
        average,
        deviation,
        index,
        moment(next_target_at),
        moment(upstream_modified_at),
        *last[:2],
    )
    return _stored(
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
        first_check_at=moment(first_check_at),
        check_count=check_count,
        **_kept_fields(last[2:], moment),
    )


def _kept_fields(values: Sequence[Any], moment: Callable[[Any], Any]) -> dict[str, Any]:
    """The kept fields of a row from its ``next_can_start_at, should_start_by,
    error_at, margin_bucket`` values."""
    can, should, error_at, bucket = values
    return {
        "kept_can_start_at": moment(can),
        "kept_should_start_by": moment(should),
        "kept_error_at": moment(error_at),
        "kept_margin_bucket": bucket,
    }


def _stored(**fields: Any) -> StoredSchedule:
    """A :class:`StoredSchedule` of exactly ``fields`` (tests/store/test_load_path.py),
    at a third of ``__init__``'s cost."""
    row = object.__new__(StoredSchedule)
    row.__dict__.update(fields)
    return row
