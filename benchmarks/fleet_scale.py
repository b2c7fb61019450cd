"""A lister's fleet at 10 million: ``python -m benchmarks.fleet_scale [--quick]``.

PostgreSQL (a throw-away server from ``initdb``, its data under /tmp) holds
``--pg-schedules`` (10,000,000) runtime schedules, SQLite ``--sqlite-schedules``
(1,000,000), written as a lister writes them: ``dgs.schedules.upsert_many``
(:class:`~celery_dgs.runtime_schedules.RuntimeSchedules` on the real SQL
store) of adaptive schedules (interval unit 6 h, each source its own
``args``), ``--batch`` rows a call. Two mixes of the same rows:

* **backlog**: as written, never run: every schedule eligible now;
* **seed 001**: then given run statistics (one set-based ``UPDATE``, the kept
  columns computed by the store's own :func:`~celery_dgs.core.kept_condition.kept_times`
  per bucket of rows; a fixture, not a goal): ladder steps from 6 h to 64
  days, each schedule a random part of its interval from its next eligible
  moment, so that about 1 % of the fleet becomes eligible per hour; 1 % never
  visited (eligible now).

Figures, each beside its goal and a baseline measured in the same run:

1. ``upsert_many`` of every new row, rows/s; baseline: the driver's own bulk
   write of the same final rows into a scratch table with the same columns
   and indexes (PostgreSQL ``COPY``; SQLite one ``executemany`` ``INSERT``).
   Per batch, so the cost's growth with the table shows.
2. ``celery dgs status``, ``status PATTERN`` (a prefix selecting 0.1 %),
   ``status --json --limit 100`` and ``status --json`` (every row, streamed:
   its first byte, and its total, stopped after ``--json-seconds`` and then
   projected from its rate), each in a fresh child process through the real
   CLI (:func:`benchmarks.status_scale.measure`), in both mixes; baseline
   ``SELECT count(*)``.
3. The status page (``celery dgs web``, a child process, its address space
   capped at ``--web-cap-mib``): the first page (the snapshot's first read),
   then ``--requests`` polls of the overview, p95 latency and the age of what
   it shows (``/api/overview``'s ``now``); baseline: ``/favicon.ico``.
4. 10,000 lister changes reaching beat: ``upsert_many`` of 10,000 changed
   rows, then ``store.changes_since(cursor)`` returning them; baseline: the
   driver's fetch of the same rows.
5. The decision at 1M (10M when its memory, projected from 1M, fits in
   8 GiB) with priorities, and with the look-ahead admission
   (:mod:`benchmarks.decision`), in a child process each; baseline: the same
   index of 10,000 entries (what a window of beat holds).

Also: the store's size on disk per row, and the kept-column backfill's cost
per row (a slice of 100,000 rows written again). ``--quick``: 20,000 / 10,000
schedules, seconds. ``--fill-only``: figure 1 alone (with ``--no-sqlite
--no-decision``: PostgreSQL's fill). The PostgreSQL data and the SQLite file
are removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bucket_fill import backfill_us, buckets_held, update_by_bucket
from .common import log, median
from .status_scale import GOAL_MIB, GOAL_S, TASK, _prefix_pattern, child_peak_mib, measure

if TYPE_CHECKING:
    from celery_dgs.runtime_schedules import RuntimeSchedules
    from celery_dgs.store.sql import SqlScheduleStore

ROOT = Path(__file__).resolve().parents[1]
UNIT = timedelta(hours=6)
#: ``(share in 200ths, ladder index)`` of the seed-001 mix; ``None``: never visited.
CLASSES: tuple[tuple[int, int | None], ...] = (
    (4, 0),  # 6 h
    (4, 2),  # 12 h
    (8, 5),  # 1 day
    (30, 6),  # 4 days
    (60, 7),  # 16 days
    (92, 8),  # 64 days
    (2, None),
)
PHASES = 500
BUCKETS = 200 * PHASES
CHANGES = 10_000
GOAL_ROWS_PER_S = 50_000.0
GOAL_CHANGES_S = 1.0
GOAL_PAGE_MS, GOAL_AGE_S = 300.0, 5.0
GOAL_DECISION_US = 30.0
DECISION_MEMORY_LIMIT_MIB = 8 * 1024.0


@dataclass
class Line:
    """A row of the printed table."""

    figure: str
    value: str
    baseline: str
    goal: str
    verdict: str

    def text(self) -> str:
        return f"| {self.figure} | {self.value} | {self.baseline} | {self.goal} | {self.verdict} |"


def lines_table(lines: Iterable[Line]) -> str:
    """The printed table of ``lines``, with its header."""
    header = "| figure | celery-dgs | baseline (same run) | goal | verdict |\n|---|---|---|---|---|"
    return "\n".join([header, *(line.text() for line in lines)])


def verdict(met: bool, projected: bool = False) -> str:
    word = "met" if met else "not met"
    return f"projected ({word})" if projected else word


def name_of(i: int) -> str:
    return f"{TASK}@src{i:08d}"


def lister_row(i: int, version: int = 0) -> dict[str, Any]:
    """Source ``i`` as the lister writes it (``version``: a later change of its URL)."""
    return {
        "task": TASK,
        "configuration": f"src{i:08d}",
        "kind": "adaptive",
        "interval_unit": UNIT.total_seconds(),
        "args": [f"https://src{i}.example.org/feed/{version}"],
    }


# -- 1. the fill ------------------------------------------------------------------------------
def _scratch(store: SqlScheduleStore) -> None:
    """An empty table like ``dgs_schedules`` (columns and indexes, not its
    triggers): the baseline's."""
    with store.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                "CREATE TABLE dgs_fleet_scratch (LIKE dgs_schedules INCLUDING ALL)"
            )
            return
        ddl = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'dgs_schedules' AND sql IS NOT NULL "
            "AND type IN ('table', 'index')"  # not the condition tally's triggers
        ).scalars()
        for sql in list(ddl):
            conn.exec_driver_sql(
                sql.replace("dgs_schedules", "dgs_fleet_scratch").replace(" ix_", " ix_scratch_")
            )


