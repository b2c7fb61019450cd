"""``dgs_laxity_floor``: validation, and which index beat builds from it."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from celery_dgs.core.laxity import DEFAULT_LAXITY_FLOOR_S, LaxityIndex
from celery_dgs.core.overload import RestoringIndex, make_index
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings


def test_default_and_accepted_values() -> None:
    assert DgsSettings().laxity_floor == DEFAULT_LAXITY_FLOOR_S == 60.0
    assert DgsSettings.from_conf({"dgs_laxity_floor": 30}).laxity_floor == 30.0
    assert DgsSettings.from_conf({"dgs_laxity_floor": timedelta(minutes=2)}).laxity_floor == 120.0
    assert DgsSettings.from_conf({"dgs_laxity_floor": 0}).laxity_floor == 0.0
    assert DgsSettings.from_conf({"dgs_laxity_floor": None}).laxity_floor is None


@pytest.mark.parametrize("bad", [-1, "soon", math.inf, math.nan, True])
def test_bad_values_name_the_setting(bad: object) -> None:
    with pytest.raises(SettingsError, match="dgs_laxity_floor"):
        DgsSettings.from_conf({"dgs_laxity_floor": bad})


def test_make_index_builds_laxity_only_for_restore_with_a_floor() -> None:
    def zero(name: str) -> float:
        return 0.0

    assert (
        type(make_index("restore", expected_s=zero, margin_s=zero, laxity_floor_s=60.0))
        is LaxityIndex
    )
    assert (
        type(make_index("restore", expected_s=zero, margin_s=zero, laxity_floor_s=None))
        is RestoringIndex
    )
    with pytest.raises(ValueError, match="margins"):
        make_index("restore", expected_s=zero, laxity_floor_s=60.0)
