"""EntryShapes: a row validated once per shape gives exactly what the full
validation (``entry_spec``) and ``spec_json`` give, and a bad row the same
error (schedule, field, message), whether or not its shape was seen before."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from celery_dgs.declarations import entry_spec
from celery_dgs.entry_shapes import EntryShapes
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.store.convert import spec_json

GOOD: list[dict[str, Any]] = [
    {"name": "t.scrape@a", "period": 3600, "args": ["https://a"]},
    {"name": "t.scrape@b", "period": 3600, "args": ["https://b"]},  # same shape, own args
    {"name": "t.scrape@c", "period": 3600, "args": ["https://c", 2], "kwargs": {"depth": 2}},
    {"name": "t.scrape", "period": 3600, "args": []},  # the default configuration
    {"task": "t.scrape", "configuration": "d", "period": 3600, "args": ["https://d"]},
    {"task": "t.other", "period": 3600},
    {"name": "t.scrape@e", "period": 3600.0, "args": ["x"]},  # a float: another shape
    {"name": "t.scrape@f", "period": 3600, "cooldown": 60, "args": ["é", {"b": 1, "a": [1.5]}]},
    {"name": "t.scrape@g", "period": 3600, "cooldown": 60, "args": ['q"uo\\te', None]},
    {
        "name": "t.scrape@h",
        "period": 3600,
        "kwargs": {"task": "t.scrape", "configuration": "h", "args": [1], "z": {"y": 1, "x": 2}},
    },
    {"name": "t.scrape@i", "period": 3600, "blackouts": [["01:00", "02:00"]], "args": [1]},
    {"name": "t.scrape@j", "period": 3600, "blackouts": [["01:00", "02:00"]], "args": [2]},
    {"name": "t.scrape@k", "period": timedelta(hours=1), "args": (3,)},
    {"name": "t.cron@a", "cron": "0 6 * * *", "within": 600, "tz": "Europe/Paris", "args": [1]},
    {"name": "t.cron@b", "cron": "0 6 * * *", "within": 600, "tz": "Europe/Paris", "args": [2]},
    {
        "name": "t.scrape@l",
        "period": 3600,
        "queue": "io",
        "expected": 60,
        "args": ["\x00dgs-args\x00"],
    },
    {"name": "t.scrape@m", "period": 3600, "queue": "io", "expected": 60, "args": ["m"]},
    {"name": "t.scrape@%s", "period": 3600, "queue": "%s%%{0}", "args": ["%d", "{1}"]},
    {"name": "t.scrape@%d", "period": 3600, "queue": "%s%%{0}", "kwargs": {"%s": "%%"}},
    {
        "name": "t.scrape@o",
        "period": 3600,
        "args": [1, "a", -5, 10**30],
        "kwargs": {"b": "x", "a": 2, "\u00e9": "\n"},
    },
    {
        "name": "t.scrape@p",
        "period": 3600,
        "args": [True, 1.0],
        "kwargs": {"b": True, "a": 2.5, "c": None},
    },
]

BAD: list[dict[str, Any]] = [
    {"name": "t.scrape@a@b", "period": 3600, "args": ["x"]},
    {"name": "@a", "period": 3600, "args": ["x"]},
    {"name": "t.scrape@n", "period": 3600, "args": "not a list"},
    {"name": "t.scrape@n", "period": 3600, "args": None},
    {"name": "t.scrape@n", "period": 3600, "kwargs": {1: "x"}},
    {"name": "t.scrape@n", "period": 3600, "kwargs": []},
    {"name": "t.scrape@n", "period": 3600, "args": [math.nan]},
    {"name": "t.scrape@n", "period": 3600, "args": [object()]},
    {"name": "t.scrape@n", "period": -1, "args": ["x"]},
    {"name": "t.scrape@n", "period": True, "args": ["x"]},
    {"name": "t.scrape@n", "periodd": 3600, "args": ["x"]},
    {"task": "t.scrape@x", "configuration": "y", "period": 3600},
    {"name": "t.scrape@n", "configuration": "other", "period": 3600},
    {"name": 5, "period": 3600},
    {"period": 3600},
]


def _full(row: dict[str, Any]) -> tuple[Any, str]:
    spec = entry_spec(row)
    return spec, spec_json(spec)


def _error(fn: Any, row: dict[str, Any]) -> tuple[str, str, str]:
    with pytest.raises(ScheduleConfigError) as info:
        fn(row)
    return info.value.schedule, info.value.field, info.value.message


def test_every_good_row_equals_the_full_validation() -> None:
    shapes = EntryShapes()
    for row in GOOD + GOOD:  # the second time every shape is known
        spec, text = shapes.spec_and_text(row)
        want_spec, want_text = _full(row)
        assert spec == want_spec, row
        assert text == want_text, row
        assert type(spec.args) is tuple
        assert type(spec.kwargs) is dict
    assert shapes.hits >= len(GOOD), "the second pass reuses the shapes"


def test_copies_share_no_mutable_state() -> None:
    shapes = EntryShapes()
    a = shapes.spec({"name": "t.s@a", "period": 60, "kwargs": {"k": 1}})
    b = shapes.spec({"name": "t.s@b", "period": 60, "kwargs": {"k": 1}})
    assert a.kwargs is not b.kwargs
    a.kwargs["k"] = 2  # type: ignore[index]
    assert b.kwargs == {"k": 1}


@pytest.mark.parametrize("row", BAD, ids=[str(i) for i in range(len(BAD))])
def test_a_bad_row_gets_the_full_validations_error(row: dict[str, Any]) -> None:
    shapes = EntryShapes()
    for good in GOOD:  # every shape known first: the quick path must not accept the row
        shapes.spec(good)
    assert _error(shapes.spec, row) == _error(entry_spec, row)


def test_the_default_cooldown_fraction_applies() -> None:
    shapes = EntryShapes(default_cooldown_fraction=0.25)
    for name in ("t.s@a", "t.s@b"):
        row = {"name": name, "period": 4000, "args": [name]}
        assert shapes.spec(row) == entry_spec(row, default_cooldown_fraction=0.25)
        assert shapes.spec(row).cooldown_duration == timedelta(seconds=1000)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"task": 123, "period": 60}, "field 'task': must be a task name (a string)"),
        ({"name": 123, "period": 60}, "field 'name': must be a string 'task@configuration'"),
        ({"period": 60}, "field 'task': is required (give 'name': 'task@configuration' or"),
        (
            {"name": "t.scrape@", "period": 60},
            "schedule 't.scrape@', field 'name': the configuration after '@' is empty: "
            "write 't.scrape', or 't.scrape@CONFIGURATION'",
        ),
    ],
)
def test_a_row_without_a_task_name_says_what_the_name_must_be(
    row: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScheduleConfigError) as info:
        entry_spec(row)
    assert message in str(info.value)
