"""Declarations (decorators and ``dgs_schedules``): every bad key or value is a
recorded error naming the schedule and the field, never an exception out of
the declaring module, and the message says what to write instead."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from celery import Celery

from celery_dgs.declarations import Declarations
from celery_dgs.dgs import DGS
from celery_dgs.errors import ScheduleConfigError


def error_of(fields: dict[str, Any], kind: str = "periodic") -> ScheduleConfigError:
    decl = Declarations()
    decl.declare(kind, "t.x", fields, source="test")
    assert "t.x" not in decl.specs
    return decl.errors["t.x"]


def conf_error(entry: dict[str, Any], key: str = "t.x") -> ScheduleConfigError:
    decl = Declarations()
    decl.declare_from_conf({key: entry})
    assert decl.specs == {}
    [error] = decl.errors.values()
    return error


def test_a_misspelt_key_names_the_key_and_the_valid_one() -> None:
    err = conf_error({"perod": 60})
    assert (err.schedule, err.field) == ("t.x", "perod")
    assert str(err) == (
        "schedule 't.x', field 'perod': is not a field of a periodic schedule; "
        "did you mean 'period'?"
    )
    assert "did you mean 'cron_schedule'?" in str(conf_error({"kind": "cron", "cron_schedul": "x"}))
    assert "did you mean 'max_expected_duration'?" in str(
        conf_error({"period": 60, "max_expected_durations": 5})
    )
    # an abbreviation: the field it starts, not the closest by spelling ('period')
    assert "did you mean 'priority'?" in str(conf_error({"period": 60, "prio": 3}))


def test_a_key_of_the_other_kind_says_which_kind_has_it() -> None:
    err = conf_error({"kind": "periodic", "period": 60, "within": 30})
    assert err.field == "within"
    assert "is not a field of a periodic schedule; it is a field of a cron schedule" in str(err)


def test_a_key_with_no_close_match_lists_the_accepted_ones() -> None:
    err = conf_error({"period": 60, "zzzz": 1})
    assert err.field == "zzzz"
    assert "accepted: period, cooldown" in str(err)


def test_a_missing_required_field_is_named_by_its_friendly_name() -> None:
    assert error_of({}).field == "period"
    assert "is required for a periodic schedule" in str(error_of({}))
    assert error_of({"cron": "* * * * *"}, kind="cron").field == "within"


def test_a_field_given_under_both_names() -> None:
    err = conf_error({"period": 60, "scheduling_period": 60})
    assert err.field == "scheduling_period"
    assert "given twice (as 'period' and 'scheduling_period')" in str(err)


def test_an_unknown_kind_suggests_the_right_one() -> None:
    err = conf_error({"kind": "Periodic", "period": 60})
    assert err.field == "kind"
    assert "did you mean 'periodic'?" in str(err)


@pytest.mark.parametrize(
    ("field", "value", "expected_field", "message"),
    [
        ("args", "abc", "args", "must be a list or tuple, got 'abc'"),
        ("args", 5, "args", "must be a list or tuple"),
        ("args", [float("nan")], "args", "must be JSON-serializable"),
        ("kwargs", "x", "kwargs", "must be a mapping with string keys"),
        ("kwargs", {1: 2}, "kwargs", "must be a mapping with string keys"),
        ("kwargs", {"a": object()}, "kwargs", "must be JSON-serializable"),
        ("dont_run_on_nodes", 5, "dont_run_on_nodes", "must be a list of node names"),
        ("dont_run_on_nodes", "node1", "dont_run_on_nodes", "must be a list of node names"),
        ("avoid_blackout_overlap", "yes", "avoid_blackout_overlap", "must be True or False"),
        ("period", float("nan"), "period", "must be finite"),
        ("period", float("inf"), "period", "must be finite"),
        ("period", 1e30, "period", "is too long"),
        ("period", 10**30, "period", "is too long"),
        ("expected", 1e300, "expected", "is too long"),
        ("period", timedelta.max, "period", "is too long: at most 36500 days"),
        ("period", 1e13, "period", "is too long: at most 36500 days"),
        ("duration_override", timedelta(days=40000), "duration_override", "is too long"),
    ],
)
def test_malformed_values_name_their_field(
    field: str, value: Any, expected_field: str, message: str
) -> None:
    fields = {"period": 3600, field: value}
    err = error_of(fields)
    assert err.field == expected_field
    assert message in err.message


def test_a_period_that_differs_between_two_declarations_is_named() -> None:
    decl = Declarations()
    decl.declare("periodic", "t.x", {"period": 3600}, source="first")
    decl.declare("periodic", "t.x", {"period": 60}, source="second")
    err = decl.errors["t.x"]
    assert err.field == "period"
    assert "declared twice with different values (period: 1h and 1m" in str(err)
    assert "from second" in str(err)
    assert "t.x" not in decl.specs  # which one is first depends on import order: neither
    decl.declare("periodic", "t.x", {"period": 3600}, source="third")
    assert "t.x" not in decl.specs
    assert decl.errors["t.x"] is err


def test_two_declarations_that_differ_in_several_fields_name_each() -> None:
    decl = Declarations()
    decl.declare("periodic", "t.x", {"period": 3600, "tz": "Europe/Paris"}, source="a")
    decl.declare("periodic", "t.x", {"period": 3600, "pool": "slow"}, source="b")
    err = decl.errors["t.x"]
    assert err.field == "tz"
    assert "tz: 'Europe/Paris' and 'UTC'" in err.message
    assert "pool: None and 'slow'" in err.message


def test_the_same_declaration_twice_is_fine() -> None:
    decl = Declarations()
    for source in ("a", "b"):
        decl.declare("periodic", "t.x", {"period": timedelta(hours=1)}, source=source)
    assert decl.errors == {}
    assert list(decl.specs) == ["t.x"]


def test_bad_decorator_arguments_are_recorded_not_raised(memory_app: Celery) -> None:
    dgs = DGS(memory_app, install_worker_hooks=False)

    def job() -> None:
        pass

    for i, kwargs in enumerate(("x", [1])):
        job.__name__ = f"job{i}"
        memory_app.task(name=f"t.job{i}", shared=False)(dgs.periodic(60, kwargs=kwargs)(job))  # type: ignore[arg-type]
    errors = dgs.declarations.errors
    assert {name: err.field for name, err in errors.items()} == {
        "tests.api.test_declarations.job0": "kwargs",
        "tests.api.test_declarations.job1": "kwargs",
    }


def test_a_decorator_takes_durations_as_text_as_dgs_schedules_does(memory_app: Celery) -> None:
    dgs = DGS(memory_app, install_worker_hooks=False)

    def job() -> None:
        pass

    memory_app.task(name="t.text", shared=False)(dgs.periodic("1h30m", cooldown="10m")(job))
    [spec] = dgs.declarations.specs.values()
    assert spec.scheduling_period == timedelta(hours=1, minutes=30)  # type: ignore[attr-defined]
    assert spec.cooldown_duration == timedelta(minutes=10)  # type: ignore[attr-defined]

    def other() -> None:
        pass

    memory_app.task(name="t.bad", shared=False)(dgs.periodic("2 minutes")(other))
    [error] = dgs.declarations.errors.values()
    assert (error.field, error.message) == (
        "period",
        "'2 minutes' is not a duration: give " + error.message.split("give ", 1)[1],
    )


def test_a_misspelt_or_missing_decorator_field_is_recorded_not_raised(memory_app: Celery) -> None:
    """A typo in a decorator's keyword (which the type checker refuses) or a
    required field left out is that declaration's error, with a suggestion:
    the module still imports, and the other declarations stand."""
    dgs = DGS(memory_app, install_worker_hooks=False)

    @dgs.periodic(perod=60)  # type: ignore[arg-type]
    @memory_app.task(name="t.typo", shared=False)
    def typo() -> None: ...

    @dgs.periodic(cooldown=5)
    @memory_app.task(name="t.no_period", shared=False)
    def no_period() -> None: ...

    @dgs.cron("0 * * * *")
    @memory_app.task(name="t.no_within", shared=False)
    def no_within() -> None: ...

    @dgs.periodic(60)
    @memory_app.task(name="t.good", shared=False)
    def good() -> None: ...

    errors = {name: str(err) for name, err in dgs.declarations.errors.items()}
    assert errors == {
        "t.typo": "schedule 't.typo', field 'perod': is not a field of a periodic schedule; "
        "did you mean 'period'?",
        "t.no_period": "schedule 't.no_period', field 'period': is required for a periodic "
        "schedule",
        "t.no_within": "schedule 't.no_within', field 'within': is required for a cron schedule",
    }
    assert list(dgs.declarations.specs) == ["t.good"]


@pytest.mark.parametrize(
    ("kind", "alias", "value", "field", "expected"),
    [
        ("periodic", "max_duration", 120, "max_allowed_duration", timedelta(minutes=2)),
        ("periodic", "queue", "gpu", "pool", "gpu"),
        ("periodic", "expected", 30, "max_expected_duration", timedelta(seconds=30)),
        ("cron", "max_duration", 120, "max_allowed_duration", timedelta(minutes=2)),
        ("cron", "queue", "gpu", "pool", "gpu"),
    ],
)
def test_a_decorator_takes_a_fields_other_documented_names(
    memory_app: Celery, kind: str, alias: str, value: Any, field: str, expected: Any
) -> None:
    """docs/configuration.md's "also accepted as" names: given once, not
    "given twice" beside the keyword left at its default."""
    dgs = DGS(memory_app, install_worker_hooks=False)
    options: dict[str, Any] = {alias: value}
    decorator = (
        dgs.periodic(60, **options)
        if kind == "periodic"
        else dgs.cron("0 * * * *", within=600, **options)
    )
    decorator(memory_app.task(name="t.alias", shared=False)(task_body))
    assert dgs.declarations.errors == {}
    assert getattr(dgs.declarations.specs["t.alias"], field) == expected
    both: dict[str, Any] = {alias: value, field: value}
    dgs.periodic(60, **both)(memory_app.task(name="t.both", shared=False)(task_body))
    assert "given twice" in str(dgs.declarations.errors["t.both"])


def task_body() -> None:
    """A task body (Celery cannot make a task of a lambda)."""


def test_iterables_given_as_generators_are_read_once_and_kept() -> None:
    decl = Declarations()
    fields = {
        "period": 60,
        "args": (i for i in range(2)),
        "dont_run_on_nodes": (n for n in ["node1", "node2"]),
        "blackouts": (w for w in [("01:00", "02:00")]),
    }
    decl.declare("periodic", "t.x", fields, source="test")
    spec = decl.specs["t.x"]
    assert spec.args == (0, 1)
    assert spec.dont_run_on_nodes == frozenset({"node1", "node2"})
    assert len(spec.blackout_periods) == 1


# --- durations as text, and fields named as the declaration wrote them ---


def test_dgs_schedules_take_durations_as_text() -> None:
    decl = Declarations()
    decl.declare_from_conf(
        {
            "t.p": {"period": "1h30m", "cooldown": "10m", "expected": "90s"},
            "t.c": {"cron": "0 6 * * *", "within": "2h"},
        }
    )
    assert decl.errors == {}
    assert decl.specs["t.p"].scheduling_period == timedelta(hours=1, minutes=30)  # type: ignore[attr-defined]
    assert decl.specs["t.p"].cooldown_duration == timedelta(minutes=10)  # type: ignore[attr-defined]
    assert decl.specs["t.p"].max_expected_duration == timedelta(seconds=90)
    assert decl.specs["t.c"].cron_max_schedule_duration == timedelta(hours=2)  # type: ignore[attr-defined]


def test_a_bad_duration_is_named_as_the_user_wrote_it() -> None:
    err = conf_error({"period": "abc"})
    assert err.field == "period"
    assert str(err) == (
        "schedule 't.x', field 'period': 'abc' is not a duration: give seconds, "
        "or a duration like 90s, 30m, 1h30m, 7d"
    )
    assert conf_error({"scheduling_period": "abc"}).field == "scheduling_period"
    assert conf_error({"period": 60, "cooldown": "2m"}).field == "cooldown"
    assert conf_error({"period": 0}).message == "must be more than zero, got 0s"
    assert conf_error({"kind": "cron", "cron": "0 6 * * *", "within": -1}).field == "within"


def test_two_declarations_compare_only_the_fields_they_gave() -> None:
    decl = Declarations()
    decl.declare("periodic", "t.x", {"period": 3600}, source="code")
    decl.declare_from_conf({"t.x": {"period": "2h"}})
    err = decl.errors["t.x"]
    assert err.field == "period"
    assert err.message == (
        "declared twice with different values (period: 1h and 2h; from app.conf.dgs_schedules)"
    )
