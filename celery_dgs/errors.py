"""Every error celery-dgs raises on purpose. One root: :class:`DgsError`.

Each class also subclasses the builtin that fits, so callers that already catch
``ValueError`` or ``RuntimeError`` keep working.
"""

from __future__ import annotations


class DgsError(Exception):
    """Root of every celery-dgs error."""


class ScheduleConfigError(DgsError, ValueError):
    """A schedule declaration is invalid.

    ``schedule`` is the schedule's name (``task`` or ``task@configuration``) and
    ``field`` the offending field, so that the message always says which
    declaration to fix and where.
    """

    def __init__(self, schedule: str, field: str, message: str) -> None:
        self.schedule = schedule
        self.field = field
        self.message = message
        super().__init__(f"schedule {schedule!r}, field {field!r}: {message}")


class OwnershipError(ScheduleConfigError):
    """A change to a schedule that another owner manages: the runtime API asked
    to change a declared schedule (field ``owner``). The message names the
    schedule and who owns it."""

    def __init__(self, schedule: str, message: str) -> None:
        super().__init__(schedule, "owner", message)


class SettingsError(DgsError, ValueError):
    """An ``app.conf.dgs_*`` setting is unknown or has an invalid value."""


class StoreClaimedError(SettingsError):
    """The schedule store holds another project's declarations (another key
    prefix synced it): syncing this app's would deactivate them."""

    def __init__(self, database: str, ours: str, theirs: str) -> None:
        self.database, self.ours, self.theirs = database, ours, theirs
        super().__init__(
            f"the schedule store at {database} (dgs_database_url) holds the declared "
            f"schedules of another project (dgs_key_prefix {theirs!r}; this app's is "
            f"{ours!r}): storing this app's would deactivate them. Give each project its "
            "own database; if this app replaces that project, run celery dgs sync --take-over"
        )


class SchemaTooNewError(SettingsError):
    """The database's schema is at a revision this celery-dgs does not know:
    a newer celery-dgs upgraded it (upgrades are one-way)."""

    def __init__(self, database: str, revision: str, head: str) -> None:
        self.database, self.revision, self.head = database, revision, head
        super().__init__(
            f"the schedule store at {database} (dgs_database_url) has schema revision "
            f"{revision!r}, which this celery-dgs does not know (its newest is {head!r}): "
            "a newer celery-dgs upgraded it, and an upgrade is not undone; run that "
            "version (or a newer one) in every process"
        )


class MalformedDataError(DgsError, ValueError):
    """Data read from Redis or the store is not in the format celery-dgs wrote.

    Raised instead of crashing on foreign or corrupted data; the message names
    the key (or row) and what was wrong with it.
    """


class LeaseError(DgsError, RuntimeError):
    """A lease operation could not be carried out (for example, Redis is unreachable)."""


class NotLeaderError(LeaseError):
    """A fenced write was refused: the caller no longer holds the leader lease it
    names (another beat took over). Nothing was written."""


class StaleTokenError(DgsError, RuntimeError):
    """A write carried a fencing token that is no longer the schedule's current one."""


class RetryRefused(DgsError, RuntimeError):
    """A scheduled run asked Celery to retry it (``self.retry()``, ``autoretry_for``).

    celery-dgs retries scheduled tasks itself (``dgs_retry_backoff`` through
    ``can_start_by``); a broker countdown/ETA message would run outside the
    scheduler and may be delivered more than once, so none is sent and the run
    is recorded as a failure."""


class UnknownScheduleError(DgsError, KeyError):
    """No schedule with that name is declared or stored."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown schedule"


class EmbeddedServerError(DgsError, RuntimeError):
    """The embedded Redis-compatible server could not be found, started or stopped."""


class UnknownRunError(DgsError, KeyError):
    """No run with that ``run_id`` is recorded in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown run"
