"""Initial schema: schedules, runs and the change counter.

Revision ID: 0001
Revises:
Create Date: 2026-05-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def _id_type() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: INTEGER PRIMARY KEY


def upgrade() -> None:
    counter = op.create_table(
        "dgs_counter",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("value", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(counter, [{"id": 1, "value": 0}])
    op.create_table(
        "dgs_schedules",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("task", sa.String(255), nullable=False),
        sa.Column("configuration", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("spec_format", sa.Integer(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("registered_at", _ts()),
        sa.Column("last_good_start_at", _ts()),
        sa.Column("last_good_end_at", _ts()),
        sa.Column("last_start_at", _ts()),
        sa.Column("last_end_at", _ts()),
        sa.Column("failure_count", sa.Integer()),
        sa.Column("average_good_duration_s", sa.Float()),
        sa.Column("current_token", sa.BigInteger()),
        sa.Column("run_requested_at", _ts()),
        sa.Column("change_seq", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", _ts(), nullable=False),
    )
    op.create_index("ix_dgs_schedules_change_seq", "dgs_schedules", ["change_seq"])
    op.create_table(
        "dgs_runs",
        sa.Column("id", _id_type(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(255), nullable=False, unique=True),
        sa.Column("schedule", sa.String(255), sa.ForeignKey("dgs_schedules.name"), nullable=False),
        sa.Column("dispatch_id", sa.String(255)),
        sa.Column("owner_node", sa.String(255)),
        sa.Column("owner_name", sa.String(255)),
        sa.Column("owner_tag", sa.String(255)),
        sa.Column("token", sa.BigInteger()),
        sa.Column("started_at", _ts(), nullable=False),
        sa.Column("ended_at", _ts()),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("duration_s", sa.Float()),
    )
    op.create_index("ix_dgs_runs_schedule", "dgs_runs", ["schedule"])
    op.create_index("ix_dgs_runs_schedule_started_at", "dgs_runs", ["schedule", "started_at"])
    op.create_index("ix_dgs_runs_ended_at", "dgs_runs", ["ended_at"])


def downgrade() -> None:
    op.drop_table("dgs_runs")
    op.drop_table("dgs_schedules")
    op.drop_table("dgs_counter")
