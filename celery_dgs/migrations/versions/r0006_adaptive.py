"""Schedules: the state of adaptive revisit intervals (seed 001).

``interval_index`` (the ladder's step), ``next_target_at`` (the freshness
target set by the last good run), ``upstream_modified_at`` (the source's
last change, from its lister) and ``disabled_reason`` (set after too many
consecutive failures; NULL: enabled). All NULL for every other schedule and
for every row stored before this revision.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dgs_schedules", sa.Column("interval_index", sa.Integer(), nullable=True))
    op.add_column(
        "dgs_schedules", sa.Column("next_target_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "dgs_schedules",
        sa.Column("upstream_modified_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.add_column("dgs_schedules", sa.Column("disabled_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("disabled_reason")
        batch.drop_column("upstream_modified_at")
        batch.drop_column("next_target_at")
        batch.drop_column("interval_index")