def _raw_write(store: SqlScheduleStore, lo: int, hi: int) -> float:
    """The baseline: the stored rows ``lo..hi-1`` written again by the driver
    into the scratch table (the read not timed)."""
    with store.engine.begin() as conn:
        driver: Any = conn.connection.driver_connection
        cur = driver.cursor()
        pg = conn.dialect.name == "postgresql"
        mark = "%s" if pg else "?"
        cur.execute(
            f"SELECT * FROM dgs_schedules WHERE name >= {mark} AND name <= {mark}",
            (name_of(lo), name_of(hi - 1)),
        )
        rows = cur.fetchall()
        start = time.perf_counter()
        if pg:
            with cur.copy("COPY dgs_fleet_scratch FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" for _ in rows[0])
            cur.executemany(f"INSERT INTO dgs_fleet_scratch VALUES ({marks})", rows)
        cur.close()
    return time.perf_counter() - start


def fill(store: SqlScheduleStore, api: RuntimeSchedules, n: int, batch: int) -> dict[str, Any]:
    """Every row through ``upsert_many``, a batch a call, each batch then written
    again by the driver into the scratch table; both timed per batch."""
    _scratch(store)
    ours, raw = [], []
    for lo in range(0, n, batch):
        hi = min(lo + batch, n)
        rows = [lister_row(i) for i in range(lo, hi)]
        start = time.perf_counter()
        report = api.upsert_many(rows)
        ours.append(time.perf_counter() - start)
        assert report.ok, report.errors[:3]
        assert len(report.applied.inserted) == hi - lo
        raw.append(_raw_write(store, lo, hi))
        if len(ours) % 4 == 1 or hi == n:
            log(
                f"  fill {hi:,}/{n:,}: upsert_many {(hi - lo) / ours[-1]:,.0f} rows/s, "
                f"raw {(hi - lo) / raw[-1]:,.0f} rows/s"
            )
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE dgs_fleet_scratch")
    return {"upsert_s": ours, "raw_s": raw, "batch": batch}


