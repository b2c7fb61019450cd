"""What a worker logs at its start besides its own readiness: invalid
declarations (schedules' and ``@dgs.deferred`` ones), a beat leader that
serves another schedule store, unsafe Celery settings and settings that
weaken a guarantee. Advice only: the worker starts regardless."""

from __future__ import annotations

import logging
from typing import Any

from ..celery_settings import check_celery_settings
from ..failures import log_failure
from ..leases.leader import RedisLeader, foreign_leader
from ..runtime import runtime_for
from .startup import DgsPlugin

logger = logging.getLogger("celery_dgs.worker")


def _log_foreign_leader(app: Any, dgs: DgsPlugin) -> None:
    """An error when the leading beat serves another schedule store: another
    project shares this Redis database and key prefix (one read of the
    leader lease; the store's id only when the lease names a store)."""
    rt = runtime_for(app, dgs.settings)
    try:
        info = RedisLeader(rt.redis, rt.keys, timeout=dgs.settings.beat_leader_timeout).current()
        if info is None or not info.store:
            return
        why = foreign_leader(info, rt.store.stored_store_id(), dgs.settings.key_prefix)
    except Exception as exc:  # advice only: the worker starts regardless
        log_failure(logger, exc, "celery-dgs: reading the beat leader at start failed")
        return
    if why is not None:
        logger.error("celery-dgs: %s", why)


def log_start_advice(app: Any, dgs: DgsPlugin) -> None:
    """Log the invalid declarations, the unsafe Celery settings and the
    settings that weaken a guarantee, at the worker's start."""
    for name, err in dgs.declarations.errors.items():
        logger.error(
            "celery-dgs: schedule %s: invalid declaration; its runs, if beat "
            "serves a stored version, use that version: %s",
            name,
            err,
        )
    for task, err in dgs.check_template_errors.items():
        logger.error(
            "celery-dgs: task %s: invalid @dgs.deferred declaration (not a deferred "
            "check until fixed; its stored checks still run): field %r: %s",
            task,
            err.field,
            err.message,
        )
    for warning in dgs.declarations.warnings:
        logger.warning("celery-dgs: %s", warning)
    _log_foreign_leader(app, dgs)
    try:
        specs = dgs.declarations.specs
        tasks = {s.task: app.tasks[s.task] for s in specs.values() if s.task in app.tasks}
        for advice in check_celery_settings(app.conf, specs, tasks):
            logger.warning("celery-dgs: %s", advice)
        for warning in dgs.settings.warnings():
            logger.warning("celery-dgs: %s", warning)
    except Exception:
        logger.exception("celery-dgs: checking the Celery settings failed")
