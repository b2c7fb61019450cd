"""Schedules: who owns each row, ``sync`` (declared) or the runtime API.

``owner`` is ``'declared'`` (code or ``dgs_schedules``; ``sync`` inserts,
updates and deactivates it) or ``'runtime'`` (``dgs.schedules`` and the
``celery dgs add/remove/import`` commands; ``sync`` never touches it). Every
row stored before this revision was written by ``sync``: ``'declared'``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "dgs_schedules",
        sa.Column("owner", sa.String(16), nullable=False, server_default="declared"),
    )


def downgrade() -> None:
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("owner")
