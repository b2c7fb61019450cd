"""Schedules: the kept margin bucket, and beat's window by margin bucket.

``margin_bucket``: the bucket (``celery_dgs.core.laxity.margin_bucket``) of
each row's kept margin, ``error_at - should_start_by``; NULL when either is
NULL. Every write of the kept columns keeps it; existing rows are filled in
here, a batch of names at a time (computed in Python: SQLite has no ``ln``).

``ix_dgs_schedules_margin_window``: the active schedules by
``margin_bucket``, kept ``error_at``, ``next_can_start_at``, name: beat's
window reads one margin bucket's slice as a range of it
(``window_schedules(bucket=...)``), and the buckets in use by a skip scan of
it (``window_margin_buckets``).

Revision ID: 0016_margin_bucket
Revises: 0015_kept_settings
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_margin_bucket"
down_revision: str | None = "0015_kept_settings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ACTIVE_SCHEDULE = sa.text("kind <> 'check' AND active")
#: Rows per batch of the backfill.
_BATCH = 5_000


def _backfill(conn: sa.Connection) -> None:
    """``margin_bucket`` of every row with both kept times, by name."""
    from celery_dgs.store.kept import margin_bucket_of
    from celery_dgs.store.models import UTCDateTime

    rows = sa.table(
        "dgs_schedules",
        sa.column("name", sa.String()),
        sa.column("should_start_by", UTCDateTime()),
        sa.column("error_at", UTCDateTime()),
        sa.column("margin_bucket", sa.Integer()),
    )
    read = (
        sa.select(rows.c.name, rows.c.should_start_by, rows.c.error_at)
        .where(
            rows.c.should_start_by.is_not(None),
            rows.c.error_at.is_not(None),
            rows.c.name > sa.bindparam("after"),
        )
        .order_by(rows.c.name)
        .limit(_BATCH)
    )
    write = (
        sa.update(rows)
        .where(rows.c.name == sa.bindparam("b_name"))
        .values(margin_bucket=sa.bindparam("b_bucket"))
    )
    after = ""
    while found := conn.execute(read, {"after": after}).all():
        conn.execute(
            write,
            [
                {"b_name": name, "b_bucket": margin_bucket_of(should, error_at)}
                for name, should, error_at in found
            ],
        )
        after = found[-1][0]


def upgrade() -> None:
    op.add_column("dgs_schedules", sa.Column("margin_bucket", sa.Integer()))
    _backfill(op.get_bind())
    op.create_index(
        "ix_dgs_schedules_margin_window",
        "dgs_schedules",
        ["margin_bucket", "error_at", "next_can_start_at", "name"],
        postgresql_where=_ACTIVE_SCHEDULE,
        sqlite_where=_ACTIVE_SCHEDULE,
    )


def downgrade() -> None:
    op.drop_index("ix_dgs_schedules_margin_window", table_name="dgs_schedules")
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("margin_bucket")
