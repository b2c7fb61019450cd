"""The condition tally: the fleet's counts by condition kept as rows change.

``dgs_condition_tally`` and ``dgs_condition_deltas``, the triggers on
``dgs_schedules`` that append a changed row's steps to the deltas, and the
tally filled from every row (one grouped ``INSERT``): see
:mod:`celery_dgs.store.condition_tally`.

Revision ID: 0017_condition_tally
Revises: 0016_margin_bucket
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_condition_tally"
down_revision: str | None = "0016_margin_bucket"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    from celery_dgs.store import condition_tally

    op.create_table(
        "dgs_condition_tally",
        sa.Column("at", sa.BigInteger(), primary_key=True),
        sa.Column("level", sa.Integer(), primary_key=True),
        sa.Column("reason", sa.String(32), primary_key=True),
        sa.Column("n", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "dgs_condition_deltas",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
    )
    conn = op.get_bind()
    condition_tally.create_triggers(conn)
    condition_tally.rebuild(conn)


def downgrade() -> None:
    from celery_dgs.store import condition_tally

    condition_tally.drop_triggers(op.get_bind())
    op.drop_table("dgs_condition_deltas")
    op.drop_table("dgs_condition_tally")
