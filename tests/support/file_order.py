"""The order in which the suite's test files are handed to pytest-xdist's
processes (``--dist loadfile`` with ``--no-loadscope-reorder``: each file whole,
in collection order, to the next process with little work queued).

A process stays busy until its last file ends, so the suite ends when the
last long file does: the longest files go first, and the many short unit-test
files last, where they fill the time until the other processes are done. The
order changes only how long the suite takes, never a result.
"""

from __future__ import annotations

from collections import Counter

import pytest

#: The files that take longest (seconds on two cores, measured with
#: ``--durations``), longest first.
LONGEST_FIRST = (
    "tests/e2e/test_sim_vs_real_e2e.py",  # 126 s: a fixed two-minute real run
    "tests/benchmarks/test_bench_smoke_more.py",
    "tests/benchmarks/test_bench_smoke.py",
    "tests/e2e/test_worker_e2e.py",
    "tests/faults/test_worker_faults.py",
    "tests/e2e/test_demo_e2e.py",
    "tests/e2e/test_schedule_window_e2e.py",
    "tests/faults/test_redis_faults.py",
    "tests/e2e/test_revisit_groups_e2e.py",
    "tests/e2e/test_beat_ha_e2e.py",
    "tests/e2e/test_lookahead_e2e.py",
    "tests/e2e/test_cli_e2e.py",
    "tests/e2e/test_beat_e2e.py",
    "tests/beat/test_window_equivalence.py",
    "tests/e2e/test_overload_e2e.py",
    "tests/e2e/test_checks_e2e.py",
)
#: Markers of tests that start servers or celery processes and wait on them:
#: after the longest files, before the unit tests.
PROCESS_MARKERS = frozenset({"e2e", "faults", "redis_ha"})


def file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def order_items(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place, each file's tests kept together in their order:
    ``LONGEST_FIRST``, then the files with a test marked by one of
    ``PROCESS_MARKERS``, then the others, most tests first."""
    counts = Counter(file_of(item) for item in items)
    with_processes = {
        file_of(item)
        for item in items
        if any(item.get_closest_marker(m) is not None for m in PROCESS_MARKERS)
    }
    first = {name: rank for rank, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> tuple[int, int, int]:
        name = file_of(item)
        if name in first:
            return (0, first[name], 0)
        return (1, 0 if name in with_processes else 1, -counts[name])

    items.sort(key=key)  # stable: a file's tests, and files that tie, keep their order
