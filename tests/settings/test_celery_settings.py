"""The start-up check of Celery settings (pure logic over a conf mapping)."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from celery_dgs.celery_settings import check_celery_settings
from celery_dgs.core.spec import PeriodicSpec

BOUNDED = PeriodicSpec(
    task="t.short", scheduling_period=timedelta(hours=1), max_allowed_duration=timedelta(minutes=30)
)
UNBOUNDED = PeriodicSpec(task="t.long", scheduling_period=timedelta(hours=1))
SAFE = {"broker_url": "redis://localhost/0", "worker_prefetch_multiplier": 1}


def settings_named(
    conf: dict[str, object], specs: dict[str, PeriodicSpec], **kw: object
) -> list[str]:
    return [a.setting for a in check_celery_settings(conf, specs, **kw)]  # type: ignore[arg-type]


def test_the_recommended_settings_pass() -> None:
    assert settings_named(SAFE, {"a": BOUNDED, "b": UNBOUNDED}) == []
    assert (
        settings_named(
            {
                **SAFE,
                "task_acks_late": True,
                "broker_transport_options": {"visibility_timeout": 3601},
            },
            {"a": BOUNDED},
        )
        == []
    )


def test_prefetch_other_than_one_is_named_with_the_safe_value() -> None:
    [advice] = check_celery_settings({"broker_url": "redis://x"}, {"a": BOUNDED})
    assert advice.setting == "worker_prefetch_multiplier"
    assert (advice.found, advice.safe) == (4, "1")  # Celery's default is 4
    assert "worker_prefetch_multiplier = 4 is unsafe" in str(advice)


def test_acks_late_with_a_visibility_timeout_shorter_than_the_longest_run() -> None:
    conf = {**SAFE, "task_acks_late": True, "broker_transport_options": {"visibility_timeout": 600}}
    [advice] = check_celery_settings(conf, {"a": BOUNDED})
    assert advice.setting == "broker_transport_options['visibility_timeout']"
    assert advice.found == 600
    assert "1800s" in advice.safe
    assert "task_acks_late=False" in advice.safe
    [advice] = check_celery_settings({**SAFE, "task_acks_late": True}, {"b": UNBOUNDED})
    assert advice.found == 3600  # kombu's default
    assert "b have no max_allowed_duration" in advice.why
    assert advice.safe == (
        "task_acks_late=False, or a max_allowed_duration on every acks_late schedule and a "
        "visibility_timeout above the longest"
    ), "no bound to name (not 'above 0s')"
    # not a Redis broker: no visibility timeout to compare
    conf = {**SAFE, "task_acks_late": True, "broker_url": "amqp://x"}
    assert settings_named(conf, {"b": UNBOUNDED}) == []


def test_reject_on_worker_lost_and_per_task_overrides() -> None:
    conf = {
        **SAFE,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "broker_transport_options": {"visibility_timeout": 7200},
    }
    assert settings_named(conf, {"a": BOUNDED}) == ["task_reject_on_worker_lost"]
    # a task's own acks_late=False wins over the app's setting
    tasks = {"t.short": SimpleNamespace(acks_late=False, reject_on_worker_lost=None)}
    assert settings_named(conf, {"a": BOUNDED}, tasks=tasks) == []
    # and a task's acks_late=True counts even when the app's is off
    tasks = {"t.long": SimpleNamespace(acks_late=True, reject_on_worker_lost=None)}
    assert settings_named(SAFE, {"b": UNBOUNDED}, tasks=tasks) == [
        "broker_transport_options['visibility_timeout']"
    ]
