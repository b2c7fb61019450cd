"""Schedules: the run-time tail, for should_start_by's margin.

``duration_tail`` is a streaming estimate of the 99th percentile of a good
run's time over the average before it (a ratio; NULL: fewer than two good
runs recorded with it). The margin is at least the average times it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dgs_schedules", sa.Column("duration_tail", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("duration_tail")
