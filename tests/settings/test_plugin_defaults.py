"""``DGS(app)`` sets the Celery settings the plugin needs where the application
did not (``worker_prefetch_multiplier = 1``), whenever the app's configuration
is loaded, and never overrides a value the application gave; ``celery dgs
check`` and the worker's start-up advice then agree with it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from celery import Celery
from celery.beat import Service
from celery.signals import beat_init

from celery_dgs.celery_settings import check_celery_settings
from celery_dgs.dgs import DGS


def app_with(**conf: Any) -> Celery:
    app = Celery("defaults", broker="redis://127.0.0.1:1/0", set_as_current=False)
    if conf:
        app.config_from_object(conf)
    return app


def prefetch_advice(app: Celery) -> list[str]:
    return [
        str(a)
        for a in check_celery_settings(app.conf, {})
        if a.setting == "worker_prefetch_multiplier"
    ]


def test_an_app_that_did_not_set_prefetch_gets_1_and_the_check_agrees() -> None:
    app = app_with()
    dgs = DGS(app, install_worker_hooks=False)
    assert app.conf.worker_prefetch_multiplier == 1
    assert prefetch_advice(app) == []
    [line] = dgs.celery_defaults_set
    assert line.startswith("worker_prefetch_multiplier = 1 set by celery-dgs")


def test_an_app_configured_before_dgs_gets_it_too() -> None:
    app = app_with()
    assert app.conf.worker_prefetch_multiplier == 4  # the configuration is loaded now
    DGS(app, install_worker_hooks=False)
    assert app.conf.worker_prefetch_multiplier == 1


@pytest.mark.parametrize("how", ["config_from_object", "conf.update", "update_after_dgs", "old"])
def test_a_value_the_application_gave_is_kept_and_the_check_warns(how: str) -> None:
    if how == "config_from_object":
        app = app_with(worker_prefetch_multiplier=4)
    elif how == "old":
        app = app_with(CELERYD_PREFETCH_MULTIPLIER=4)
    else:
        app = app_with()
        if how == "conf.update":
            app.conf.update(worker_prefetch_multiplier=4)
    dgs = DGS(app, install_worker_hooks=False)
    if how == "update_after_dgs":
        app.conf.update(worker_prefetch_multiplier=4)
    assert app.conf.worker_prefetch_multiplier == 4
    assert len(prefetch_advice(app)) == 1
    if how != "update_after_dgs":
        assert dgs.celery_defaults_set == []


def test_a_second_dgs_of_the_app_keeps_the_lines() -> None:
    app = app_with()
    first = DGS(app, install_worker_hooks=False)
    assert app.conf.worker_prefetch_multiplier == 1
    assert DGS(app, install_worker_hooks=False).celery_defaults_set == first.celery_defaults_set


def test_beat_and_worker_log_what_dgs_set(caplog: pytest.LogCaptureFixture) -> None:
    """Logged when beat or a worker starts (its logging is set up by then),
    for this app only."""
    app = app_with()
    DGS(app, install_worker_hooks=False)
    assert app.conf.worker_prefetch_multiplier == 1
    other = app_with()
    with caplog.at_level(logging.INFO, logger="celery_dgs"):
        beat_init.send(sender=Service(app=other))
        assert not [r for r in caplog.records if "set by celery-dgs" in r.getMessage()]
        beat_init.send(sender=Service(app=app))
    [record] = [r for r in caplog.records if "set by celery-dgs" in r.getMessage()]
    assert record.getMessage().startswith(
        "celery-dgs: worker_prefetch_multiplier = 1 set by celery-dgs (Celery's default of 4"
    )
