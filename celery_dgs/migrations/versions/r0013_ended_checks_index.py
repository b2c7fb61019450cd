"""Schedules: the ended deferred checks by their last write, for pruning.

``ix_dgs_schedules_checks_ended``: the rows of deferred checks that ended
(``kind = 'check'``, not active), by ``updated_at``. Beat's hourly prune
(``prune_checks``) deletes those ended before the retention; with this
partial index it reads only them, not every row of the fleet.

Revision ID: 0013_ended_checks_index
Revises: 0012_failing_index
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_ended_checks_index"
down_revision: str | None = "0012_failing_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ENDED_CHECK = sa.text("kind = 'check' AND NOT active")


def upgrade() -> None:
    op.create_index(
        "ix_dgs_schedules_checks_ended",
        "dgs_schedules",
        ["updated_at", "name"],
        postgresql_where=_ENDED_CHECK,
        sqlite_where=_ENDED_CHECK,
    )


def downgrade() -> None:
    op.drop_index("ix_dgs_schedules_checks_ended", table_name="dgs_schedules")
