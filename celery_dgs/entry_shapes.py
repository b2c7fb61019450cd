"""Validating many runtime schedules fast: once per *shape*, not once per row.

A bulk upsert (a lister giving a million sources to one scraper task) sends
rows that differ only in their name and their ``args``/``kwargs``: the
period, cooldown, zone, blackouts, queue are a few combinations. Validating
each row in full (:func:`~celery_dgs.declarations.entry_spec`: field names,
zones, blackouts, croniter, the default cooldown) and building its canonical
JSON (``spec_json``) cost ~100 µs a row; here:

* **A row's shape** is its fields without the name fields (``name`` /
  ``task`` / ``configuration``) and without ``args`` and ``kwargs``, as a
  hashable key that keeps the values' types (``1``, ``1.0`` and ``True``
  are three shapes). The first row of a shape is validated in full by
  ``entry_spec``; the next ones get a copy of its spec
  (:func:`~celery_dgs.core.spec.with_name`, which checks the name fields)
  with their own ``args`` and ``kwargs``, checked as the spec's constructor
  checks them. No check of the other fields depends on the name or the
  arguments, so the copy equals what ``entry_spec`` would build.
* **The JSON text** of a shape is kept in pieces around the four values
  that differ; a row's text is the pieces joined with its values encoded as
  ``json.dumps`` encodes them. The first row of each shape is checked
  against ``spec_json``; a shape whose text does not match is not reused.
* Anything unusual takes the full path: a row naming itself in a way other
  than ``name`` alone or ``task`` (without ``@``) plus ``configuration``, a
  field value of another type than str/int/float/bool/None/timedelta and
  lists, tuples and dicts of them, arguments the quick check refuses (the
  full path then gives the error, with the schedule and field, exactly as
  before). A row is never refused here that ``entry_spec`` would accept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from .core.schedule_names import split_schedule_name
from .core.spec import ScheduleSpec, with_name
from .core.timing import DEFAULT_COOLDOWN_FRACTION
from .declarations import entry_spec
from .errors import ScheduleConfigError
from .store.convert import spec_json
from .store.spec_text import ENCODER, SpecPieces, encode_str, plain_dict, plain_list

#: Distinct shapes remembered by one :class:`EntryShapes`; past it, the
#: cache is emptied (rows with that many shapes gain nothing from it).
MAX_SHAPES = 10_000

_NAME_FIELDS = frozenset({"name", "task", "configuration"})
_OWN_FIELDS = _NAME_FIELDS | {"args", "kwargs"}
_SCALARS = (str, int, float, bool, type(None), timedelta)
_encode_str = encode_str
_SENTINELS = {
    "task": "\x00dgs-task\x00",
    "configuration": "\x00dgs-configuration\x00",
    "args": "\x00dgs-args\x00",
    "kwargs": "\x00dgs-kwargs\x00",
}


class _Uncacheable(Exception):
    """A row (or value) the shape cache does not handle: the full path takes it."""


def _frozen(value: Any) -> Any:
    """``value`` as a hashable key that keeps types apart; :class:`_Uncacheable`
    for anything but plain data."""
    kind = type(value)
    if kind in _SCALARS:
        return (kind, value)
    if kind is list or kind is tuple:
        return (kind, tuple(_frozen(v) for v in value))
    if kind is dict:
        return (kind, tuple((_frozen(k), _frozen(v)) for k, v in value.items()))
    raise _Uncacheable


def _shape_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The row's fields but its own (name fields, ``args``, ``kwargs``), with
    the values' types: a hashable key (:func:`_frozen`, flat for scalars)."""
    key = []
    for field, value in row.items():
        if field in _OWN_FIELDS:
            continue
        kind = type(value)
        key.append((field, kind, value) if kind in _SCALARS else (field, _frozen(value)))
    return tuple(key)


def _dumps_list(items: Sequence[Any]) -> str:
    """``_dumps(list(items))``, without the encoder for a list of strings and ints."""
    text = plain_list(items)
    return _dumps(list(items)) if text is None else text


def _dumps_dict(mapping: dict[str, Any]) -> str:
    """``_dumps(mapping)`` (string keys), without the encoder for string and int values."""
    text = plain_dict(mapping)
    return _dumps(mapping) if text is None else text


def _dumps(value: Any) -> str:
    """``value`` as ``spec_json`` encodes it inside a spec (sorted keys, no
    spaces, no NaN). Raises ``TypeError`` / ``ValueError`` as ``json.dumps`` does."""
    return str(ENCODER.encode(value))


