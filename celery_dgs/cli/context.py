"""What every ``celery dgs`` command needs: the app, its settings and clients,
colour, schedule-name resolution and error handling."""

from __future__ import annotations

import difflib
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

import click
import redis
from sqlalchemy.exc import SQLAlchemyError

from ..dgs import DGS, get_dgs
from ..errors import (
    DgsError,
    LeaseError,
    ScheduleConfigError,
    SettingsError,
    UnknownScheduleError,
)
from ..runtime import Runtime, runtime_for
from ..settings import DgsSettings
from ..store.records import StoredSchedule

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status when the state could not be read or written (Redis or the
#: database unreachable). 1 is the health check's ERROR, 2 a usage error (click).
EXIT_UNAVAILABLE = 3
#: Exit status of a configuration error: an unknown or invalid ``dgs_*``
#: setting, a database URL that cannot be used (unknown dialect, driver not
#: installed), no Redis URL. Fixing it takes a change of configuration, not a
#: retry, so it is told apart from :data:`EXIT_UNAVAILABLE`.
EXIT_CONFIG = 4


_META_KEY = "celery_dgs.cli.env"


class StateUnavailable(click.ClickException):
    """Redis or the store failed; exit status :data:`EXIT_UNAVAILABLE`."""

    exit_code = EXIT_UNAVAILABLE


class ConfigurationError(click.ClickException):
    """The settings are wrong; exit status :data:`EXIT_CONFIG`."""

    exit_code = EXIT_CONFIG


@dataclass
class Env:
    """The resolved context of one command."""

    app: Any
    no_color: bool = False
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
                rt = Runtime(settings, broker_url=self.app.conf.broker_url)
            self._runtime = rt
        return self._runtime

    @property
    def default_pool(self) -> str:
        return str(self.app.conf.task_default_queue or "celery")

    def color(self) -> bool:
        """Colour only when stdout is a terminal and ``--no-color``/``NO_COLOR`` is unset."""
        return not self.no_color and sys.stdout.isatty()

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None


def make_env(ctx: click.Context) -> Env:
    """The group's :class:`Env`, from Celery's CLI context (``ctx.obj.app``)."""
    obj = ctx.obj
    app = getattr(obj, "app", None)
    if app is None:
        raise click.UsageError("run this as `celery -A proj dgs ...`")
    env = Env(app=app, no_color=bool(getattr(obj, "no_color", False)))
    ctx.meta[_META_KEY] = env
    ctx.call_on_close(env.close)
    return env


def get_env(ctx: click.Context) -> Env:
    """The :class:`Env` the ``dgs`` group made (``ctx.meta`` is shared by subcommands)."""
    env = ctx.meta.get(_META_KEY)
    if not isinstance(env, Env):  # pragma: no cover - the group always makes one
        raise click.UsageError("run this as `celery -A proj dgs ...`")
    return env


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def wrap_errors(fn: F) -> F:
    """Turn Redis and database failures into one clear line and exit status
    :data:`EXIT_UNAVAILABLE`, configuration errors into one clear line and
    :data:`EXIT_CONFIG`, instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except click.ClickException:
            raise
        except (redis.RedisError, LeaseError) as exc:
            raise StateUnavailable(f"Redis: {exc}") from exc
        except SQLAlchemyError as exc:
            raise StateUnavailable(f"schedule store: {type(exc).__name__}: {exc}") from exc
        except UnknownScheduleError as exc:
            raise click.BadParameter(str(exc), param_hint="NAME") from exc
        except (SettingsError, ScheduleConfigError) as exc:
            raise ConfigurationError(f"configuration: {exc}") from exc
        except DgsError as exc:
            raise StateUnavailable(str(exc)) from exc

    return cast("F", wrapper)


def resolve_schedule(env: Env, name: str) -> StoredSchedule:
    """The stored schedule called ``name``; a usage error (exit 2) naming the
    closest stored names otherwise."""
    store = env.runtime.store
    try:
        return store.get(name)
    except UnknownScheduleError:
        known = [s.name for s in store.list_schedules(include_inactive=True)]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        if not known:
            hint = " (the store has no schedules: run `celery dgs sync` or start beat)"
        raise click.BadParameter(f"no schedule named {name!r}{hint}", param_hint="'NAME'") from None
