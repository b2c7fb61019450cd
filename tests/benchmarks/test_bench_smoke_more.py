"""The second half of the benchmarks' smoke runs (``test_bench_smoke.py``
has the table of them and the first half)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.test_bench_smoke import SECOND_FILE, run_smoke

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("name", sorted(SECOND_FILE))
def test_the_benchmark_runs_at_a_tiny_size(name: str, tmp_path: Path) -> None:
    run_smoke(name, tmp_path)
