"""The store's share of a short run, in-process: ``python -m benchmarks.run_records``.

A worker that runs a runtime schedule makes three store calls per run: it
reads the schedule's row (``get``: its spec and token floor), records the
run's start (``record_run_start``: the run row, the schedule's statistics and
token) and its outcome (``record_run_end``: the run row's end, the
statistics). Here they are called in a loop, as the worker calls them, on the
fleet of ``benchmarks/refill.py`` (runtime schedules of one task, each with
its own arguments, period 1 h, cooldown 0), on a SQLite file and on a
PostgreSQL server of its own (when ``initdb`` is on the path; ``--no-postgres``
leaves it out). Every run succeeds with a token one above the last.

Figures, per call and per run (the three calls), the median over
``--repeats`` batches of ``--runs`` runs: the CPU time of this process
(``time.process_time``: SQLAlchemy, the driver, celery-dgs; not the database
server's) and the wall time, and the SQL statements issued (SQLAlchemy's
``before_cursor_execute``: SQLite's ``BEGIN`` is one, ``COMMIT`` is not).
There is no baseline in the same run: compare with the figures of the
previous code (docs/benchmarks.md, "Short runs on few slots").

    python -m benchmarks.run_records [--runs 1000] [--repeats 5] [--fleet 400]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import event

from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.store.sql import SqlScheduleStore

from .common import log

TASK = "e2e.scrape"
#: The store calls of one run, in the order the worker makes them.
CALLS = ("get", "record_run_start", "record_run_end")


@dataclass
class Tally:
    """CPU and wall seconds and SQL statements, by store call, of one batch."""

    cpu: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    wall: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    statements: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    call: str = ""

    def figure(self, what: str) -> defaultdict[str, float]:
        """The counter named ``what`` (one of :data:`FIGURES`)."""
        return {"cpu": self.cpu, "wall": self.wall, "statements": self.statements}[what]

    @contextmanager
    def timing(self, call: str) -> Iterator[None]:
        self.call = call
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.cpu[call] += time.process_time() - c0
            self.wall[call] += time.perf_counter() - w0
            self.call = ""


class Fleet:
    """The benchmark's schedules in one store, and the loop of their runs."""

    def __init__(self, store: SqlScheduleStore, size: int) -> None:
        self.store = store
        rows = [
            {
                "name": f"{TASK}@r{i:05d}",
                "period": 3600,
                "cooldown": 0,
                "args": [f"r{i:05d}"],
                "kwargs": {"seconds": 0.05},
            }
            for i in range(size)
        ]
        report = RuntimeSchedules(store).upsert_many(rows)
        if not report.ok:
            raise RuntimeError(f"storing the fleet failed: {report.errors[:3]}")
        self.names = [str(row["name"]) for row in rows]
        self.turn = 0
        self.tally = Tally()

        @event.listens_for(store.engine, "before_cursor_execute")
        def _statement(*_: Any) -> None:
            self.tally.statements[self.tally.call or "other"] += 1

    def run_once(self) -> None:
        """One run of the next schedule, as the worker records it."""
        store, tally = self.store, self.tally
        name = self.names[self.turn % len(self.names)]
        self.turn += 1
        run_id = uuid.uuid4().hex
        with tally.timing("get"):
            stored = store.get(name)
        started_at = datetime.now(timezone.utc)
        with tally.timing("record_run_start"):
            store.record_run_start(
                schedule=name,
                run_id=run_id,
                dispatch_id=uuid.uuid4().hex,
                owner_node="node-1",
                owner_name="celery@node-1",
                owner_tag=run_id,
                token=(stored.current_token or 0) + 1,
                started_at=started_at,
            )
        with tally.timing("record_run_end"):
            store.record_run_end(
                run_id=run_id,
                outcome="success",
                ended_at=started_at + timedelta(milliseconds=50),
                duration_s=0.05,
            )

    def batch(self, runs: int) -> Tally:
        """``runs`` runs, timed (no cyclic GC inside, collected before)."""
        gc.collect()
        gc.disable()
        self.tally = Tally()
        try:
            for _ in range(runs):
                self.run_once()
        finally:
            gc.enable()
        return self.tally


#: The :class:`Tally` counters of the table's columns.
FIGURES = ("cpu", "wall", "statements")


def per_run(tallies: list[Tally], what: str, calls: tuple[str, ...], runs: int) -> float:
    """The median over ``tallies`` of their counter ``what`` summed over ``calls``, per run."""
    return statistics.median(
        sum(tally.figure(what)[call] for call in calls) / runs for tally in tallies
    )


def measure(label: str, url: str, opts: argparse.Namespace) -> list[str]:
    """The table rows of one store: per call and per run."""
    store = SqlScheduleStore.open(url)
    try:
        fleet = Fleet(store, opts.fleet)
        fleet.batch(min(opts.runs, 200))  # warm-up: compiled statements, caches, pages
        tallies = [fleet.batch(opts.runs) for _ in range(opts.repeats)]
        outcomes = store.outcome_counts()
    finally:
        store.close()
    if set(outcomes) != {"success"}:
        raise RuntimeError(f"{label}: runs ended otherwise than in success: {outcomes}")
    rows = []
    for call in (*CALLS, "a run (the three calls)"):
        calls = (call,) if call in CALLS else CALLS
        cpu, wall, stmts = (per_run(tallies, what, calls, opts.runs) for what in FIGURES)
        rows.append(f"| {label} | {call} | {cpu * 1e6:,.0f} | {wall * 1e6:,.0f} | {stmts:.1f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs per timed batch")
    parser.add_argument("--repeats", type=int, default=5, help="timed batches (median)")
    parser.add_argument("--fleet", type=int, default=400, help="runtime schedules")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    opts = parser.parse_args(argv)
    if min(opts.runs, opts.repeats, opts.fleet) < 1:
        parser.error("--runs, --repeats and --fleet must be at least 1")

    from tests.support.postgres import PostgresServer, postgres_available

    tmp = Path(tempfile.mkdtemp(prefix="dgs-run-records-"))
    rows: list[str] = []
    try:
        log(f"run records: SQLite, {opts.repeats} x {opts.runs:,} runs, fleet {opts.fleet:,}")
        rows += measure("SQLite file", f"sqlite:///{tmp / 'store.sqlite3'}", opts)
        if opts.no_postgres or not postgres_available():
            log("run records: PostgreSQL left out (--no-postgres, or initdb not on the path)")
        else:
            pg = PostgresServer().start()
            try:
                log(f"run records: PostgreSQL, {opts.repeats} x {opts.runs:,} runs")
                rows += measure("PostgreSQL", pg.create_database("run_records"), opts)
            finally:
                pg.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nThe store calls of a run, {opts.fleet:,} runtime schedules; medians of "
        f"{opts.repeats} batches of {opts.runs:,} runs; load average {load}\n"
    )
    print("| store | call | CPU µs | wall µs | SQL statements |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
