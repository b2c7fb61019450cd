"""``dgs_default_cooldown_fraction``: validation, and the specs every part of
celery-dgs reads (``DGS.all_declarations``: beat, sync, simulate, workers)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from celery import Celery

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.timing import DEFAULT_COOLDOWN_FRACTION
from celery_dgs.dgs import DGS
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings


def test_default_and_accepted_values() -> None:
    assert DgsSettings().default_cooldown_fraction == DEFAULT_COOLDOWN_FRACTION == 0.5
    conf = {"dgs_default_cooldown_fraction": 0}
    assert DgsSettings.from_conf(conf).default_cooldown_fraction == 0.0
    conf = {"dgs_default_cooldown_fraction": 0.25}
    assert DgsSettings.from_conf(conf).default_cooldown_fraction == 0.25


@pytest.mark.parametrize("bad", [1, 1.5, -0.1, "half", math.nan, True, timedelta(minutes=5)])
def test_bad_values_name_the_setting(bad: object) -> None:
    with pytest.raises(
        SettingsError,
        match=r"dgs_default_cooldown_fraction must be a fraction "
        r"of the period in \[0, 1\)",
    ):
        DgsSettings.from_conf({"dgs_default_cooldown_fraction": bad})


def _declare(app: Celery) -> DGS:
    dgs = DGS(app, install_worker_hooks=False)

    @dgs.periodic(period=timedelta(minutes=10))
    @app.task(name="t.unset", shared=False)
    def unset() -> None: ...

    @dgs.periodic(period=timedelta(minutes=10), cooldown=0)
    @app.task(name="t.zero", shared=False)
    def zero() -> None: ...

    @dgs.periodic(period=timedelta(minutes=10), cooldown=timedelta(minutes=1))
    @app.task(name="t.one", shared=False)
    def one() -> None: ...

    @app.task(name="t.conf", shared=False)
    def conf() -> None: ...

    app.conf.dgs_schedules = {"t.conf": {"kind": "periodic", "period": 600}}
    return dgs


def cooldowns(dgs: DGS) -> dict[str, tuple[timedelta, bool]]:
    out = {}
    for name, spec in dgs.all_declarations().specs.items():
        assert isinstance(spec, PeriodicSpec)
        out[name] = (spec.cooldown_duration, spec.default_cooldown)
    return out


def test_unset_cooldowns_get_the_default_explicit_ones_are_kept(memory_app: Celery) -> None:
    dgs = _declare(memory_app)
    assert cooldowns(dgs) == {
        "t.unset": (timedelta(minutes=5), True),
        "t.conf": (timedelta(minutes=5), True),
        "t.zero": (timedelta(0), False),
        "t.one": (timedelta(minutes=1), False),
    }
    # The declarations themselves keep what was declared: declaring the same
    # schedule again (a module imported twice) is no conflict.
    dgs.declarations.declare(
        "periodic", "t.unset", {"period": timedelta(minutes=10)}, source="test"
    )
    assert dgs.all_declarations().errors == {}


def test_the_setting_chooses_the_fraction(memory_app: Celery) -> None:
    memory_app.conf.dgs_default_cooldown_fraction = 0.1
    assert cooldowns(_declare(memory_app))["t.unset"] == (timedelta(minutes=1), True)
