"""SQLAlchemy 2 typed declarative models of the store's tables.

The schema itself is created and changed only by the alembic migrations in
``celery_dgs/migrations``; these models describe the head revision and are what
the store queries with. Every table name starts with ``dgs_`` so the tables can
share a database with the application's own.
"""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from ..core.condition import Reason

#: The single row of ``dgs_counter`` (see :class:`CounterRow`).
COUNTER_ID = 1


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on every backend.

    Naive datetimes are refused on the way in. SQLite stores naive UTC text, so
    values read back are marked UTC; PostgreSQL's ``timestamptz`` values are
    converted to UTC whatever the session time zone.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r} cannot be stored; use an aware UTC one")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return utc_from_db(value)


def utc_from_db(value: Any) -> datetime | None:
    """A ``UTCDateTime`` column's raw driver value (SQLite: naive UTC text;
    PostgreSQL: an aware datetime) as an aware UTC datetime."""
    if value is None:
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


class Base(DeclarativeBase):
    pass


class CounterRow(Base):
    """One row whose ``value`` is the last ``change_seq`` handed out.

    Writers bump it with ``UPDATE ... RETURNING`` in the same transaction as
    their schedule change; the row lock makes commits happen in ``change_seq``
    order, which is what lets :meth:`changes_since` never miss a change.
    """

    __tablename__ = "dgs_counter"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)


class KeptSettingRow(Base):
    """A setting the kept columns of ``dgs_schedules`` were written with, as
    JSON: ``retry_ladder`` (:mod:`celery_dgs.store.kept_ladder`); and the
    store's identity, ``store_id`` (:mod:`celery_dgs.store.sql_identity`)."""

    __tablename__ = "dgs_kept_settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text, nullable=False)


class ConditionTallyRow(Base):
    """How many active schedules enter (``n`` > 0) or leave a condition
    (``level``, ``reason``) in the bucket of moments starting at ``at``
    (seconds since the epoch; 0: from the start of time): the condition
    tally (:mod:`celery_dgs.store.condition_tally`)."""

    __tablename__ = "dgs_condition_tally"

    at: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    reason: Mapped[str] = mapped_column(String(32), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, nullable=False)


class ConditionDeltaRow(Base):
    """Steps of the schedules changed since the last fold, as the triggers on
    ``dgs_schedules`` append them (:mod:`celery_dgs.store.condition_tally`)."""

    __tablename__ = "dgs_condition_deltas"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[int] = mapped_column(BigInteger, nullable=False)
    level: Mapped[int] = mapped_column(Integer, nullable=False)
    reason: Mapped[str] = mapped_column(String(32), nullable=False)
    n: Mapped[int] = mapped_column(BigInteger, nullable=False)


