"""Schedules: the failing ones by their last end, for the status page.

``ix_dgs_schedules_failing``: the active schedules (not deferred checks)
whose last runs failed (``failure_count > 0``), by ``last_end_at``. The
status page lists the failing schedules most recently ended
(``failing_schedules``); this partial index holds only those, so the list
is the last entries of a small index, not a pass over the fleet.

Revision ID: 0012_failing_index
Revises: 0011_window_indexes
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_failing_index"
down_revision: str | None = "0011_window_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FAILING = sa.text("kind <> 'check' AND active AND failure_count > 0")


def upgrade() -> None:
    op.create_index(
        "ix_dgs_schedules_failing",
        "dgs_schedules",
        ["last_end_at", "name"],
        postgresql_where=_FAILING,
        sqlite_where=_FAILING,
    )


def downgrade() -> None:
    op.drop_index("ix_dgs_schedules_failing", table_name="dgs_schedules")
