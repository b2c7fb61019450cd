"""``celery dgs schema``: the store's schema revision and the migrations an
upgrade would apply, read without applying them; ``--upgrade`` applies them.
A real SQLite file, left at an older revision as an older celery-dgs left it."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from celery_dgs.store.migrate import VERSION_TABLE, head_revision, upgrade_url
from tests.cli.conftest import World, make_app

OLD = "0012_failing_index"


def test_schema_shows_the_pending_migrations_and_upgrade_applies_them(
    world: World, tmp_path: Path, redis_url: str
) -> None:
    url = f"sqlite:///{tmp_path / 'older.sqlite3'}"
    upgrade_url(url, OLD)
    older = World(
        app=make_app(url, redis_url), store=world.store, leases=world.leases, runner=world.runner
    )
    shown = older.invoke("schema")
    assert shown.exit_code == 1, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0] == f"the schedule store at {url}: schema revision {OLD}"
    assert lines[1].startswith("7 migration(s) to apply: 0013_ended_checks_index, ")
    assert lines[1].endswith(f", {head_revision()}")
    assert "celery dgs schema --upgrade" in lines[2]
    engine = sa.create_engine(url)
    read = sa.text(f"SELECT version_num FROM {VERSION_TABLE}")
    with engine.connect() as conn:
        assert conn.execute(read).scalar_one() == OLD, "shown, not applied"

    dry = older.invoke("sync", "--dry-run")  # writes nothing: not even the upgrade
    assert dry.exit_code == 1, dry.output
    assert (
        f"dry run: the store's schema is at revision {OLD} and 7 migration(s) would be "
        "applied first; a dry run applies none (celery dgs schema shows them)"
    ) in " ".join(dry.output.split())
    with engine.connect() as conn:
        assert conn.execute(read).scalar_one() == OLD

    upgraded = older.invoke("schema", "--upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    assert upgraded.stdout.splitlines()[-1] == (
        f"upgraded the schema from revision {OLD} to {head_revision()}"
    )
    again = older.invoke("schema")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1] == (
        f"up to date: this celery-dgs's newest revision is {head_revision()}"
    )

    with engine.begin() as conn:  # a newer celery-dgs upgraded it since
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '0099_future'"))
    engine.dispose()
    newer = older.invoke("schema")
    assert newer.exit_code == 4, newer.output
    assert "has schema revision '0099_future', which this celery-dgs does not know" in " ".join(
        newer.output.split()
    )