class ScheduleRow(Base):
    """A schedule (declared or runtime): its spec (JSON), operator flags and run statistics."""

    __tablename__ = "dgs_schedules"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    task: Mapped[str] = mapped_column(String(255), nullable=False)
    configuration: Mapped[str] = mapped_column(String(255), nullable=False, default="")
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    spec: Mapped[str] = mapped_column(Text, nullable=False)
    spec_format: Mapped[int] = mapped_column(Integer, nullable=False)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    paused: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    registered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_good_start_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_good_end_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_start_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_end_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    failure_count: Mapped[int | None] = mapped_column(Integer)
    average_good_duration_s: Mapped[float | None] = mapped_column(Float)
    duration_deviation_s: Mapped[float | None] = mapped_column(Float)
    current_token: Mapped[int | None] = mapped_column(BigInteger)
    run_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: The class the pending run request is served in (NULL: 0, the default).
    run_requested_priority: Mapped[int | None] = mapped_column(Integer)
    change_seq: Mapped[int] = mapped_column(BigInteger, nullable=False, index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    #: Why the schedule's declaration is invalid (``spec`` is then the last
    #: valid one, still served); NULL while it is valid.
    declaration_error: Mapped[str | None] = mapped_column(Text)
    #: ``'declared'`` (``sync`` owns the row) or ``'runtime'`` (the runtime API does).
    owner: Mapped[str] = mapped_column(
        String(16), nullable=False, default="declared", server_default="declared"
    )
    #: Adaptive schedules: the interval ladder's index, the next freshness
    #: target, the source's last change as its lister reported it, and why the
    #: schedule is disabled (NULL: enabled). ``celery_dgs.core.adaptive``.
    interval_index: Mapped[int | None] = mapped_column(Integer)
    next_target_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    upstream_modified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    #: Deferred checks (kind ``check``; ``celery_dgs.core.checks``): the first
    #: check's time (never changes), how many checks ran, and the earliest
    #: ``next_target_at`` (their next check time) the row has had, which lets
    #: beat's change poll skip checks that were never due within its window.
    first_check_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    check_count: Mapped[int | None] = mapped_column(Integer)
    earliest_check_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: The item counts of the last good or partially failed run
    #: (``celery_dgs.core.items``; NULL: none).
    last_items_ok: Mapped[int | None] = mapped_column(Integer)
    last_items_failed: Mapped[int | None] = mapped_column(Integer)
    #: Kept by every write that changes what they depend on
    #: (``celery_dgs.core.kept_condition``): when the schedule can next start
    #: and should start by, its condition while no moment has passed
    #: (``kept_level``: 0 OK, 1 WARNING, 2 ERROR, and its reason), the moments
    #: after which it is WARNING and ERROR with their reasons, and its spec's
    #: pool (NULL: the default queue); the margin bucket of ``error_at -
    #: should_start_by`` (``celery_dgs.core.laxity.margin_bucket``; NULL when
    #: either is NULL), by which beat's window reads a slice per bucket.
    next_can_start_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    should_start_by: Mapped[datetime | None] = mapped_column(UTCDateTime)
    kept_level: Mapped[int | None] = mapped_column(Integer)
    kept_reason: Mapped[str | None] = mapped_column(String(32))
    warning_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    warning_reason: Mapped[str | None] = mapped_column(String(32))
    error_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    error_reason: Mapped[str | None] = mapped_column(String(32))
    pool: Mapped[str | None] = mapped_column(String(255))
    margin_bucket: Mapped[int | None] = mapped_column(Integer)


class ScheduleValues(SimpleNamespace):
    """One schedule row's values as plain attributes named as
    :class:`ScheduleRow`'s columns, read by a Core statement and changed in
    place (:mod:`.sql_row_edit`), without the ORM's instrumentation."""


#: A schedule row, mapped or as plain values: what the row helpers read and change.
ScheduleFields = ScheduleRow | ScheduleValues

_WARNING_COLUMNS = ("warning_at", "error_at", "kept_level", "warning_reason")

#: The schedules (not checks) by kept time: beat's window reads the next
#: starts; ``status`` counts each condition from the index covering it and
#: pages each condition in its order (:mod:`celery_dgs.store.sql_status`).
_ACTIVE_SCHEDULE = (ScheduleRow.kind != "check") & ScheduleRow.active
for _name, _columns in {
    "ix_dgs_schedules_can_start": ("next_can_start_at",),
    "ix_dgs_schedules_kept_level": ("kept_level", "kept_reason", "error_at", "warning_at"),
    "ix_dgs_schedules_error_at": ("error_at", "kept_level", "error_reason"),
    "ix_dgs_schedules_warning_at": _WARNING_COLUMNS,
    "ix_dgs_schedules_should_start": (
        "should_start_by",
        "name",
        "kept_level",
        "error_at",
        "warning_at",
    ),
    # beat's window of schedules reads slices in this order (window_schedules)
    "ix_dgs_schedules_window": ("should_start_by", "next_can_start_at", "name"),
    # and one margin bucket's slice in this one; the distinct buckets by a skip scan
    "ix_dgs_schedules_margin_window": ("margin_bucket", "error_at", "next_can_start_at", "name"),
}.items():
    Index(
        _name,
        *(getattr(ScheduleRow, c) for c in _columns),
        postgresql_where=_ACTIVE_SCHEDULE,
        sqlite_where=_ACTIVE_SCHEDULE,
    )


#: The same indexes with the pool (NULL: a spec without one), and with the
#: task, leading: a filter by pool or by task reads each condition's parts
#: within its values; the task ones also give the distinct task names.
for _key in ("pool", "task"):
    for _part, _columns in {
        "kept_level": ("kept_level", "kept_reason", "error_at", "warning_at"),
        "error_at": ("error_at", "kept_level", "error_reason"),
        "warning_at": _WARNING_COLUMNS,
        "should_start": ("should_start_by", "name", "kept_level", "error_at", "warning_at"),
    }.items():
        Index(
            f"ix_dgs_schedules_{_key}_{_part}",
            *(getattr(ScheduleRow, c) for c in (_key, *_columns)),
            postgresql_where=_ACTIVE_SCHEDULE,
            sqlite_where=_ACTIVE_SCHEDULE,
        )


#: The schedules whose warning comes from a run in progress (not
#: ``likely_late``: few rows, the runs in progress) by ``warning_at``, over
#: the fleet and with the pool, and the task, leading: a run's warning may
#: have begun at any time, where an idle schedule's is read from
#: ``ix_dgs_schedules_warning_at`` within the largest margin of ``now``.
_RUNNING_WARNING = _ACTIVE_SCHEDULE & (ScheduleRow.warning_reason != Reason.LIKELY_LATE.value)


#: The schedules in WARNING while no moment passed (``kept_level = 1``: the
#: last run failed) by ``should_start_by``, over the fleet and with the
#: pool, and the task, leading: a page of them is read in its order and
#: stops there, however many there are (their count from the same entries).
_KEPT_WARNING = _ACTIVE_SCHEDULE & (ScheduleRow.kept_level == 1)
_KEPT_WARNING_COLUMNS = ("should_start_by", "name", "error_at", "warning_at", "kept_reason")
for _part, _columns, _where in (
    ("running_warning", _WARNING_COLUMNS, _RUNNING_WARNING),
    ("kept_warning", _KEPT_WARNING_COLUMNS, _KEPT_WARNING),
):
    for _leading in ((), ("pool",), ("task",)):
        Index(
            "_".join(("ix_dgs_schedules", *_leading, _part)),
            *(getattr(ScheduleRow, c) for c in _leading + _columns),
            postgresql_where=_where,
            sqlite_where=_where,
        )


#: The failing schedules by their last end: the status page lists those most
#: recently ended (``failing_schedules``).
Index(
    "ix_dgs_schedules_failing",
    ScheduleRow.last_end_at,
    ScheduleRow.name,
    postgresql_where=_ACTIVE_SCHEDULE & (ScheduleRow.failure_count > 0),
    sqlite_where=_ACTIVE_SCHEDULE & (ScheduleRow.failure_count > 0),
)


#: The ended deferred checks (kept inactive beside their history) by their
#: last write: beat's prune deletes those past the retention (``prune_checks``).
Index(
    "ix_dgs_schedules_checks_ended",
    ScheduleRow.updated_at,
    ScheduleRow.name,
    postgresql_where=(ScheduleRow.kind == "check") & ~ScheduleRow.active,
    sqlite_where=(ScheduleRow.kind == "check") & ~ScheduleRow.active,
)


#: The active schedules' names for a prefix on PostgreSQL (``status PATTERN``):
#: ``LIKE 'prefix%'`` reads a range of it whatever the database's collation.
#: On SQLite, where ``GLOB`` reads a range of the primary key, its predicate is
#: false: it holds no row.
Index(
    "ix_dgs_schedules_name_pattern",
    ScheduleRow.name,
    postgresql_ops={"name": "text_pattern_ops"},
    postgresql_where=_ACTIVE_SCHEDULE,
    sqlite_where=false(),
)


#: The pending checks by time: beat reads its window of due checks with it.
Index(
    "ix_dgs_schedules_check_due",
    ScheduleRow.next_target_at,
    ScheduleRow.name,
    postgresql_where=(ScheduleRow.kind == "check") & ScheduleRow.active,
    sqlite_where=(ScheduleRow.kind == "check") & ScheduleRow.active,
)


#: The rows that are not checks, by name: list_schedules reads them with it.
Index(
    "ix_dgs_schedules_schedule_names",
    ScheduleRow.name,
    postgresql_where=ScheduleRow.kind != "check",
    sqlite_where=ScheduleRow.kind != "check",
)


class CheckHistoryRow(Base):
    """A deferred check that ended: its counts, times and how it ended."""

    __tablename__ = "dgs_check_history"
    __table_args__ = (
        Index("ix_dgs_check_history_name", "name", "ended_at"),
        Index("ix_dgs_check_history_ended_at", "ended_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    task: Mapped[str] = mapped_column(String(255), nullable=False)
    key: Mapped[str] = mapped_column(String(255), nullable=False)
    outcome: Mapped[str] = mapped_column(String(32), nullable=False)
    reason: Mapped[str | None] = mapped_column(Text)
    check_count: Mapped[int] = mapped_column(Integer, nullable=False)
    failure_count: Mapped[int] = mapped_column(Integer, nullable=False)
    added_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    first_check_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_check_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)


class RunRow(Base):
    """One run (or skipped dispatch) of a schedule: the history operators read."""

    __tablename__ = "dgs_runs"
    __table_args__ = (
        Index("ix_dgs_runs_schedule_started_at", "schedule", "started_at"),
        Index("ix_dgs_runs_ended_at", "ended_at"),
        Index("ix_dgs_runs_outcome", "outcome"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(255), nullable=False, unique=True)
    schedule: Mapped[str] = mapped_column(
        String(255), ForeignKey("dgs_schedules.name"), nullable=False, index=True
    )
    dispatch_id: Mapped[str | None] = mapped_column(String(255))
    owner_node: Mapped[str | None] = mapped_column(String(255))
    owner_name: Mapped[str | None] = mapped_column(String(255))
    owner_tag: Mapped[str | None] = mapped_column(String(255))
    token: Mapped[int | None] = mapped_column(BigInteger)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    error: Mapped[str | None] = mapped_column(Text)
    duration_s: Mapped[float | None] = mapped_column(Float)
    progress: Mapped[float | None] = mapped_column(Float)
    fenced: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default=false()
    )
    #: The item counts the run reported (``celery_dgs.report_items``; NULL: none).
    items_ok: Mapped[int | None] = mapped_column(Integer)
    items_failed: Mapped[int | None] = mapped_column(Integer)
