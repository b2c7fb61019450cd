"""``partial_failure_threshold`` where schedules are declared: the decorators,
``dgs_schedules`` and the runtime API; a value outside (0, 1] is an error
naming the schedule and the field, never an exception out of the declaring
module."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from celery import Celery

from celery_dgs.declarations import Declarations
from celery_dgs.dgs import DGS
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.store import MemoryScheduleStore


def test_the_decorators_declare_it(memory_app: Celery) -> None:
    dgs = DGS(memory_app, install_worker_hooks=False)

    @dgs.periodic(period=timedelta(hours=1), partial_failure_threshold=0.2)
    @memory_app.task(name="t.pft_scrape", shared=False)
    def scrape() -> None: ...

    @dgs.cron("0 0 * * *", within=timedelta(hours=6), partial_failure_threshold=1.5)
    @memory_app.task(name="t.pft_nightly", shared=False)
    def nightly() -> None: ...

    decl = dgs.all_declarations(import_modules=False)
    assert decl.specs["t.pft_scrape"].partial_failure_threshold == 0.2
    error = decl.errors["t.pft_nightly"]
    assert (error.schedule, error.field) == ("t.pft_nightly", "partial_failure_threshold")
    assert "(0, 1]" in str(error)


@pytest.mark.parametrize("value", [0, -1, 2, "half", None])
def test_dgs_schedules_entries(value: Any) -> None:
    decl = Declarations()
    decl.declare_from_conf({"t.x": {"period": 60, "partial_failure_threshold": value}})
    if value is None:  # unset: dgs_partial_failure_threshold applies
        assert decl.specs["t.x"].partial_failure_threshold is None
        return
    [error] = decl.errors.values()
    assert (error.schedule, error.field) == ("t.x", "partial_failure_threshold")


def test_the_runtime_api() -> None:
    api = RuntimeSchedules(MemoryScheduleStore())
    assert api.upsert("t.scrape@a", period=60, partial_failure_threshold=0.3) == "inserted"
    with pytest.raises(ScheduleConfigError, match="partial_failure_threshold") as info:
        api.upsert("t.scrape@b", period=60, partial_failure_threshold=0)
    assert "t.scrape@b" in str(info.value)
