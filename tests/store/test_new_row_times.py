"""NewRowTimes: the kept values of a new row, remembered by spec shape, are
exactly what the core derives for that row alone, whatever the order and mix
of shapes; and the shape key groups the specs the spec's JSON (without its
name fields and arguments) groups."""

from __future__ import annotations

import json
from datetime import datetime, time, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.blackout_periods import Blackout
from celery_dgs.core.kept_condition import kept_times
from celery_dgs.core.spec import AdaptiveSpec, CronSpec, PeriodicSpec, ScheduleSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.core.timing import DEFAULT_RETRY_LADDER
from celery_dgs.store import kept
from celery_dgs.store.kept import NewRowTimes, kept_row, shape_key

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
H = timedelta(hours=1)


def json_shape(spec: ScheduleSpec) -> str:
    """The spec's JSON without its name fields and arguments."""
    fields = spec.to_dict()
    for key in ("task", "configuration", "args", "kwargs"):
        fields.pop(key, None)
    return json.dumps(fields, sort_keys=True, default=str)


def alone(spec: ScheduleSpec) -> tuple[Any, ...]:
    """The kept values of a new row of ``spec``, computed for it alone."""
    stats = ScheduleStats(registered_at=NOW)
    times = kept_times(spec, stats, NOW, retry_ladder=DEFAULT_RETRY_LADDER)
    return kept_row(times, spec.pool)


COMMON = {
    "configuration": st.text("ab\t\\\n é", min_size=1, max_size=4),
    "tz": st.sampled_from(["UTC", "Europe/Paris", "Asia/Kolkata"]),
    "blackout_periods": st.sampled_from(
        [(), (Blackout(time(1), time(2)),), (Blackout(time(22), time(2)),)]
    ),
    "max_expected_duration": st.sampled_from([None, 60, 600.0]),
    "avoid_blackout_overlap": st.booleans(),
    "pool": st.sampled_from([None, "io", "cpu"]),
    "priority": st.sampled_from([0, 50, 99]),
    "partial_failure_threshold": st.sampled_from([None, 1, 1.0, 0.5]),
    "args": st.lists(st.integers(0, 3), max_size=2),
    "kwargs": st.dictionaries(st.sampled_from("xy"), st.integers(0, 3), max_size=1),
}
SPECS = st.one_of(
    st.builds(
        PeriodicSpec,
        task=st.sampled_from(["t.a", "t.b"]),
        scheduling_period=st.sampled_from([H, 2 * H, 3600, 3600.0]),
        cooldown_duration=st.sampled_from([0, 60]),
        default_cooldown=st.booleans(),
        **COMMON,
    ),
    st.builds(
        CronSpec,
        task=st.just("t.c"),
        cron_schedule=st.sampled_from(["0 6 * * *", "*/5 * * * *"]),
        cron_max_schedule_duration=st.sampled_from([600, 3 * H]),
        **COMMON,
    ),
    st.builds(
        AdaptiveSpec,
        task=st.just("t.d"),
        interval_unit=st.sampled_from([6 * H, 36 * H]),
        initial_interval_index=st.integers(0, 6),
        max_failures=st.integers(1, 3),
        **COMMON,
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(SPECS, min_size=1, max_size=30))
def test_remembered_values_equal_each_rows_own(specs: list[ScheduleSpec]) -> None:
    times = NewRowTimes(NOW, DEFAULT_RETRY_LADDER)
    for spec in specs + specs:
        assert times.row(spec) == alone(spec), spec


@settings(max_examples=60, deadline=None)
@given(SPECS, SPECS)
def test_the_shape_key_groups_as_the_specs_json_does(a: ScheduleSpec, b: ScheduleSpec) -> None:
    assert (shape_key(a) == shape_key(b)) == (json_shape(a) == json_shape(b))


def test_one_computation_per_shape_and_a_fresh_start_past_the_limit(
    monkeypatch: Any,
) -> None:
    computed: list[str] = []
    real = kept.kept_times

    def counting(spec: ScheduleSpec, *args: Any, **kwargs: Any) -> Any:
        computed.append(spec.name)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(kept, "kept_times", counting)
    monkeypatch.setattr(kept, "NEW_ROW_SHAPES_MAX", 2)
    times = NewRowTimes(NOW, DEFAULT_RETRY_LADDER)
    rows = [
        PeriodicSpec(task="t", configuration=f"c{i}", scheduling_period=H, args=[i])
        for i in range(5)
    ]
    shared = {times.row(spec) for spec in rows}
    assert len(computed) == 1
    assert len(shared) == 1
    other = PeriodicSpec(task="t", configuration="x", scheduling_period=2 * H)
    third = PeriodicSpec(task="t", configuration="y", scheduling_period=3 * H)
    assert times.row(other) == alone(other)
    assert times.row(third) == alone(third)  # the limit: remembered shapes start over
    assert times.row(rows[0]) == alone(rows[0])
    assert computed == ["t@c0", "t@x", "t@y", "t@c0"]


def test_a_spec_whose_shape_does_not_hash_is_computed_alone() -> None:
    spec = PeriodicSpec(task="t", scheduling_period=H)
    object.__setattr__(spec, "dont_run_on_nodes", ["n1"])  # a list: unhashable
    assert NewRowTimes(NOW, DEFAULT_RETRY_LADDER).row(spec) == alone(spec)
