"""What a migration run writes to the log: one celery-dgs line when the schema
changed, none of alembic's INFO lines (a "setup plugin" line per plugin at its
first import, the dialect, each revision), which opened every beat and worker
log. In a fresh interpreter: alembic sets its plugins up once per process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.harness import ROOT

#: A revision older than the head (the schema of an earlier celery-dgs).
OLD = "0012_failing_index"

SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s %(message)s")
from celery_dgs.store.migrate import upgrade_url
upgrade_url(sys.argv[1])
print("--- again")
upgrade_url(sys.argv[1])
if len(sys.argv) > 2:
    logging.getLogger("alembic").setLevel(logging.INFO)
    print("--- alembic set to INFO by the application")
    upgrade_url(sys.argv[1])
"""


def run_script(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter (alembic sets its plugins up once per process)."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def migrate(tmp_path: Path, *extra: str) -> str:
    return run_script(SCRIPT, f"sqlite:///{tmp_path / 'dgs.sqlite3'}", *extra).stdout


def test_a_migration_logs_one_line_of_its_own_and_none_of_alembics(tmp_path: Path) -> None:
    first, again = migrate(tmp_path).split("--- again\n")
    assert "alembic" not in first + again, first + again
    [line] = first.splitlines()
    assert line.startswith("celery_dgs.store celery-dgs: created the store's schema at revision ")
    assert again == ""


OPEN_WITHOUT_LOGGING = """
import sys
from celery_dgs.store.migrate import upgrade_url
from celery_dgs.store.sql import SqlScheduleStore
upgrade_url(sys.argv[1], sys.argv[2])
print("--- opened by a process that configured no logging", file=sys.stderr)
SqlScheduleStore.open(sys.argv[1]).close()
"""


def test_an_upgrade_of_an_existing_schema_is_seen_without_any_logging_set_up(
    tmp_path: Path,
) -> None:
    """A worker opens the store before Celery sets up logging, and the CLI
    sets up none: an upgrade of an existing schema is a WARNING, which
    Python's last resort prints, so every process that upgrades says so."""
    done = run_script(OPEN_WITHOUT_LOGGING, f"sqlite:///{tmp_path / 'old.sqlite3'}", OLD)
    created, opened = done.stderr.split("--- opened by a process that configured no logging\n")
    assert created == "", "a new schema is INFO: not printed"
    assert opened.startswith(f"celery-dgs: upgraded the store's schema from revision {OLD} to "), (
        done.stderr
    )
    assert "processes of an older celery-dgs must stop" in opened


def test_an_alembic_level_the_application_set_is_left_alone(tmp_path: Path) -> None:
    out = migrate(tmp_path, "alembic-info").split("--- alembic set to INFO by the application\n")
    assert "alembic.runtime.migration Context impl SQLiteImpl." in out[1], out[1]
