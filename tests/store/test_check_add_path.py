"""Adding deferred checks in bulk: ``DeferredChecks`` builds each check's
spec JSON from its template's text (the key and arguments spliced in) and the
SQL store writes new checks with ``COPY`` on PostgreSQL. What is stored is
exactly what the spec gives: its canonical JSON, its times and counts, also
for keys and arguments that need escaping in JSON or in ``COPY``'s text."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import CheckSpec
from celery_dgs.deferred import DeferredChecks, check_template
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.store import MemoryScheduleStore, SqlScheduleStore
from celery_dgs.store.convert import spec_json

from .conftest import T0

TASK = "shop.check_order"
#: Keys and arguments that JSON or COPY's text format must escape.
AWKWARD: list[tuple[Any, list[Any], dict[str, Any]]] = [
    ("order-1", [1], {"region": "eu"}),
    (42, [], {}),
    ("tab\there", ["back\\slash", 'quote"d'], {"z": 1.5, "a": None, "m": [True, {"b": 2, "a": 1}]}),
    ("ünïcødé ✓", ["日本"], {"emoji": "🦀"}),
    ("with@at and space", [[1, 2], {"k": "v"}], {"nested": {"y": [], "x": {}}}),
]


def checks(store: Any, **fields: Any) -> DeferredChecks:
    template = check_template(TASK, {"within": timedelta(minutes=10), **fields})
    return DeferredChecks(store, {TASK: template}, clock=FakeClock(T0))


@pytest.mark.parametrize(
    "fields",
    [{}, {"slot": timedelta(minutes=1), "priority": 7, "max_checks": 9, "tz": "Europe/Paris"}],
)
def test_each_check_carries_its_specs_canonical_json(fields: dict[str, Any]) -> None:
    api = checks(MemoryScheduleStore(), **fields)
    for key, args, kwargs in AWKWARD * 2:  # the second round: the template's text is cut
        check = api.new_check(TASK, key, after=60, args=args, kwargs=kwargs)
        built = CheckSpec(
            task=TASK,
            key=str(key),
            args=args,
            kwargs=kwargs,
            within=timedelta(minutes=10),
            **fields,
        )
        assert check.spec == built  # what the validating constructor builds
        assert check.spec.name == built.name
        assert check.spec_text == spec_json(check.spec) == spec_json(built)


def test_arguments_without_a_canonical_text_are_left_to_the_store() -> None:
    api = checks(MemoryScheduleStore())
    check = api.new_check(TASK, "mixed", after=60, args=[{1: "a", "b": 2}])
    assert check.spec_text is None  # keys that do not sort: json.dumps alone takes them
    with pytest.raises(ScheduleConfigError, match=r"'args'.*JSON-serializable"):
        api.new_check(TASK, "nan", after=60, args=[float("nan")])
    with pytest.raises(ScheduleConfigError, match=r"'kwargs'.*JSON-serializable"):
        api.new_check(TASK, "obj", after=60, kwargs={"x": object()})


def test_bulk_add_stores_what_the_specs_give(sql_store: SqlScheduleStore) -> None:
    api = checks(sql_store, slot=timedelta(seconds=30))
    items = [
        {"task": TASK, "key": key, "after": 91 + i, "args": args, "kwargs": kwargs}
        for i, (key, args, kwargs) in enumerate(AWKWARD)
    ]
    report = api.at_many(items)
    assert len(report.added) == len(AWKWARD)
    assert api.at_many(items).kept == report.added  # nothing added twice
    with sql_store.engine.connect() as conn:
        raw = dict(
            conn.execute(text("SELECT name, spec FROM dgs_schedules WHERE kind = 'check'")).all()
        )
    for key, args, kwargs in AWKWARD:
        spec = api.new_check(TASK, key, after=1, args=args, kwargs=kwargs).spec
        row = sql_store.get(spec.name)
        assert isinstance(row.spec, CheckSpec)
        assert row.spec == spec
        assert raw[spec.name] == spec_json(spec)
        assert json.loads(raw[spec.name])["key"] == str(key)
        due = T0 + timedelta(seconds=120)  # 91 + i seconds, rounded up to the 30 s slot
        assert row.stats.next_target_at == row.first_check_at == due
        assert row.check_count == 0
        assert row.owner == "check"
        assert row.active
        assert not row.paused
        assert row.updated_at == T0
    assert [r.name for r in sql_store.due_checks(None, T0 + timedelta(hours=1), 100)] == sorted(
        report.added
    )
