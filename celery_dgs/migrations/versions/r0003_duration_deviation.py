"""Schedules: the EWMA of run-time deviation, for should_start_by's margin.

``duration_deviation_s`` sits next to ``average_good_duration_s`` (seconds;
NULL: not known yet, read as zero until the next success records it).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dgs_schedules", sa.Column("duration_deviation_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("duration_deviation_s")
