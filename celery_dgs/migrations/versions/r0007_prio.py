"""Schedules: the priority class of a pending run request.

``run_requested_priority`` is the class beat serves an operator's ad-hoc run
in (``celery dgs run NAME --priority P``); NULL: the default (0, ahead of
every scheduled class). Cleared with ``run_requested_at``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dgs_schedules", sa.Column("run_requested_priority", sa.Integer()))


def downgrade() -> None:
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("run_requested_priority")
