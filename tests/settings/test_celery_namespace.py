"""Settings read the Django way: ``app.config_from_object(obj, namespace="CELERY")``
puts every setting under ``CELERY_``; Celery reads its own there, and celery-dgs
its ``CELERY_DGS_*`` ones (a misspelt one named, as a ``dgs_*`` one is)."""

from __future__ import annotations

import pytest
from celery import Celery

from celery_dgs import DGS
from celery_dgs.errors import SettingsError


class DjangoSettings:
    CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    CELERY_DGS_DATABASE_URL = "sqlite:////tmp/celery-dgs-namespace.sqlite3"
    CELERY_DGS_PING_INTERVAL = 7
    CELERY_DGS_SCHEDULES = {"proj.sync": {"period": "1h"}}


def test_celery_dgs_settings_are_read_under_the_apps_namespace() -> None:
    app = Celery("proj", set_as_current=False)
    app.config_from_object(DjangoSettings, namespace="CELERY")
    settings = DGS(app, install_worker_hooks=False).settings
    assert settings.database_url == DjangoSettings.CELERY_DGS_DATABASE_URL
    assert settings.ping_interval == 7.0
    assert settings.schedules == {"proj.sync": {"period": "1h"}}


def test_a_misspelt_one_is_named() -> None:
    class Misspelt:
        CELERY_DGS_PING_INTERVALL = 7

    app = Celery("proj", set_as_current=False)
    app.config_from_object(Misspelt, namespace="CELERY")
    with pytest.raises(SettingsError, match="unknown setting 'CELERY_DGS_PING_INTERVALL'"):
        DGS(app, install_worker_hooks=False).settings  # noqa: B018
