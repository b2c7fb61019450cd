"""``celery dgs check`` agrees with what ``DGS(app)`` set: no prefetch warning
for an app that did not set ``worker_prefetch_multiplier`` (the plugin set it
to 1), one for an app that set it to 4."""

from __future__ import annotations

from tests.cli.conftest import World


def test_celery_dgs_check_agrees(world: World) -> None:
    """The CLI's app did not set the multiplier: no warning; set to 4, one."""
    result = world.invoke("check")
    assert result.exit_code == 0, result.output
    assert "worker_prefetch_multiplier" not in result.output
    world.app.conf.worker_prefetch_multiplier = 4
    result = world.invoke("check")
    assert "WARNING Celery setting worker_prefetch_multiplier = 4 is unsafe" in result.stderr