def fill_lines(label: str, n: int, got: dict[str, Any]) -> list[Line]:
    ours, raw, batch = got["upsert_s"], got["raw_s"], got["batch"]
    rate, raw_rate = n / sum(ours), n / sum(raw)
    per = [batch / s for s in ours[:-1]] or [n / ours[0]]
    driver = "COPY" if label == "PostgreSQL" else "executemany INSERT"
    return [
        Line(
            f"{label}: `upsert_many` of {n:,} new rows ({batch:,} a call)",
            f"{rate:,.0f} rows/s ({sum(ours):.0f} s; first call {per[0]:,.0f}, last "
            f"{per[-1]:,.0f} rows/s; {sum(ours) / n * 1e6:.1f} µs/row)",
            f"raw {driver} of the same rows: {raw_rate:,.0f} rows/s ({sum(raw):.0f} s); "
            f"{rate / raw_rate:.2f}x",
            f">= {GOAL_ROWS_PER_S:,.0f} rows/s",
            verdict(rate >= GOAL_ROWS_PER_S),
        )
    ]


# -- the seed-001 mix -------------------------------------------------------------------------
def _class_of(share: int) -> int | None:
    """The ladder index (None: never visited) of bucket class ``share`` (0..199)."""
    for weight, index in CLASSES:
        if share < weight:
            return index
        share -= weight
    raise ValueError(share)


