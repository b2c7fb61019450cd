"""Several processes opening one new SQLite store at once."""

from __future__ import annotations

import threading
from pathlib import Path

from celery_dgs.store.engine import make_engine

OPENERS = 4
ROUNDS = 25


def test_simultaneous_first_connects_to_a_new_database(tmp_path: Path) -> None:
    """The first connect switches a new database to WAL, which needs an exclusive
    lock for which SQLite does not call its busy handler: before the retry, about
    one round in fifteen of three simultaneous openers failed with "database is
    locked" (measured on the migrations' concurrency test)."""
    for round_no in range(ROUNDS):
        url = f"sqlite:///{tmp_path / f'dgs-{round_no}.sqlite3'}"
        barrier = threading.Barrier(OPENERS)
        errors: list[BaseException] = []

        def open_store(
            url: str = url,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            engine = make_engine(url)
            try:
                barrier.wait(timeout=10)
                with engine.connect():
                    pass
            except BaseException as exc:  # collected and asserted on below
                errors.append(exc)
            finally:
                engine.dispose()

        threads = [threading.Thread(target=open_store) for _ in range(OPENERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == [], f"round {round_no}: {errors[0]!r}"
