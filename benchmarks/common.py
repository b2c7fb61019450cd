"""Timing helpers, the result row, the table and the JSON file."""

from __future__ import annotations

import gc
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Profile:
    """Sizes of one run: the default, ``--quick`` (a short run), ``--full`` (1M
    start-up) or ``--smoke`` (every step at a tiny size, once: seconds; for the
    test suite, which checks that the benchmarks run, not their figures)."""

    name: str
    decision_sizes: tuple[int, ...]
    celery_sizes: tuple[int, ...]
    engine_size: int  # schedules in the BeatEngine of the idle-tick and dispatch benchmarks
    due: int  # schedules due at once in the dispatch benchmark
    startup_size: int
    repeats: int
    startup_repeats: int


PROFILES = {
    "default": Profile(
        "default", (10_000, 100_000, 1_000_000), (10_000, 100_000), 1_000_000, 10_000, 100_000, 5, 3
    ),
    "quick": Profile("quick", (10_000, 100_000), (10_000,), 100_000, 2_000, 10_000, 3, 1),
    "smoke": Profile("smoke", (1_000,), (1_000,), 2_000, 200, 1_000, 1, 1),
    "full": Profile(
        "full", (10_000, 100_000, 1_000_000), (10_000, 100_000), 1_000_000, 10_000, 1_000_000, 5, 1
    ),
}


@dataclass
class Result:
    """One row of the table. ``ratio`` is oriented so that higher is better for
    speed-ups (``baseline / value``) and as stated in ``ratio_note`` otherwise."""

    name: str
    n: int
    median: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ratio: float | None = None
    ratio_note: str = ""
    goal: str = ""
    met: bool | None = None
    samples: list[float] = field(default_factory=list)
    notes: str = ""


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def ru_maxrss_mib() -> float:
    """``getrusage(RUSAGE_SELF).ru_maxrss`` in MiB (KiB on Linux, bytes on macOS).

    On Linux it survives ``execve``: a child started by a process with a large
    RSS reports at least the parent's RSS (the exec'ing process's high-water
    mark is carried over). :func:`peak_rss_mib` does not have that problem.
    """
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024 if sys.platform != "darwin" else kib / 1024 / 1024


def peak_rss_mib() -> float:
    """Peak resident set size of this process: ``VmHWM`` (the high-water mark of
    this address space, new at exec) where there is /proc, else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return ru_maxrss_mib()


def current_rss_mib() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1024 / 1024
    except OSError:
        return peak_rss_mib()


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC inside a timed section (it would charge one sample for everyone's garbage)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def repeat(fn: Callable[[], float], repeats: int) -> list[float]:
    """Run ``fn`` (which returns its own measurement) ``repeats`` times."""
    out = []
    for _ in range(repeats):
        gc.collect()
        with gc_paused():
            out.append(fn())
    return out


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if abs(value) >= 100_000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    elif abs(value) >= 0.1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def table(results: Sequence[Result]) -> str:
    headers = ["benchmark", "N", "median", "baseline (same run)", "ratio", "goal", "met?"]
    rows = []
    for r in results:
        base = "-" if r.baseline is None else f"{fmt(r.baseline, r.unit)} ({r.baseline_name})"
        ratio = "-" if r.ratio is None else f"{r.ratio:.3g}x {r.ratio_note}".strip()
        met = {True: "yes", False: "NO", None: "-"}[r.met]
        rows.append([r.name, f"{r.n:,}", fmt(r.median, r.unit), base, ratio, r.goal or "-", met])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in rows]
    return "\n".join(out)


def environment() -> dict[str, Any]:
    import celery
    import redis
    import sqlalchemy

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "celery": celery.__version__,
        "redis-py": redis.__version__,
        "sqlalchemy": sqlalchemy.__version__,
    }


def write_json(
    path: Path, profile: Profile, results: Sequence[Result], extra: dict[str, Any]
) -> None:
    payload = {
        "profile": asdict(profile),
        "environment": environment(),
        "results": [asdict(r) for r in results],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
