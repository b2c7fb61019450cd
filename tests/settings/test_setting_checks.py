"""Every setting's value is checked: each field of DgsSettings names its check
in its metadata, and ``None`` in app.conf is a value only for optional ones."""

from __future__ import annotations

import dataclasses

import pytest

from celery_dgs.errors import SettingsError
from celery_dgs.setting_checks import checked_fields
from celery_dgs.settings import DgsSettings


def test_every_field_declares_its_check() -> None:
    fields = [f.name for f in dataclasses.fields(DgsSettings)]
    assert [name for name, _ in checked_fields(DgsSettings)] == fields


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("check_retention", "1 day", "dgs_check_retention: '1 day' is not a duration: give"),
        ("check_retention", [1], "dgs_check_retention must be a number of seconds, a timedelta"),
        ("check_window_size", 0, "dgs_check_window_size must be a positive integer, got 0"),
        ("metrics_port", 70000, "dgs_metrics_port must be a TCP port, got 70000"),
        ("ewma_alpha", 1.5, "dgs_ewma_alpha must be in (0, 1], got 1.5"),
        ("capacity", True, "dgs_capacity must be a positive integer, got True"),
    ],
)
def test_a_field_check_names_the_setting(name: str, value: object, message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        DgsSettings(**{name: value})  # type: ignore[arg-type]
    assert str(raised.value).startswith(message)


def test_a_duration_setting_takes_text_as_the_command_line_does() -> None:
    settings = DgsSettings.from_conf(
        {"dgs_run_retention": "30d", "dgs_retry_backoff": [60, "5m", "1h30m"]}
    )
    assert settings.run_retention == 30 * 86400
    assert [d.total_seconds() for d in settings.retry_ladder] == [60, 300, 5400]


def test_none_in_app_conf_turns_an_optional_setting_off_and_else_means_the_default() -> None:
    settings = DgsSettings.from_conf(
        {"dgs_laxity_floor": None, "dgs_elevator_interval": None, "dgs_ping_interval": None}
    )
    assert settings.laxity_floor is None
    assert settings.elevator_interval is None
    assert settings.ping_interval == DgsSettings().ping_interval
