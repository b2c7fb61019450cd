"""Kept settings: the retry settings the kept start times were written with.

``dgs_kept_settings`` (``key``, ``value`` JSON) holds, under
``retry_ladder``, the ``dgs_retry_backoff`` steps and the
``dgs_retry_duration_fraction`` the kept ``next_can_start_at`` of the
failing schedules waits. Beat compares it with its settings at start and
rewrites those rows when they differ (``celery_dgs.store.sql_kept_ladder``);
a store without the row (every store upgraded here) is rewritten at beat's
next start.

Revision ID: 0015_kept_settings
Revises: 0014_filter_indexes
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_kept_settings"
down_revision: str | None = "0014_filter_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dgs_kept_settings",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("dgs_kept_settings")
