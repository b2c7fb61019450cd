"""Workers of another project: registered under this Redis database and key
prefix by workers that serve another schedule store. Beat never places a run
on one (its worker would not know the task), and logs each once."""

from __future__ import annotations

import logging

from ..registry import WorkerInfo, foreign_workers_text, split_by_store

logger = logging.getLogger("celery_dgs.beat")


class ForeignWorkers:
    """Filters another store's workers out of a round's live workers."""

    def __init__(self, store: str | None, prefix: str) -> None:
        self.store, self.prefix = store, prefix
        self._logged: set[str] = set()

    def own(self, workers: list[WorkerInfo]) -> list[WorkerInfo]:
        """``workers`` less another store's (logged once each, as an error)."""
        own, foreign = split_by_store(workers, self.store)
        if not foreign:
            return workers
        new = [w for w in foreign if w.name not in self._logged]
        if new:
            self._logged.update(w.name for w in new)
            logger.error("celery-dgs beat: %s", foreign_workers_text(new, self.prefix))
        return own
