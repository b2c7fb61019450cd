"""The run-history half of the SQL store: starts, ends, skips, progress, pruning."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, delete, exists, func, insert, select, update

from ..core.items import ItemCounts
from ..core.run_end import disabled_after, stats_after
from ..core.spec import ScheduleSpec
from ..core.stats import DEFAULT_EWMA_ALPHA, record_start
from ..errors import StaleTokenError, UnknownRunError, UnknownScheduleError
from .convert import apply_stats, run_record, stats_of, utc
from .engine import connection_transaction
from .models import RunRow, ScheduleFields, ScheduleRow
from .records import RunRecord, StoredSchedule
from .run_rules import (
    check_eventful,
    check_items,
    check_run_end,
    end_fenced,
    fenced_end_error,
    run_duration_s,
    stale_start,
)
from .sql_base import SqlStoreBase, next_seq
from .sql_check_rows import apply_check_end
from .sql_row_edit import RowEdit

_RUNS = cast(Table, RunRow.__table__)
_SCHEDULES = cast(Table, ScheduleRow.__table__)
_RUN_EXISTS = select(exists().where(_RUNS.c.run_id == bindparam("run_id")))
_INSERT_RUN = insert(_RUNS)
#: What a run's end reads of its row, which it locks.
_RUN_TO_END = (
    select(_RUNS.c.schedule, _RUNS.c.outcome, _RUNS.c.fenced, _RUNS.c.token, _RUNS.c.started_at)
    .where(_RUNS.c.run_id == bindparam("run_id"))
    .with_for_update()
)
#: A run's end: the columns set are the keys of the parameters given.
_END_RUN = update(_RUNS).where(_RUNS.c.run_id == bindparam("b_run_id"))
_TOKEN_FLOOR = select(_SCHEDULES.c.current_token).where(_SCHEDULES.c.name == bindparam("name"))
#: Runs whose schedules :data:`_GRANTED_TOKENS` looks at, per schedule wanted.
RUNS_PER_PROBE = 20


#: The schedules of the latest runs (the last entries of the runs' primary
#: key) with their tokens: a few rows read, whatever the fleet's size.
def _granted_tokens(started_before: bool) -> Any:
    """The schedules of the latest runs (started before ``:before`` if
    ``started_before``) with their current tokens."""
    latest = select(_RUNS.c.schedule).order_by(_RUNS.c.id.desc()).limit(bindparam("runs"))
    if started_before:
        latest = latest.where(_RUNS.c.started_at < bindparam("before"))
    return (
        select(_SCHEDULES.c.name, _SCHEDULES.c.current_token)
        .where(_SCHEDULES.c.name.in_(latest), _SCHEDULES.c.current_token > 0)
        .limit(bindparam("limit"))
    )


_GRANTED_TOKENS = _granted_tokens(started_before=False)
_GRANTED_TOKENS_BEFORE = _granted_tokens(started_before=True)


def _run_exists(conn: Connection, run_id: str) -> bool:
    return bool(conn.execute(_RUN_EXISTS, {"run_id": run_id}).scalar())


def _end_values(
    started_at: datetime,
    outcome: str,
    ended_at: datetime,
    error: str | None,
    progress: float | None,
    duration_s: float | None,
    items: ItemCounts | None,
) -> dict[str, Any]:
    """The columns a run's end writes on its row (``fenced`` is the caller's;
    ``progress`` and the item counts only when given)."""
    values: dict[str, Any] = {
        "outcome": outcome,
        "ended_at": ended_at,
        "error": error,
        "duration_s": run_duration_s(started_at, ended_at, duration_s),
    }
    if progress is not None:
        values["progress"] = progress
    if items is not None:
        values["items_ok"], values["items_failed"] = items.ok, items.failed
    return values


class RunMethods(SqlStoreBase):
    """Run history methods of :class:`~celery_dgs.store.sql.SqlScheduleStore`."""

    def record_run_start(
        self,
        *,
        schedule: str,
        run_id: str,
        dispatch_id: str | None,
        owner_node: str,
        owner_name: str,
        owner_tag: str,
        token: int,
        started_at: datetime,
    ) -> None:
        """One transaction: insert the run (outcome ``running``), set the schedule's
        ``last_start_at`` and make ``token`` its ``current_token``. A ``run_id``
        already recorded is a no-op. ``UnknownScheduleError`` if the schedule is
        not stored.

        Durable token floor: ``current_token`` only ever goes up. A token not
        above it (a lease granted by a Redis that lost its counter, racing a
        grant already recorded here) is refused: the run is stored as
        ``skipped`` with ``fenced`` set and the reason in ``error``, that is
        committed, and :class:`~celery_dgs.errors.StaleTokenError` is raised, so
        the caller never starts the task body with a repeated or lower token.
        """
        started_at = utc(started_at, "started_at")
        with connection_transaction(self._engine, write=True) as conn:
            edit = RowEdit(conn, schedule)
            row = edit.row
            if _run_exists(conn, run_id):
                return
            run: dict[str, Any] = {
                "run_id": run_id,
                "schedule": schedule,
                "dispatch_id": dispatch_id,
                "owner_node": owner_node,
                "owner_name": owner_name,
                "owner_tag": owner_tag,
                "token": token,
                "started_at": started_at,
                "outcome": "running",
                "fenced": False,
            }
            stale = stale_start(schedule, token, row.current_token)
            if stale is not None:
                run.update(outcome="skipped", error=stale, fenced=True)
                run.update(ended_at=started_at, duration_s=0.0)
            conn.execute(_INSERT_RUN, run)
            if stale is None:
                apply_stats(row, record_start(stats_of(row), started_at))
                row.current_token = token
                edit.touch(next_seq(conn), self._clock.now())
                edit.write(self.retry_ladder)
        if stale is not None:
            raise StaleTokenError(stale)

    def record_run_end(
        self,
        *,
        run_id: str,
        outcome: str,
        ended_at: datetime,
        error: str | None = None,
        progress: float | None = None,
        alpha: float = DEFAULT_EWMA_ALPHA,
        duration_s: float | None = None,
        eventful: bool | None = None,
        verdict: object = None,
        items: ItemCounts | None = None,
    ) -> StoredSchedule:
        """One transaction: record how the run ended and update the schedule's stats
        (an adaptive schedule's ladder and ``disabled_reason`` too, with ``eventful``;
        a deferred check's next time or its end, with ``verdict``).

        ``duration_s``: the run's duration as its worker measured it on a
        monotonic clock; ``None``: ``ended_at - started_at``.

        ``outcome``: success (``record_success``, EWMA with ``alpha``); failure,
        terminated, lost (``record_failure``); stolen, cancelled, yielded
        (``record_interruption``). Returns the schedule as stored afterwards.

        Fencing: the stats are written only if the run's token is still the
        schedule's ``current_token``. Otherwise the run row still gets its
        outcome (marked ``fenced``), that is committed, and then
        :class:`~celery_dgs.errors.StaleTokenError` is raised.

        Idempotent: a run that already ended is left as it is; the call returns
        the stored schedule, or raises ``StaleTokenError`` again if that run was
        fenced. ``UnknownRunError`` if ``run_id`` was never recorded.
        """
        check_run_end(outcome, progress, duration_s)
        check_eventful(eventful)
        items = check_items(items)
        ended_at = utc(ended_at, "ended_at")
        with connection_transaction(self._engine, write=True) as conn:
            run = conn.execute(_RUN_TO_END, {"run_id": run_id}).one_or_none()
            if run is None:
                raise UnknownRunError(f"no run {run_id!r} in the store")
            edit = RowEdit(conn, run.schedule)
            row = edit.row
            fenced = bool(run.fenced)
            if run.outcome == "running":
                end = _end_values(
                    run.started_at, outcome, ended_at, error, progress, duration_s, items
                )
                fenced = end["fenced"] = end_fenced(run.token, row.current_token)
                conn.execute(_END_RUN, {"b_run_id": run_id, **end})
                if not fenced:
                    spec = self._adaptive_spec(row)
                    new = stats_after(
                        stats_of(row),
                        outcome,
                        run.started_at,
                        ended_at,
                        alpha,
                        timedelta(seconds=end["duration_s"]),
                        spec=spec,
                        eventful=eventful,
                        run_key=run.token or 0,
                        items=items,
                    )
                    apply_stats(row, new)
                    row.disabled_reason = disabled_after(spec, outcome, new, row.disabled_reason)
                    if row.kind == "check":
                        apply_check_end(
                            conn, row, new, outcome, verdict, ended_at, error, run.started_at
                        )
                    edit.touch(next_seq(conn), self._clock.now())
                    edit.write(self.retry_ladder)
            result = self._stored(row)
        if fenced:
            raise StaleTokenError(
                fenced_end_error(run_id, result.name, run.token, result.current_token)
            )
        return result

    def _adaptive_spec(self, row: ScheduleFields) -> ScheduleSpec | None:
        """An adaptive schedule's spec (its run's end moves its ladder); ``None``
        for the other kinds."""
        if row.kind != "adaptive":
            return None
        return self._spec_cache.parse(row.spec, row.task, row.configuration)[0]

    def record_skip(
        self,
        *,
        schedule: str,
        run_id: str,
        dispatch_id: str | None,
        owner_node: str,
        owner_name: str,
        reason: str,
        at: datetime,
    ) -> None:
        """Record a dispatch that did not run (outcome ``skipped``, ``reason`` in
        ``error``); the schedule's row is not touched. A ``run_id`` already
        recorded is a no-op. ``UnknownScheduleError`` if the schedule is not stored.
        """
        at = utc(at, "at")
        with self._write() as session:
            if session.get(ScheduleRow, schedule) is None:
                raise UnknownScheduleError(f"no schedule named {schedule!r} in the store")
            conn = session.connection()
            if _run_exists(conn, run_id):
                return
            run = {
                "run_id": run_id,
                "schedule": schedule,
                "dispatch_id": dispatch_id,
                "owner_node": owner_node,
                "owner_name": owner_name,
                "started_at": at,
                "ended_at": at,
                "outcome": "skipped",
                "error": reason,
                "duration_s": 0.0,
                "fenced": False,
            }
            conn.execute(_INSERT_RUN, run)

    def token_floor(self, schedule: str) -> int:
        """The highest fencing token recorded for ``schedule`` (0: none yet).

        The lease backend is asked for a token above it, so a token never
        repeats or goes down even after Redis lost its counter.
        ``UnknownScheduleError`` if the schedule is not stored."""
        with connection_transaction(self._engine, write=False) as conn:
            found = conn.execute(_TOKEN_FLOOR, {"name": schedule}).one_or_none()
        if found is None:
            raise UnknownScheduleError(f"no schedule named {schedule!r} in the store")
        return int(found[0] or 0)

    def granted_tokens(
        self, limit: int, *, started_before: datetime | None = None
    ) -> dict[str, int]:
        """Up to ``limit`` of the schedules the latest runs (at most
        :data:`RUNS_PER_PROBE` per schedule wanted; started before
        ``started_before`` if given) are of, with their tokens: an index read
        of a few rows however large the fleet, and however few of it ever
        ran (a token is recorded with a run's start; none when the run
        history holds no run). With ``started_before``, the runs since are
        read past too: a few seconds' worth when it is a Redis restart's."""
        params: dict[str, Any] = {"limit": limit, "runs": limit * RUNS_PER_PROBE}
        statement = _GRANTED_TOKENS
        if started_before is not None:
            params["before"] = utc(started_before, "started_before")
            statement = _GRANTED_TOKENS_BEFORE
        with connection_transaction(self._engine, write=False) as conn:
            rows = conn.execute(statement, params)
            return {str(name): int(token) for name, token in rows}

    def runs(self, name: str, limit: int = 50) -> list[RunRecord]:
        """The schedule's latest ``limit`` runs (skips included), newest first.

        ``UnknownScheduleError`` if the schedule is not stored.
        """
        stmt = (
            select(RunRow)
            .where(RunRow.schedule == name)
            .order_by(RunRow.started_at.desc(), RunRow.id.desc())
            .limit(limit)
        )
        with self._read() as session:
            found = [run_record(r) for r in session.scalars(stmt)]
            if not found and session.get(ScheduleRow, name) is None:
                raise UnknownScheduleError(f"no schedule named {name!r} in the store")
            return found

    def running_runs(self) -> list[RunRecord]:
        """Every run still marked ``running``, oldest first."""
        stmt = select(RunRow).where(RunRow.outcome == "running")
        with self._read() as session:
            rows = session.scalars(stmt.order_by(RunRow.started_at, RunRow.id))
            return [run_record(r) for r in rows]

    def running_runs_page(self, *, after_id: int, limit: int) -> list[RunRecord]:
        """At most ``limit`` ``running`` runs with ``id > after_id``, by ``id``
        (``ix_dgs_runs_outcome`` finds them; only live or leaked runs are running)."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit!r}")
        stmt = (
            select(RunRow)
            .where(RunRow.outcome == "running", RunRow.id > after_id)
            .order_by(RunRow.id)
            .limit(limit)
        )
        with self._read() as session:
            return [run_record(r) for r in session.scalars(stmt)]

    def outcome_counts(self) -> dict[str, int]:
        """How many stored runs ended (or are) in each outcome."""
        stmt = select(RunRow.outcome, func.count()).group_by(RunRow.outcome)
        with self._read() as session:
            return {str(outcome): int(count) for outcome, count in session.execute(stmt)}

    def prune_runs(self, older_than: datetime, batch_size: int = 1000) -> int:
        """Delete finished runs that ended before ``older_than``, ``batch_size`` rows
        per transaction (so a large backlog never holds locks for long). Running
        runs are never deleted. Returns how many were deleted."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        older_than = utc(older_than, "older_than")
        pick = (
            select(RunRow.id)
            .where(RunRow.ended_at < older_than, RunRow.outcome != "running")
            .order_by(RunRow.ended_at, RunRow.id)
            .limit(batch_size)
        )
        total = 0
        while True:
            with self._write() as session:
                ids = list(session.scalars(pick))
                if ids:
                    session.execute(
                        delete(RunRow)
                        .where(RunRow.id.in_(ids))
                        .execution_options(synchronize_session=False)
                    )
            total += len(ids)
            if len(ids) < batch_size:
                return total
