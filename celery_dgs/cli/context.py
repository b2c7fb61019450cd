"""What every ``celery dgs`` command needs: the operations' environment
(:class:`~celery_dgs.ops.env.Env`: the app, its settings and clients), colour,
and error handling (exit statuses)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar, cast

import click
import redis
from sqlalchemy.exc import SQLAlchemyError

from ..errors import (
    DgsError,
    LeaseError,
    MalformedDataError,
    ScheduleConfigError,
    SettingsError,
    UnknownScheduleError,
)
from ..failures import explain_failure, failure_summary, missing_sqlite_directory
from ..ops.env import Env
from ..ops.errors import ActionRefused, UnknownTarget

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
_NO_COLOR_KEY = "celery_dgs.cli.no_color"


class StateUnavailable(click.ClickException):
    """Redis or the store failed; exit status :data:`EXIT_UNAVAILABLE`."""

    exit_code = EXIT_UNAVAILABLE


class ConfigurationError(click.ClickException):
    """The settings are wrong; exit status :data:`EXIT_CONFIG`."""

    exit_code = EXIT_CONFIG


def make_env(ctx: click.Context) -> Env:
    """The group's :class:`Env`, from Celery's CLI context (``ctx.obj.app``)."""
    obj = ctx.obj
    app = getattr(obj, "app", None)
    if app is None:
        raise click.UsageError("run this as `celery -A proj dgs ...`")
    env = Env(app=app)
    ctx.meta[_META_KEY] = env
    ctx.meta[_NO_COLOR_KEY] = bool(getattr(obj, "no_color", False))
    ctx.call_on_close(env.close)
    return env


def get_env(ctx: click.Context) -> Env:
    """The :class:`Env` the ``dgs`` group made (``ctx.meta`` is shared by subcommands)."""
    env = ctx.meta.get(_META_KEY)
    if not isinstance(env, Env):  # pragma: no cover - the group always makes one
        raise click.UsageError("run this as `celery -A proj dgs ...`")
    return env


def use_color(ctx: click.Context) -> bool:
    """Colour only when stdout is a terminal and ``--no-color``/``NO_COLOR`` is unset."""
    return not ctx.meta.get(_NO_COLOR_KEY, False) and sys.stdout.isatty()


#: Exit status when the reader of stdout went away: a process killed by
#: ``SIGPIPE`` reports 128 + 13 in a shell, and 1 means "a schedule in ERROR".
EXIT_BROKEN_PIPE = 141


def _quiet_broken_pipe() -> NoReturn:
    """The reader of stdout went away (``dgs export | head``): stop without a
    message, stdout pointed at ``/dev/null`` so that flushing it at exit
    cannot fail again (the recipe of Python's ``signal`` docs), with
    :data:`EXIT_BROKEN_PIPE`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)


def store_failure(exc: BaseException) -> tuple[str, bool]:
    """``(line, refused)``: the store's failure in one line (the driver's
    message, without SQLAlchemy's statement and link); a SQLite file whose
    directory does not exist is named (SQLite says only "unable to open
    database file"). ``refused``: the database refused the credentials, and
    the line names the server and the setting, as beat's does."""
    line = failure_summary(exc)
    ctx = click.get_current_context(silent=True)
    env = None if ctx is None else ctx.meta.get(_META_KEY)
    if not isinstance(env, Env):
        return line, False
    try:
        url = env.settings.database_url
        missing = missing_sqlite_directory(url)
    except Exception:  # the settings themselves are the problem: said elsewhere
        return line, False
    explained = explain_failure(exc, redis_url=None, redis_setting="", database_url=url)
    if explained is not None and explained[1]:
        return explained
    return (line if missing is None else f"{line}; {missing}"), False


def redis_failure(exc: BaseException) -> tuple[str, bool]:
    """``(line, refused)``: the line names the Redis server and the setting it
    comes from when ``exc`` is a failure to reach it (``refused``: the
    credentials), else it is ``Redis: <exc>`` (also when the settings cannot
    be read)."""
    ctx = click.get_current_context(silent=True)
    env = None if ctx is None else ctx.meta.get(_META_KEY)
    plain = (f"Redis: {exc}", False)
    if not isinstance(env, Env):
        return plain
    try:
        settings = env.settings
        redis_url = env.runtime.redis_url
    except Exception:  # the settings themselves are the problem: said elsewhere
        return plain
    explained = explain_failure(
        exc,
        redis_url=redis_url,
        redis_setting=settings.redis_url_setting,
        database_url=settings.database_url,
    )
    return plain if explained is None else explained


def _no_app_hint() -> str:
    """A hint when ``celery`` was given no app (no ``-A``, no ``APP``): the
    settings read are then those of Celery's default app."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.find_root().params.get("app") is not None:
        return ""
    return " (no app given: run this as `celery -A proj dgs ...`)"


def wrap_errors(fn: F) -> F:
    """Turn Redis and database failures into one clear line and exit status
    :data:`EXIT_UNAVAILABLE`, configuration errors into one clear line and
    :data:`EXIT_CONFIG`, instead of a traceback; an unknown name is a usage
    error (exit status 2), a refused action exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            _quiet_broken_pipe()
        except click.ClickException:
            raise
        except UnknownTarget as exc:
            raise click.BadParameter(exc.message, param_hint=f"'{exc.argument}'") from None
        except ActionRefused as exc:
            raise click.ClickException(exc.message) from None
        except (redis.RedisError, LeaseError) as exc:
            shown, refused = redis_failure(exc)
            if refused:  # the credentials
                raise ConfigurationError(f"configuration: {shown}") from exc
            raise StateUnavailable(shown) from exc
        except SQLAlchemyError as exc:
            shown, refused = store_failure(exc)
            if refused:  # the credentials
                raise ConfigurationError(f"configuration: {shown}") from exc
            raise StateUnavailable(f"schedule store: {shown}") from exc
        except UnknownScheduleError as exc:
            raise click.BadParameter(str(exc), param_hint="NAME") from exc
        except MalformedDataError as exc:
            shown, config = redis_failure(exc)  # a Redis database number it lacks, say
            if config:
                raise ConfigurationError(f"configuration: {shown}") from exc
            raise StateUnavailable(str(exc)) from exc
        except (SettingsError, ScheduleConfigError) as exc:
            raise ConfigurationError(f"configuration: {exc}{_no_app_hint()}") from exc
        except DgsError as exc:
            raise StateUnavailable(str(exc)) from exc

    return cast("F", wrapper)
