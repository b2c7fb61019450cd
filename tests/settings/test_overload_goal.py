"""``dgs_overload`` and ``dgs_overload_floor``: validation, and the order beat builds."""

from __future__ import annotations

import math

import pytest

from celery_dgs.core.fewest_errors import FewestErrorsIndex
from celery_dgs.core.ranking import overload_index
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings


def test_defaults_are_fair_with_a_floor_of_five_periods() -> None:
    settings = DgsSettings()
    assert settings.overload == "fair"
    assert settings.overload_floor == 5.0
    assert settings.order_policy.goal == "fair"


def test_fewest_errors_with_its_floor_reaches_the_order() -> None:
    settings = DgsSettings.from_conf({"dgs_overload": "fewest_errors", "dgs_overload_floor": 3})
    order = settings.order_policy
    assert (order.goal, order.floor_periods) == ("fewest_errors", 3.0)
    index = overload_index(
        order,
        expected_s=lambda n: 1.0,
        margin_s=lambda n: 1.0,
        period_s=lambda n: 60.0,
        overloaded=lambda: True,
    )
    assert isinstance(index, FewestErrorsIndex)


@pytest.mark.parametrize("bad", ["fewest", "", "FAIR", 1])
def test_an_unknown_goal_names_the_setting_and_the_choices(bad: object) -> None:
    with pytest.raises(SettingsError, match=r"dgs_overload must be one of fair, fewest_errors"):
        DgsSettings.from_conf({"dgs_overload": bad})


@pytest.mark.parametrize("bad", [0.5, 0, -2, math.inf, math.nan, "5", True])
def test_a_floor_below_one_period_is_refused(bad: object) -> None:
    with pytest.raises(SettingsError, match="dgs_overload_floor"):
        DgsSettings.from_conf({"dgs_overload_floor": bad})


@pytest.mark.parametrize(
    "conf",
    [
        {"dgs_overload_policy": "shed"},
        {"dgs_overload_policy": "greedy"},
        {"dgs_laxity_floor": None},
    ],
)
def test_fewest_errors_needs_the_default_order_under_it(conf: dict[str, object]) -> None:
    with pytest.raises(SettingsError, match="dgs_overload"):
        DgsSettings.from_conf({"dgs_overload": "fewest_errors", **conf})
