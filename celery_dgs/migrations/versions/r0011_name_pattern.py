"""Schedules: names by prefix on PostgreSQL.

``status PATTERN`` selects names with ``LIKE 'prefix%'``; PostgreSQL reads a
range of an index for it only with ``text_pattern_ops`` (or a ``C``
collation), so a prefix read every name of the fleet. This index holds the
active schedules' names in that operator class. On SQLite, where a prefix is
a ``GLOB`` range of the primary key, its predicate is false: it holds no row.

Revision ID: 0011_name_pattern
Revises: 0010_kept_times
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_name_pattern"
down_revision: str | None = "0010_kept_times"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_dgs_schedules_name_pattern",
        "dgs_schedules",
        ["name"],
        postgresql_ops={"name": "text_pattern_ops"},
        postgresql_where=sa.text("kind <> 'check' AND active"),
        sqlite_where=sa.false(),
    )


def downgrade() -> None:
    op.drop_index("ix_dgs_schedules_name_pattern", table_name="dgs_schedules")