def bucket_rows(
    store: SqlScheduleStore, now: datetime, buckets: int = BUCKETS
) -> list[dict[str, Any]]:
    """Per bucket of rows (the name's number modulo ``BUCKETS``) of the first
    ``buckets``: its statistics and the kept columns the store computes from them."""
    from celery_dgs.core.adaptive import ladder_interval
    from celery_dgs.core.kept_condition import kept_times
    from celery_dgs.core.spec import AdaptiveSpec
    from celery_dgs.core.stats import ScheduleStats
    from celery_dgs.store.kept import kept_values

    spec = AdaptiveSpec(task=TASK, configuration="src00000000", interval_unit=UNIT)
    out = []
    for k in range(buckets):
        index = _class_of(k % 200)
        if index is None:
            continue
        interval = ladder_interval(index, UNIT)
        phase = (k // 200) * 263 % PHASES  # spread over the interval at any fleet size
        eligible = now + 0.9 * interval * ((phase + 0.5) / PHASES)
        target = eligible + 0.1 * interval
        start = target - interval
        stats = ScheduleStats(
            registered_at=now - timedelta(days=400),
            last_good_start_at=start,
            last_good_end_at=start + timedelta(seconds=30),
            last_start_at=start,
            last_end_at=start + timedelta(seconds=30),
            failure_count=0,
            average_good_duration=timedelta(seconds=30),
            interval_index=index,
            next_target_at=target,
        )
        times = kept_times(spec, stats, now, retry_ladder=store.retry_ladder)
        row = {"k": k, "start": start, "end": start + timedelta(seconds=30)}
        row.update(target=target, idx=index)
        out.append({**row, **kept_values(times, None)})
    return out


def apply_mix(store: SqlScheduleStore, now: datetime) -> float:
    """The seed-001 mix written over the backlog (one ``UPDATE ... FROM``); seconds."""
    from sqlalchemy import Integer

    from celery_dgs.store.models import UTCDateTime

    held = buckets_held(store, BUCKETS)
    started = time.perf_counter()
    update_by_bucket(
        store,
        BUCKETS,
        bucket_rows(store, now, held),
        {"start": UTCDateTime, "end": UTCDateTime, "target": UTCDateTime, "idx": Integer},
        {
            "last_good_start_at": 'b."start"',
            "last_start_at": 'b."start"',
            "last_good_end_at": 'b."end"',
            "last_end_at": 'b."end"',
            "failure_count": "0",
            "average_good_duration_s": "30",
            "interval_index": 'b."idx"',
            "next_target_at": 'b."target"',
        },
    )
    analyze(store)
    return time.perf_counter() - started


def analyze(store: SqlScheduleStore) -> None:
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE dgs_schedules" if _pg(store) else "ANALYZE")


def _pg(store: SqlScheduleStore) -> bool:
    return store.engine.dialect.name == "postgresql"


def check_mix(store: SqlScheduleStore, n: int, now: datetime) -> tuple[float, float]:
    """The shares eligible now and within the next hour; a sample of rows' kept
    columns checked against the store's own computation of them."""
    from sqlalchemy import func, select

    from celery_dgs.store.kept import KEPT_COLUMNS, kept_row, times_of
    from celery_dgs.store.models import ScheduleRow

    t = ScheduleRow.__table__
    with store.engine.connect() as conn:
        shares = []
        for until in (now, now + timedelta(hours=1)):
            stmt = select(func.count()).where(t.c.active, t.c.next_can_start_at <= until)
            shares.append(int(conn.execute(stmt).scalar_one()) / n)
        for i in range(7, n, max(n // 200, 1)):
            stored = store.get(name_of(i))
            want = kept_row(times_of(stored, now, store.retry_ladder), None)
            got = conn.execute(
                select(*(t.c[c] for c in KEPT_COLUMNS)).where(t.c.name == stored.name)
            ).one()
            assert tuple(got) == want, (stored.name, tuple(got), want)
    return shares[0], shares[1]


# -- 2. status through the CLI ----------------------------------------------------------------
def status_lines(url: str, redis_url: str, n: int, label: str, json_seconds: float) -> list[Line]:
    count = measure(url, redis_url, ["count"])
    base = f"`SELECT count(*)`: {count['seconds']:.2f} s"
    lines = []
    for args in (
        ["status"],
        ["status", _prefix_pattern(n)],
        ["status", "--json", "--limit", "100"],
    ):
        r = measure(url, redis_url, args)
        met = r["seconds"] <= GOAL_S and r["peak_mib"] <= GOAL_MIB
        lines.append(
            Line(
                f"{label}: `celery dgs {' '.join(args)}`",
                f"{r['seconds']:.2f} s, {r['peak_mib']:.0f} MiB (first byte "
                f"{r['first_byte_s']:.2f} s; {r['bytes']:,} B out)",
                base,
                f"<= {GOAL_S:.0f} s, <= {GOAL_MIB:.0f} MB",
                verdict(met),
            )
        )
        log(lines[-1].text())
    lines += json_lines(url, redis_url, n, label, json_seconds, base)
    return lines


def json_lines(
    url: str, redis_url: str, n: int, label: str, json_seconds: float, base: str
) -> list[Line]:
    """``status --json``: its counts part (the first byte), and every row: the
    total, measured or projected from its rate when stopped."""
    r = measure(url, redis_url, ["status", "--json"], max_seconds=json_seconds)
    first = r["first_byte_s"]
    small = r["peak_mib"] <= GOAL_MIB
    if r["complete"]:
        total = f"{r['seconds']:.1f} s for {r['rows']:,} rows ({r['bytes'] / 1e6:,.0f} MB)"
    elif not r["rows"]:
        total = f"the first row not out after {r['seconds']:.0f} s: stopped"
    else:
        per_row = (r["seconds"] - first) / max(r["rows"], 1)
        total = (
            f"stopped after {r['seconds']:.0f} s at {r['rows']:,} rows: projected "
            f"{first + per_row * n:,.0f} s ({per_row * 1e6:.0f} µs/row, "
            f"{r['bytes'] / max(r['rows'], 1) * n / 1e9:.1f} GB)"
        )
    lines = [
        Line(
            f"{label}: `celery dgs status --json`, the counts part (first byte)",
            f"{first:.2f} s",
            base,
            f"<= {GOAL_S:.0f} s",
            verdict(first <= GOAL_S),
        ),
        Line(
            f"{label}: `celery dgs status --json`, every row (streamed)",
            f"{total}; {r['peak_mib']:.0f} MiB",
            base,
            f"<= {GOAL_MIB:.0f} MB (time: the rows' count)",
            verdict(small, projected=not r["complete"]),
        ),
    ]
    log(lines[-2].text())
    log(lines[-1].text())
    return lines


# -- 3. the status page -----------------------------------------------------------------------
def web_child(url: str, redis_url: str, port: int, cap_mib: float) -> None:
    """``celery dgs web`` here, its address space capped at ``cap_mib``."""
    from celery import Celery
    from celery.bin.base import CLIContext

    from celery_dgs.cli import dgs
    from celery_dgs.dgs import DGS

    cap = int(cap_mib * 1024 * 1024)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    app = Celery("fleetbench", broker=redis_url, set_as_current=False)
    app.conf.update(dgs_key_prefix="statusbench", dgs_database_url=url)
    DGS(app, install_worker_hooks=False)
    obj = CLIContext(app=app, no_color=True, workdir=None)
    args = ["web", "--bind", f"127.0.0.1:{port}", "--refresh", "2"]
    dgs.main(args, obj=obj, standalone_mode=False, prog_name="celery dgs")


def _get(url: str, timeout: float) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body: bytes = resp.read()
    return time.perf_counter() - start, body


def web_lines(
    url: str, redis_url: str, label: str, requests: int, cap_mib: float, first_s: float
) -> list[Line]:
    from celery_dgs.embedded import free_port

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "benchmarks.fleet_scale", "--child-web", url, redis_url]
    cmd += [str(port), str(cap_mib)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        try:
            return _poll_page(proc, base, label, requests, cap_mib, first_s)
        finally:
            proc.terminate()
            proc.wait(30)


def _poll_page(
    proc: subprocess.Popen[bytes],
    base: str,
    label: str,
    requests: int,
    cap_mib: float,
    first_s: float,
) -> list[Line]:
    """The first page, then ``requests`` polls of the overview and its age."""
    for _ in range(600):
        try:
            floor = [_get(base + "/favicon.ico", 5)[0] for _ in range(20)]
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise RuntimeError("the status page did not start")
    goal = f"p95 <= {GOAL_PAGE_MS:.0f} ms; age <= {GOAL_AGE_S:.0f} s"
    floor_text = f"`/favicon.ico`: p50 {median(floor) * 1e3:.1f} ms"
    start = time.perf_counter()
    try:
        first, body = _get(base + "/", first_s)
    except OSError as exc:
        peak = child_peak_mib(proc.pid)
        text = (
            f"first page not served after {time.perf_counter() - start:.0f} s "
            f"({type(exc).__name__}; RSS peak {peak:,.0f} MiB, cap {cap_mib:,.0f})"
        )
        return [Line(f"{label}: status page, overview", text, floor_text, goal, "not met")]
    read_ms = body.split(b" ms \xc2\xb7 refreshes")[0].rsplit(b" in ", 1)[-1].decode()
    times, ages = [], []
    for _ in range(requests):
        times.append(_get(base + "/", 60)[0])
        now = json.loads(_get(base + "/api/overview", 60)[1])["now"]
        ages.append(time.time() - datetime.fromisoformat(now.replace("Z", "+00:00")).timestamp())
        time.sleep(0.25)
    times.sort()
    p95 = times[max(int(len(times) * 0.95) - 1, 0)] * 1e3
    age = max(ages)
    text = (
        f"p50 {median(times) * 1e3:.0f} ms, p95 {p95:.0f} ms; age median "
        f"{statistics.median(ages):.1f} s, max {age:.1f} s; first page {first:.1f} s "
        f"(snapshot read {read_ms} ms); RSS peak {child_peak_mib(proc.pid):,.0f} MiB"
    )
    met = p95 <= GOAL_PAGE_MS and age <= GOAL_AGE_S
    return [Line(f"{label}: status page, overview", text, floor_text, goal, verdict(met))]


# -- 4. lister changes reaching beat ----------------------------------------------------------
def changes_lines(
    store: SqlScheduleStore, api: RuntimeSchedules, n: int, label: str, repeats: int, version: int
) -> list[Line]:
    """``upsert_many`` of ``CHANGES`` changed rows (their URL's ``version``
    onwards, one a repeat), then ``changes_since`` returning them."""
    from celery_dgs.store.sql_base import READ_COUNTER

    size = min(CHANGES, n // (repeats + 1))
    writes, polls, fetches = [], [], []
    for r in range(repeats):
        lo = (r + 1) * (n // (repeats + 1)) - size // 2
        rows = [lister_row(i, version=version + r) for i in range(lo, lo + size)]
        with store.engine.connect() as conn:
            cursor = int(conn.execute(READ_COUNTER).scalar_one())
        start = time.perf_counter()
        report = api.upsert_many(rows)
        writes.append(time.perf_counter() - start)
        assert len(report.applied.updated) == size, len(report.applied.updated)
        start = time.perf_counter()
        changed, _ = store.changes_since(cursor)
        polls.append(time.perf_counter() - start)
        assert len(changed) == size, len(changed)
        with store.engine.connect() as conn:
            start = time.perf_counter()
            got = conn.exec_driver_sql(
                f"SELECT * FROM dgs_schedules WHERE change_seq > {cursor}"
            ).fetchall()
            fetches.append(time.perf_counter() - start)
        assert len(got) == size
    poll = median(polls)
    return [
        Line(
            f"{label}: {size:,} lister changes reaching beat (`changes_since`), {n:,} stored",
            f"{poll:.2f} s (written by `upsert_many` in {median(writes):.2f} s)",
            f"driver fetch of the changed rows: {median(fetches):.2f} s",
            f"<= {GOAL_CHANGES_S:.0f} s",
            verdict(poll <= GOAL_CHANGES_S),
        )
    ]


# -- on disk, and the backfill ----------------------------------------------------------------
def disk_bytes(store: SqlScheduleStore, path: Path | None) -> dict[str, int]:
    if path is not None:
        return {"total": path.stat().st_size}
    with store.engine.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT pg_total_relation_size('dgs_schedules'), pg_relation_size('dgs_schedules'), "
            "pg_indexes_size('dgs_schedules')"
        ).one()
    return {"total": int(row[0]), "heap": int(row[1]), "indexes": int(row[2])}


# -- 5. the decision ----------------------------------------------------------------------------
def decision_child(n: int, kind: str, repeats: int) -> None:
    from .common import peak_rss_mib
    from .decision import BEAT_INDEXES, beat_index_decision_us, lookahead_decision_us

    if kind == "priorities":
        samples = beat_index_decision_us(n, repeats, BEAT_INDEXES[2])
    else:
        samples = lookahead_decision_us(n, repeats)
    print(json.dumps({"us": median(samples), "peak_mib": peak_rss_mib()}))


def _decide(n: int, kind: str, repeats: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.fleet_scale", "--child-decision", str(n), kind],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "FLEET_REPEATS": str(repeats)},
    )
    got: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def decision_lines(sizes: list[int], window: int, repeats: int) -> list[Line]:
    lines = []
    kinds = {
        "priorities": "beat's index with priorities (3 classes)",
        "lookahead": "beat's index with the look-ahead admission",
    }
    for kind, what in kinds.items():
        base = _decide(window, kind, repeats)
        for n in sizes:
            got = _decide(n, kind, repeats)
            per_row = (got["peak_mib"] - base["peak_mib"]) / max(n - window, 1)
            lines.append(
                Line(
                    f"decision: {what}, all in memory, {n:,} schedules",
                    f"{got['us']:.1f} µs; peak RSS {got['peak_mib']:,.0f} MiB "
                    f"({per_row * 1024:.2f} KiB per schedule)",
                    f"the same index of {window:,} (a window): {base['us']:.1f} µs, "
                    f"{base['peak_mib']:.0f} MiB",
                    f"<= {GOAL_DECISION_US:.0f} µs",
                    verdict(got["us"] <= GOAL_DECISION_US),
                )
            )
            log(lines[-1].text())
            if n * 10 in sizes or n >= 10_000_000:
                continue
            projected = got["peak_mib"] + per_row * 9 * n
            if projected > DECISION_MEMORY_LIMIT_MIB:
                lines.append(
                    Line(
                        f"decision: {what}, all in memory, {10 * n:,} schedules",
                        f"not run: its memory, projected from {n:,}, is "
                        f"{projected / 1024:.1f} GiB (> {DECISION_MEMORY_LIMIT_MIB / 1024:.0f} "
                        "GiB on a shared machine)",
                        "-",
                        f"<= {GOAL_DECISION_US:.0f} µs",
                        "-",
                    )
                )
    return lines


# -- one fleet --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    batch: int
    json_seconds: float
    requests: int
    web_cap_mib: float
    web_first_s: float
    repeats: int
    fill_only: bool = False


def run_fleet(
    label: str, url: str, redis_url: str, n: int, opts: Options, path: Path | None
) -> tuple[list[Line], list[str]]:
    """Every store figure of one fleet; the table's lines and the notes."""
    from celery_dgs.runtime_schedules import RuntimeSchedules
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore.open(url)
    api = RuntimeSchedules(store)
    log(f"{label}: filling {n:,} schedules, {opts.batch:,} a call")
    got = fill(store, api, n, opts.batch)
    started = time.perf_counter()
    analyze(store)
    notes = [
        f"{label}: VACUUM ANALYZE / ANALYZE after the fill {time.perf_counter() - started:.0f} s"
    ]
    lines = fill_lines(label, n, got)
    log(lines[-1].text())
    if opts.fill_only:
        store.close()
        return lines, notes
    lines += status_lines(url, redis_url, n, f"{label} backlog", opts.json_seconds)
    lines += changes_lines(store, api, n, f"{label} backlog", opts.repeats, 1)
    log(lines[-1].text())
    now = datetime.now(timezone.utc)
    log(f"{label}: the seed-001 mix")
    mix_s = apply_mix(store, now)
    eligible_now, next_hour = check_mix(store, n, now)
    notes.append(
        f"{label} seed-001 mix: written in {mix_s:.0f} s (UPDATE + VACUUM ANALYZE); eligible "
        f"now {eligible_now:.2%}, within the next hour {next_hour:.2%} of the fleet"
    )
    lines += status_lines(url, redis_url, n, f"{label} seed 001", opts.json_seconds)
    lines += changes_lines(store, api, n, f"{label} seed 001", opts.repeats, 100)
    log(lines[-1].text())
    lines += web_lines(
        url, redis_url, f"{label} seed 001", opts.requests, opts.web_cap_mib, opts.web_first_s
    )
    log(lines[-1].text())
    sizes = disk_bytes(store, path)
    notes.append(
        f"{label}: on disk {sizes['total'] / 1e9:.2f} GB ({sizes['total'] / n:,.0f} B/row"
        + (
            f"; heap {sizes['heap'] / n:,.0f}, indexes {sizes['indexes'] / n:,.0f} B/row)"
            if "heap" in sizes
            else ")"
        )
    )
    notes.append(f"{label}: kept-column backfill {backfill_us(store, n, now):.0f} µs/row")
    store.close()
    return lines, notes


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child-web":
        web_child(argv[1], argv[2], int(argv[3]), float(argv[4]))
        return 0
    if argv and argv[0] == "--child-decision":
        decision_child(int(argv[1]), argv[2], int(os.environ.get("FLEET_REPEATS", "3")))
        return 0
    args = parse(argv)
    quick = args.quick
    opts = Options(
        batch=args.batch or (5_000 if quick else 250_000),
        json_seconds=args.json_seconds,
        requests=args.requests or (8 if quick else 50),
        web_cap_mib=args.web_cap_mib,
        web_first_s=args.web_first_s,
        repeats=1 if quick else 3,
        fill_only=args.fill_only,
    )
    pg_n = args.pg_schedules or (20_000 if quick else 10_000_000)
    sqlite_n = args.sqlite_schedules or (10_000 if quick else 1_000_000)
    decision_sizes = args.decision_sizes or ([20_000] if quick else [1_000_000])
    return run(args, opts, pg_n, sqlite_n, decision_sizes)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fleet_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="20,000 / 10,000 schedules")
    parser.add_argument("--pg-schedules", type=int, help="default 10,000,000")
    parser.add_argument("--sqlite-schedules", type=int, help="default 1,000,000")
    parser.add_argument("--batch", type=int, help="rows per upsert_many call (250,000)")
    parser.add_argument("--json-seconds", type=float, default=60.0)
    parser.add_argument("--requests", type=int, help="overview polls (50)")
    parser.add_argument("--web-cap-mib", type=float, default=4096.0)
    parser.add_argument("--web-first-s", type=float, default=240.0)
    parser.add_argument("--decision-sizes", type=int, nargs="+", help="default 1,000,000")
    parser.add_argument("--window", type=int, default=10_000, help="the baseline index's size")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-decision", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument(
        "--fill-only", action="store_true", help="only the fill: upsert_many beside raw COPY"
    )
    return parser.parse_args(argv)


def run(
    args: argparse.Namespace, opts: Options, pg_n: int, sqlite_n: int, decision_sizes: list[int]
) -> int:
    from celery_dgs.embedded import RedisServerProcess

    started = time.perf_counter()
    lines: list[Line] = []
    notes: list[str] = []
    with RedisServerProcess() as redis:
        if not args.no_pg:
            got = run_pg(redis.url, pg_n, opts, args.keep)
            lines += got[0]
            notes += got[1]
        if not args.no_sqlite:
            tmp = Path(tempfile.mkdtemp(prefix="dgs-fleet-"))
            path = tmp / "fleet.db"
            try:
                got = run_fleet("SQLite", f"sqlite:///{path}", redis.url, sqlite_n, opts, path)
                lines += got[0]
                notes += got[1]
            finally:
                if not args.keep:
                    shutil.rmtree(tmp, ignore_errors=True)
    if not args.no_decision:
        lines += decision_lines(decision_sizes, args.window, opts.repeats)
    print(
        f"\ncelery-dgs at fleet scale, {os.cpu_count()} CPUs, {time.perf_counter() - started:.0f} s"
    )
    print(lines_table(lines))
    print("\n" + "\n".join(f"- {note}" for note in notes))
    return 0


def run_pg(redis_url: str, n: int, opts: Options, keep: bool) -> tuple[list[Line], list[str]]:
    from tests.support.postgres import PostgresServer, postgres_available

    if not postgres_available():
        return [], ["PostgreSQL: initdb/pg_ctl/postgres not on PATH, skipped"]
    pg = PostgresServer().start()
    log(f"PostgreSQL data in {pg.data_dir}")
    try:
        return run_fleet("PostgreSQL", pg.create_database("fleet"), redis_url, n, opts, None)
    finally:
        if keep:
            pg._run("pg_ctl", "-D", str(pg.data_dir), "-m", "fast", "-w", "stop")
            log(f"PostgreSQL data kept in {pg.data_dir}")
        else:
            pg.stop()


if __name__ == "__main__":
    raise SystemExit(main())
