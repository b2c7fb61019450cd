"""``celery dgs status``: the schedules' conditions, counted in the store and
listed a page at a time (its reads: :mod:`celery_dgs.ops.state`); ``--json``
streams every selected row."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import click

from ..core.condition import Level
from ..core.pace import PaceFigures
from ..leases.leader import LeaderInfo
from ..ops.checks import PastWithin, checks_past_within
from ..ops.declared import unstored_invalid, unstored_invalid_text
from ..ops.env import Env
from ..ops.leader import (
    beat_led_before,
    foreign_leader_of,
    foreign_workers_note,
    leader_expired,
    leader_json,
    overload_text,
    pace_text,
    read_leader,
    read_overload,
    read_pace,
)
from ..ops.restart import read_restart_grace, restart_json, restart_text
from ..ops.state import OtherRuns, StatusPage, iter_rows, read_page, selection_of
from ..ops.timetext import counted, iso
from ..overload_board import OverloadReport
from ..status import StatusRow
from ..status.queues import queue_loads
from ..store.check_types import CheckSummary
from ..store.engine import masked_url
from ..store.selection import Selection, is_glob
from .checks_render import past_within_text, status_checks_json, status_checks_line
from .context import StateUnavailable, get_env, use_color, wrap_errors
from .leader_view import leader_text
from .output import styled
from .render import status_row_json, status_text

LEVELS = [level.name for level in sorted(Level, reverse=True)]

#: The longest ``status --watch`` interval, in seconds (a day).
MAX_WATCH_INTERVAL_S = 86_400.0
#: Rows the table lists unless ``--limit`` says otherwise.
DEFAULT_TABLE_ROWS = 100
#: With a PATTERN, the table's rows whose spec is put in words below it when it
#: lists at most this many.
SPEC_LINES_MAX = 10
#: The largest ``--limit`` (a database LIMIT is a 64-bit integer).
MAX_LIMIT = 10**12

#: A frame of ``status``: its text in pieces, and whether it has an ERROR.
Frame = Callable[[], tuple[Iterable[str], bool]]


def _not_nan(param: click.Parameter, value: float | None) -> float | None:
    """``value``, unless it is NaN (which passes every range check)."""
    if value is not None and math.isnan(value):
        raise click.BadParameter("must be a number of seconds, got nan", param=param)
    return value


@click.command()
@click.argument("patterns", nargs=-1, metavar="[PATTERN]...")
@click.option(
    "--condition",
    "conditions",
    multiple=True,
    type=click.Choice(LEVELS, case_sensitive=False),
    help="Only schedules in this condition (repeatable).",
)
@click.option("--pool", "pools", multiple=True, help="Only schedules of this pool (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0, max=MAX_LIMIT),
    help=f"List at most this many schedules, most urgent first (table: {DEFAULT_TABLE_ROWS}; "
    "--json: all).",
)
@click.option(
    "--project",
    is_flag=True,
    help="Replay beat's order over the whole fleet: projected_late warnings and "
    "look-ahead holds (reads every schedule).",
)
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1, max=MAX_WATCH_INTERVAL_S),
    metavar="SECONDS",
    callback=lambda _ctx, param, value: _not_nan(param, value),
    help="Redraw every SECONDS until Ctrl-C.",
)
@click.pass_context
@wrap_errors
def status(
    ctx: click.Context,
    patterns: tuple[str, ...],
    conditions: tuple[str, ...],
    pools: tuple[str, ...],
    as_json: bool,
    limit: int | None,
    project: bool,
    watch: float | None,
) -> None:
    """Every schedule's condition (OK / WARNING / ERROR) and why, most urgent first.

    PATTERN selects schedules by name: a plain word matches anywhere in the
    name ('flaky' lists 'proj.flaky_report'); a pattern with a glob character
    (* ? [) must match the whole name ('proj.scrape_*'). Matching is
    case-sensitive; several patterns list the schedules matching any of them.
    When a PATTERN selects at most 10 rows, a line below the table says what
    each one is ('proj.nightly: cron 0 0 * * * America/New_York, done within
    6h00m'; --json: spec_summary).

    The counts cover every selected schedule; the table lists the most urgent
    (--limit, 100 by default), --json every one, streamed. Both read the
    conditions the store keeps. --project also replays beat's order over
    the live slots: OK schedules it would start after their should_start_by
    become WARNING projected_late. It reads every schedule (seconds per
    100,000).

    MAY RUN says when beat may dispatch a schedule next: 'now', 'in 59m', or
    'running', 'paused', 'disabled' (an adaptive schedule after max_failures:
    `celery dgs resume` or an upsert enables it), 'no worker', 'lookahead'
    (--project), 'inactive', 'invalid spec'. Below the table, 'held'
    lines say what holds a schedule back: a retry backoff after failures
    ('retry in 59m, failure 2 (retry step 2 of 3: 1h00m)'), a pause, no live
    worker able to run it (none consumes its pool, or dont_run_on_nodes
    excludes each one that does), a blackout window. Times in the table are
    relative to now; --json gives ISO-8601 UTC times and durations in seconds.

    Exit status: 1 if any selected schedule is in ERROR, a declaration of the
    app is invalid and not stored (beat skips it; a line names it), a
    deferred check is overdue past its within, or no beat dispatches (the
    leader's lease expired, the last leader resigned and none took over, or
    the leader serves another store: a health check), 0 otherwise; 3 if Redis or the
    store cannot be read; 4 on a configuration error. Only active schedules
    are listed (one whose declaration is invalid is listed as stored, in
    ERROR declaration_invalid); a paused one keeps its
    real condition. Deferred checks are not listed: one line counts the
    pending and overdue ones (celery dgs checks shows them).
    """
    env = get_env(ctx)
    color = use_color(ctx) and not as_json
    selection = selection_of(env, conditions, pools, patterns)
    declared = env.dgs.all_declarations()  # beat's view: the task modules imported

    @wrap_errors
    def frame() -> tuple[Iterable[str], bool]:
        rows = limit if limit is not None or as_json else DEFAULT_TABLE_ROWS
        page = read_page(env, selection, limit=rows, project=project)
        leader, timeout = read_leader(env)
        pace, overload = read_pace(env), read_overload(env)
        grace = read_restart_grace(env)
        kept = env.runtime.outcome_spool.count()  # run outcomes waiting for the store
        foreign = foreign_leader_of(env, leader)  # another project's beat leads
        strangers = foreign_workers_note(env, page.live.foreign_workers)  # another project's
        checks = env.runtime.store.check_summary(page.now)  # one grouped query
        past = checks_past_within(env, checks, page.now)  # one read per task with overdue checks
        # A leader whose lease expired died without resigning, and none after
        # a beat that led resigned: nothing dispatches.
        led_before = leader is None and beat_led_before(env)
        stopped = led_before or (leader is not None and leader_expired(leader, page.now, timeout))
        skipped = unstored_invalid(declared, env.runtime.store, page.now)
        # Another project's beat leads: none dispatches this store's schedules.
        error = page.any_error or bool(past) or stopped or bool(skipped) or foreign is not None
        if as_json:
            dispatching = leader is not None and not stopped and foreign is None
            tail = beat_and_checks_json(
                page.now, leader, timeout, dispatching, pace, overload, checks, past
            )
            tail["redis_restart_grace"] = restart_json(grace)
            tail["outcomes_kept_in_redis"] = kept
            tail["beat_leader_warning"] = foreign
            tail["foreign_workers_warning"] = strangers
            live = page.live
            loads = queue_loads(live.leases.values(), live.workers)
            tail["queues"] = [dataclasses.asdict(load) for load in loads]
            tail["invalid_declarations"] = [dataclasses.asdict(i) for i in skipped]
            listed = page.rows if page.projected or limit is not None else None
            return json_frame(
                page, tail, listed, lambda: iter_rows(env, selection, page.live)
            ), error
        settings = env.settings
        text = table_text(
            page,
            color=color,
            capacity=settings.capacity,
            ping_timeout=settings.ping_timeout,
            steal_delay=settings.steal_delay,
            pools=selection.pools,
            counts_only=limit == 0,
            specs=bool(selection.patterns) and len(page.rows) <= SPEC_LINES_MAX,
        )
        lines = [text, queues_text(page, selection.pools), other_runs_text(page.other)]
        lines.append(empty_store_text(env, selection, page.total, len(declared.specs)))
        invalid = unstored_invalid_text(skipped)
        if invalid is not None:
            lines.append(f"{styled('ERROR', 'ERROR', color=color)} {invalid}")
        lines.append(glob_text(selection.patterns) if not page.total else None)
        lines.append(kept_outcomes_text(kept))
        lines += [
            restart_text(grace),
            leader_text(leader, page.now, timeout, led_before=led_before),
        ]
        for warning in (foreign, strangers):
            if warning is not None:
                lines.append(f"{styled('WARNING', 'WARNING', color=color)} {warning}")
        lines.append(pace_text(pace, stopped=stopped))
        lines.append(overload_text(overload))
        lines.append(status_checks_line(checks, page.now, color=color))
        lines += [past_within_text(p, color=color) for p in past]
        return ["\n".join(line for line in lines if line is not None)], error

    if watch is None:
        chunks, error = frame()
        write_chunks(chunks, color=color)
        ctx.exit(1 if error else 0)
    ctx.exit(watch_loop(frame, watch, color=color))


def kept_outcomes_text(kept: int) -> str | None:
    """The run outcomes workers kept in Redis while the store refused them."""
    if not kept:
        return None
    return (
        f"{counted(kept, 'run outcome')} kept in Redis, waiting for the store (workers could "
        "not store them; the leading beat stores them once the database answers, before its "
        "reaper judges any run lost)"
    )


def beat_and_checks_json(
    now: datetime,
    leader: LeaderInfo | None,
    timeout: float,
    dispatching: bool,
    pace: PaceFigures | None,
    overload: OverloadReport | None,
    checks: CheckSummary,
    past: list[PastWithin],
) -> dict[str, Any]:
    """The keys of ``status --json`` after the schedules."""
    return {
        "beat_leader": leader_json(leader, now, timeout),
        "beat_dispatching": dispatching,
        "beat_pace": None if pace is None else pace.to_dict(),
        "overload": None if overload is None else overload.to_dict(),
        "checks": {**status_checks_json(checks, now), "past_within": [p.task for p in past]},
    }


def json_frame(
    page: StatusPage,
    tail: dict[str, Any],
    listed: list[StatusRow] | None,
    every: Callable[[], Iterator[StatusRow]],
) -> Iterator[str]:
    """``status --json``: the counts and workers, the rows (``listed``, else
    ``every()`` streamed), then ``tail``."""
    head: dict[str, Any] = {
        "now": iso(page.now),
        "counts": page.counts,
        "other_runs": None
        if page.other is None
        else {"checks": page.other.checks, "inactive": page.other.inactive},
        "workers": [
            {"name": w.name, "node": w.node, "slots": w.slots, "queues": list(w.queues)}
            for w in page.workers
        ],
    }
    rows = every() if listed is None else iter(listed)
    docs = (status_row_json(r, page.now) for r in rows)
    return json_chunks(head, "schedules", docs, tail)


def other_runs_text(other: OtherRuns | None) -> str | None:
    """The live runs the header's running count leaves out, if any."""
    if other is None or not (other.checks or other.inactive):
        return None
    parts = [counted(other.checks, "deferred check")] if other.checks else []
    if other.inactive:
        parts.append(f"{counted(other.inactive, 'schedule')} removed or no longer declared")
    return f"also running: {', '.join(parts)}; celery dgs leases lists every run"


def empty_store_text(env: Env, selection: Selection, total: int, declared: int) -> str | None:
    """Where the schedules come from, when the store holds no active one (a
    new project whose beat has not started yet; ``declared``: the app's valid
    declarations); ``None`` otherwise."""
    if total or selection.patterns or selection.conditions or selection.pools:
        return None
    stored = (
        f"beat stores the app's {counted(declared, 'declared schedule')} when it starts "
        "(celery dgs sync stores them now); "
        if declared
        else ""
    )
    return (
        f"the store ({masked_url(env.settings.database_url)}) holds no active schedule: "
        f"{stored}"
        "runtime schedules are added with celery dgs add or import"
    )


def glob_text(patterns: Sequence[str]) -> str | None:
    """How the glob patterns that matched nothing are read; ``None`` for
    plain words (they match anywhere in a name)."""
    globs = [p for p in patterns if is_glob(p)]
    if not globs:
        return None
    unclosed = [p for p in globs if "[" in p and "]" not in p.split("[", 1)[1]]
    line = (
        "a pattern with *, ? or [ is a glob on the whole name (proj.scrape@*, *@src1?); "
        "a plain word matches anywhere in it"
    )
    if unclosed:
        line += f"; in {', '.join(repr(p) for p in unclosed)} a [ without ] is a plain character"
    return line


def table_text(
    page: StatusPage,
    *,
    color: bool,
    capacity: int | None,
    ping_timeout: float | None = None,
    steal_delay: float = 0.0,
    pools: Sequence[str] = (),
    counts_only: bool = False,
    specs: bool = False,
) -> str:
    """The table of a page of rows, with the counts of the whole selection and
    a line saying how many selected schedules it leaves out (none when
    ``counts_only``: ``--limit 0`` asked for no row); ``ping_timeout`` and
    ``steal_delay``: a run whose owner is silent says so. With ``pools``, the
    head counts the live workers that consume one of them. ``specs``: each
    row's spec in words below the table."""
    workers = page.workers
    if pools:
        workers = [w for w in workers if set(w.queues) & set(pools)]
    text = status_text(
        page.rows,
        page.now,
        workers,
        color=color,
        capacity=capacity,
        counts=page.counts,
        running=page.running,
        ping_timeout=ping_timeout,
        steal_delay=steal_delay,
        specs=specs,
    )
    hidden = page.total - len(page.rows)
    if hidden <= 0 or counts_only:
        return text
    more = "more not listed" if page.rows else "not listed"
    return f"{text}\n{hidden:,} {more} (--limit N, a PATTERN or --condition; --json lists all)"


def queues_text(page: StatusPage, pools: Sequence[str]) -> str | None:
    """``queues: celery 4 slots (1 busy); gpu 1 slot (all busy)`` (a queue
    whose slots are all busy serves nothing more until one ends), with more
    than one queue among the live workers or ``pools`` selected (then theirs
    only, or that no live worker consumes them); ``None`` otherwise."""
    loads = queue_loads(page.live.leases.values(), page.live.workers)
    if pools:
        loads = [load for load in loads if load.queue in pools]
        if not loads:
            return f"no live worker consumes {', '.join(map(repr, pools))}"
    elif len(loads) < 2:
        return None
    return "queues: " + "; ".join(load.text for load in loads)


def json_chunks(
    head: dict[str, Any], key: str, rows: Iterator[dict[str, Any]], tail: dict[str, Any]
) -> Iterator[str]:
    """``{**head, key: [*rows], **tail}`` as one JSON document, one row at a
    time (the rows are never all held): the other members indented, each row
    on a line of its own (compact: the C encoder, a tenth of the indented
    encoder's time)."""
    yield "{"
    first = True
    for name, value in head.items():
        yield ("\n" if first else ",\n") + _member(name, value)
        first = False
    yield ("\n" if first else ",\n") + f"  {json.dumps(key)}: ["
    empty = True
    for row in rows:
        yield ("\n    " if empty else ",\n    ") + _compact(row)
        empty = False
    yield "]" if empty else "\n  ]"
    for name, value in tail.items():
        yield ",\n" + _member(name, value)
    yield "\n}"


_compact = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode


def _member(name: str, value: Any) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    return f"  {json.dumps(name)}: {text}"


def write_chunks(chunks: Iterable[str], *, color: bool) -> None:
    """Write a frame's pieces to stdout as they come, then a newline."""
    for chunk in chunks:
        click.echo(chunk, nl=False, color=color)
    click.echo("")


def watch_loop(frame: Frame, interval: float, *, color: bool) -> int:
    """Redraw ``frame()`` every ``interval`` seconds until Ctrl-C. The exit status
    is the last successful frame's (1: a schedule in ERROR). A failed read is
    shown in place of the table and retried at the next frame."""
    error = False
    try:
        while True:
            try:
                chunks, error = frame()
                text = "".join(chunks)
            except StateUnavailable as exc:
                text = f"cannot read the state: {exc.message} (retrying every {interval:g}s)"
            if color:
                click.clear()
            click.echo(text, color=color)
            if not color:
                click.echo("")  # frames one after another: keep them apart
            time.sleep(interval)
    except KeyboardInterrupt:
        return 1 if error else 0
