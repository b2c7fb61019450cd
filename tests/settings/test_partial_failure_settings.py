"""``dgs_partial_failure_threshold`` and ``dgs_retry_duration_fraction``: defaults,
validation, and the ladder beat, status and the simulator read."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from celery_dgs.core.items import DEFAULT_PARTIAL_FAILURE_THRESHOLD
from celery_dgs.core.timing import DEFAULT_RETRY_DURATION_FRACTION, RetryLadder
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings


def test_defaults() -> None:
    settings = DgsSettings()
    assert settings.partial_failure_threshold == DEFAULT_PARTIAL_FAILURE_THRESHOLD == 0.5
    assert settings.retry_duration_fraction == DEFAULT_RETRY_DURATION_FRACTION == 1.0
    ladder = settings.retry_ladder
    assert isinstance(ladder, RetryLadder)
    assert ladder.duration_fraction == 1.0
    assert ladder == (timedelta(minutes=5), timedelta(hours=1), timedelta(hours=4))


def test_accepted_values() -> None:
    conf = {"dgs_partial_failure_threshold": 0.2, "dgs_retry_duration_fraction": 0}
    settings = DgsSettings.from_conf(conf)
    assert settings.partial_failure_threshold == 0.2
    whole = DgsSettings.from_conf({"dgs_partial_failure_threshold": 1})
    assert whole.partial_failure_threshold == 1
    assert isinstance(settings.retry_ladder, RetryLadder)
    assert settings.retry_ladder.duration_fraction == 0.0


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "half", math.nan, True])
def test_a_threshold_outside_zero_one_names_the_setting(bad: object) -> None:
    with pytest.raises(SettingsError, match=r"dgs_partial_failure_threshold .*\(0, 1\]"):
        DgsSettings.from_conf({"dgs_partial_failure_threshold": bad})


@pytest.mark.parametrize("bad", [-1, math.inf, "long", True])
def test_a_bad_fraction_names_the_setting(bad: object) -> None:
    with pytest.raises(SettingsError, match="dgs_retry_duration_fraction"):
        DgsSettings.from_conf({"dgs_retry_duration_fraction": bad})
