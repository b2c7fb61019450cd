"""Schedules: beat's window of schedules in its order; names by prefix on PostgreSQL.

``ix_dgs_schedules_window``: the active schedules by kept ``should_start_by``,
``next_can_start_at``, name, the order beat's window of schedules reads them
in (``window_schedules``): a slice is the first rows of a range of it, not a
sort of every row that can start within the window.

``ix_dgs_schedules_name_pattern``: ``status PATTERN`` selects names with
``LIKE 'prefix%'``; PostgreSQL reads a range of an index for it only with
``text_pattern_ops`` (or a ``C`` collation), so a prefix read every name of
the fleet. This index holds the active schedules' names in that operator
class. On SQLite, where a prefix is a ``GLOB`` range of the primary key, its
predicate is false: it holds no row.

Revision ID: 0011_window_indexes
Revises: 0010_kept_times
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_window_indexes"
down_revision: str | None = "0010_kept_times"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ACTIVE_SCHEDULE = sa.text("kind <> 'check' AND active")


def upgrade() -> None:
    op.create_index(
        "ix_dgs_schedules_window",
        "dgs_schedules",
        ["should_start_by", "next_can_start_at", "name"],
        postgresql_where=_ACTIVE_SCHEDULE,
        sqlite_where=_ACTIVE_SCHEDULE,
    )
    op.create_index(
        "ix_dgs_schedules_name_pattern",
        "dgs_schedules",
        ["name"],
        postgresql_ops={"name": "text_pattern_ops"},
        postgresql_where=_ACTIVE_SCHEDULE,
        sqlite_where=sa.false(),
    )


def downgrade() -> None:
    op.drop_index("ix_dgs_schedules_name_pattern", table_name="dgs_schedules")
    op.drop_index("ix_dgs_schedules_window", table_name="dgs_schedules")
