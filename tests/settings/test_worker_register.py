"""``dgs_worker_register`` (fixed-capacity mode): default on, a boolean only.
Its effect is tested end to end in tests/e2e/test_capacity_e2e.py."""

from __future__ import annotations

import pytest

from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings


def test_workers_register_by_default_and_the_setting_is_a_boolean() -> None:
    assert DgsSettings().worker_register is True
    off = DgsSettings.from_conf({"dgs_worker_register": False, "dgs_capacity": 4})
    assert (off.worker_register, off.capacity) == (False, 4)
    with pytest.raises(SettingsError, match="dgs_worker_register must be True or False"):
        DgsSettings.from_conf({"dgs_worker_register": "no"})
