"""Schedules: why the declaration is invalid, while the last valid spec is served.

``declaration_error`` (text; NULL: the declaration is valid) is written by
``sync`` when a stored, active schedule's declaration no longer validates: the
row keeps its spec and stays active, and ``celery dgs status`` reports it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dgs_schedules", sa.Column("declaration_error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("declaration_error")
