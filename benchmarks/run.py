"""Run the benchmarks and print one table: ``python -m benchmarks.run [--quick | --full]``.

1. decision cost: DeadlineIndex pop + upsert vs ``celery.beat.Scheduler.tick()``;
2. idle tick of a BeatEngine holding 1,000,000 schedules, nothing due;
3. dispatch rate of BeatEngine rounds on a real Redis vs raw ``app.send_task``,
   and Redis round trips per dispatch;
4. start-up: load N schedules from SQLite and PostgreSQL, time and peak RSS.

Every figure is a median over repeats; every baseline is measured in the same
run. The table is also written as JSON to ``benchmarks/results-latest.json``.
``--quick`` (or ``BENCH_QUICK=1``) is a shorter run; ``--full`` (or
``BENCH_FULL=1``) loads 1,000,000 schedules in the start-up benchmark;
``--smoke`` runs every step at a tiny size, once, in seconds (the test suite's
check that the benchmarks still run).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Any

from . import decision, engine_bench, startup
from .common import PROFILES, RESULTS_DIR, Result, log, peak_rss_mib, table, write_json

STEPS = ("decision", "engine", "startup")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_true",
        default=_env("BENCH_QUICK"),
        help="small N, fewer repeats (about 2 minutes)",
    )
    size.add_argument(
        "--full",
        action="store_true",
        default=_env("BENCH_FULL"),
        help="start-up with 1,000,000 schedules (adds several minutes)",
    )
    size.add_argument(
        "--smoke",
        action="store_true",
        help="every step at a tiny size, once (seconds): checks that it runs",
    )
    parser.add_argument(
        "--only", choices=STEPS, action="append", help="run only this benchmark (repeatable)"
    )
    parser.add_argument("--repeats", type=int, help="repeats per figure (default 5; quick 3)")
    parser.add_argument(
        "--json",
        type=Path,
        default=RESULTS_DIR / "results-latest.json",
        help="where to write the results (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    chosen = [name for name in ("quick", "full", "smoke") if getattr(args, name)]
    if len(chosen) > 1:
        parser.error(f"--{chosen[0]} and --{chosen[1]} exclude each other")
    profile = PROFILES[chosen[0] if chosen else "default"]
    if args.repeats:
        profile = dataclasses.replace(profile, repeats=args.repeats)
    steps = args.only or list(STEPS)
    # Dispatch and tick code logs at INFO per dispatch; beat and the baselines alike stay quiet.
    logging.basicConfig(level=logging.WARNING)

    started = time.perf_counter()
    log(f"profile {profile.name}: {profile}")
    results: list[Result] = []
    extra: dict[str, Any] = {}
    celery_idle: dict[int, float] = {}
    if "decision" in steps:
        rows, celery_idle = decision.run(profile)
        results += rows
        extra["celery_idle_tick_us"] = celery_idle
    if "engine" in steps:
        rows, engine_extra = engine_bench.run(profile, celery_idle)
        results += rows
        extra.update(engine_extra)
    if "startup" in steps:
        results += startup.run(profile)
    elapsed = time.perf_counter() - started
    extra["elapsed_s"] = round(elapsed, 1)
    extra["peak_rss_mib_of_runner"] = round(peak_rss_mib())

    print()
    print(
        f"celery-dgs benchmarks, profile {profile.name!r}, {os.cpu_count()} CPUs, "
        f"{elapsed:.0f} s (medians of {profile.repeats} repeats; start-up "
        f"{profile.startup_repeats}; baselines from the same run)"
    )
    print(table(results))
    notes = [f"- {r.name} (N={r.n:,}): {r.notes}" for r in results if r.notes]
    if notes:
        print("\nNotes:")
        print("\n".join(notes))
    write_json(args.json, profile, results, extra)
    print(f"\nwritten: {args.json}")
    return 0


def _env(name: str) -> bool:
    return os.environ.get(name, "").lower() in {"1", "true", "yes"}


if __name__ == "__main__":
    raise SystemExit(main())
