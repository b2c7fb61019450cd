"""Runs: reported progress, the fenced flag, and an index to find running runs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-05-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dgs_runs", sa.Column("progress", sa.Float(), nullable=True))
    op.add_column(
        "dgs_runs",
        sa.Column("fenced", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_dgs_runs_outcome", "dgs_runs", ["outcome"])


def downgrade() -> None:
    op.drop_index("ix_dgs_runs_outcome", table_name="dgs_runs")
    with op.batch_alter_table("dgs_runs") as batch:
        batch.drop_column("fenced")
        batch.drop_column("progress")
