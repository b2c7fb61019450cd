"""The environment of an operation: the Celery app, its celery-dgs settings
and the clients of its store and Redis, built on first use."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..dgs import DGS, get_dgs
from ..runtime import Runtime, runtime_for, runtime_of_app
from ..settings import DgsSettings


@dataclass
class Env:
    """An app, its settings and its clients (built once, on first use)."""

    app: Any
    _runtime: Runtime | None = field(default=None, repr=False)

    @property
    def dgs(self) -> DGS:
        return get_dgs(self.app)

    @property
    def settings(self) -> DgsSettings:
        return self.dgs.settings

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            settings = self.settings
            rt = runtime_for(self.app, settings)
            if rt.settings != settings:  # a cached bundle of another app (id reuse)
                rt = runtime_of_app(self.app, settings)
            self._runtime = rt
        return self._runtime

    @property
    def default_pool(self) -> str:
        return str(self.app.conf.task_default_queue or "celery")

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