class _Shape:
    """A validated spec of one shape and its JSON text in pieces."""

    __slots__ = ("pieces", "spec")

    def __init__(self, spec: ScheduleSpec) -> None:
        self.spec = spec
        #: The spec's JSON text cut around task, configuration, args and kwargs.
        self.pieces = SpecPieces(spec.to_dict(), _SENTINELS)

    def text(self, task: str, configuration: str, args: str, kwargs: str) -> str | None:
        """The JSON text with these encoded values; None if the shape has no pieces."""
        return self.pieces.join((task, configuration, args, kwargs))


class EntryShapes:
    """Specs and canonical JSON texts of runtime-schedule rows, validated once
    per shape (see the module docstring). ``spec_and_text(row)`` gives what
    ``entry_spec(row)`` and ``spec_json`` of it give, and raises the same
    :class:`~celery_dgs.errors.ScheduleConfigError` for a bad row."""

    def __init__(
        self,
        default_cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
        max_shapes: int = MAX_SHAPES,
    ) -> None:
        self.default_cooldown_fraction = default_cooldown_fraction
        self.max_shapes = max_shapes
        self._shapes: dict[Any, _Shape] = {}
        self.hits = 0
        self.misses = 0

    def spec_and_text(self, row: Mapping[str, Any]) -> tuple[ScheduleSpec, str]:
        try:
            return self._quick(row)
        except _Uncacheable:
            self.misses += 1
            spec = self._full(row)
            return spec, spec_json(spec)

    def spec(self, row: Mapping[str, Any]) -> ScheduleSpec:
        """The validated spec of ``row`` (:meth:`spec_and_text` without the text)."""
        return self.spec_and_text(row)[0]

    def _full(self, row: Mapping[str, Any]) -> ScheduleSpec:
        return entry_spec(row, default_cooldown_fraction=self.default_cooldown_fraction)

    def _quick(self, row: Mapping[str, Any]) -> tuple[ScheduleSpec, str]:
        task, configuration = _name_fields(row)
        args, kwargs, args_text, kwargs_text = _arguments(row)
        key = _shape_key(row)
        shape = self._shapes.get(key)
        if shape is None:
            spec = self._full(row)  # raises for a bad row, naming it
            if spec.task != task or spec.configuration != configuration:
                raise _Uncacheable  # not named as expected: never reuse it
            shape = _Shape(spec)
            encoded = (_encode_str(task), _encode_str(configuration), args_text, kwargs_text)
            text = spec_json(spec)
            if shape.text(*encoded) != text:
                shape.pieces.pieces = None  # never joined: spec_json for each row
            if len(self._shapes) >= self.max_shapes:
                self._shapes.clear()
            self._shapes[key] = shape
            self.misses += 1
            return spec, text
        try:
            spec = with_name(shape.spec, task, configuration)
        except ScheduleConfigError as exc:  # the full path reports it, as before
            raise _Uncacheable from exc
        object.__setattr__(spec, "args", args)
        object.__setattr__(spec, "kwargs", kwargs)
        joined = shape.text(_encode_str(task), _encode_str(configuration), args_text, kwargs_text)
        self.hits += 1
        return spec, joined if joined is not None else spec_json(spec)


def _name_fields(row: Mapping[str, Any]) -> tuple[str, str]:
    """``(task, configuration)`` of a row named by ``name`` alone, or by
    ``task`` (without ``@``) and optionally ``configuration``."""
    if not isinstance(row, dict):
        raise _Uncacheable
    name = row.get("name")
    if name is not None:
        if type(name) is not str or "task" in row or "configuration" in row:
            raise _Uncacheable
        task, configuration = split_schedule_name(name)
    else:
        given, configuration = row.get("task"), row.get("configuration", "")
        if type(given) is not str or "@" in given or type(configuration) is not str:
            raise _Uncacheable
        task = given
    if not task.strip():
        raise _Uncacheable
    return task, configuration


def _arguments(row: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any], str, str]:
    """The row's ``args`` (a list or tuple) and ``kwargs`` (a dict with string
    keys) as the spec keeps them, and their JSON texts; :class:`_Uncacheable`
    for anything the spec's constructor might refuse or treat otherwise."""
    args = row.get("args", ())
    kwargs = row.get("kwargs", {})
    if type(args) not in (list, tuple) or type(kwargs) is not dict:
        raise _Uncacheable
    if not all(type(k) is str for k in kwargs):
        raise _Uncacheable
    try:
        kwargs_text = _dumps_dict(kwargs) if kwargs else "{}"
        return tuple(args), dict(kwargs), _dumps_list(args), kwargs_text
    except (TypeError, ValueError, RecursionError) as exc:
        raise _Uncacheable from exc
