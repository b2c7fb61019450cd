"""The fleet ``celery -A proj dgs simulate`` runs by default: what beat would
serve once started, read from the app's declarations and its store.

That is the app's valid declarations (a declared row of the store gives them
its statistics; a stored declared schedule the app no longer declares is left
out, as ``sync`` deactivates it; one whose declaration is invalid keeps its
stored spec, as beat does), the store's active runtime and adaptive
schedules, and its pending deferred checks due within the simulated horizon;
paused and disabled schedules are left out. The store is not read when its
SQLite file does not exist or it cannot be reached: the declarations alone
are simulated, and the first output line says so. The fleet is read in one
pass and sampled (:func:`~celery_dgs.sim.fleet.sample_fleet`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import click
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from ..core.spec import ScheduleSpec
from ..errors import DgsError
from ..ops.env import Env
from ..sim.fleet import FleetEntry, FleetSample, sample_fleet
from ..store.base import ScheduleStore
from ..store.records import OWNER_DECLARED, StoredSchedule

#: Pending checks read per query.
CHECK_PAGE = 1000


@dataclass(frozen=True)
class AppFleet:
    """The sampled fleet and where it came from, in words for the first line."""

    sample: FleetSample
    source: str


def read_app_fleet(env: Env, *, now: datetime, horizon_s: float, limit: int, seed: int) -> AppFleet:
    """The app's fleet (module docstring), sampled to at most ``limit``;
    declaration errors are printed on stderr. ``UsageError`` when there is
    nothing to simulate."""
    decl = env.dgs.all_declarations()
    for err in decl.errors.values():
        click.echo(
            f"ERROR schedule {err.schedule!r}, field {err.field!r}: {err.message} (left out)",
            err=True,
        )
    store, why_not = open_store(env)
    left_out: Counter[str] = Counter()
    declared = dict(decl.specs)
    if store is None:
        sample = sample_fleet(_declared(declared), limit, seed=seed)
        source = f"the app's declarations (store not read: {why_not})"
    else:
        until = now + timedelta(seconds=horizon_s)
        _, rows = store.iter_active()
        stored = _stored(rows, declared, set(decl.errors), left_out)
        checks = _checks(_pending_checks(store, until), left_out)
        entries = _chain(stored, checks, _declared(declared))
        sample = sample_fleet(entries, limit, seed=seed)
        if sample.by_origin["runtime"] or sample.by_origin["check"]:
            source = f"the store and the app's declarations: {sample.describe()}"
        else:
            source = "the app's declarations (the store holds no runtime schedule or check)"
        if left_out:
            source += ", left out " + ", ".join(f"{n} {w}" for w, n in sorted(left_out.items()))
    if not sample.total:
        raise click.UsageError(
            "the app declares no valid schedules and its store holds none to simulate"
        )
    return AppFleet(sample, source)


def open_store(env: Env) -> tuple[ScheduleStore | None, str]:
    """The app's store, or ``None`` and why: its SQLite file does not exist
    (it is not created), or it cannot be opened."""
    url_text = env.settings.database_url
    try:
        url = make_url(url_text)
    except ArgumentError as exc:
        return None, f"dgs_database_url: {exc}"
    if url.get_backend_name() == "sqlite":
        path = url.database
        if not path or path == ":memory:" or not Path(path).exists():
            return None, f"no database file {path or ':memory:'}"
    try:
        return env.runtime.store, ""
    except (SQLAlchemyError, DgsError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _chain(*parts: Iterable[FleetEntry]) -> Iterator[FleetEntry]:
    for part in parts:
        yield from part


def _declared(declared: Mapping[str, ScheduleSpec]) -> Iterator[FleetEntry]:
    """The declarations not met in the store (read after it): no statistics."""
    for spec in declared.values():
        yield FleetEntry(spec, None, "declared")


def _stored(
    rows: Iterable[StoredSchedule],
    declared: dict[str, ScheduleSpec],
    invalid: set[str],
    left_out: Counter[str],
) -> Iterator[FleetEntry]:
    """The active stored schedules as beat serves them; a declared one met
    here is taken out of ``declared``."""
    for row in rows:
        if row.owner == OWNER_DECLARED:
            spec = declared.pop(row.name, None)
            if spec is None and row.name in invalid:
                spec = row.spec
            if spec is None:
                continue  # no longer declared
            origin = "declared"
        else:
            spec, origin = row.spec, "runtime"
        if spec is None:
            left_out["unreadable"] += 1
        elif row.paused or row.disabled_reason:
            left_out["paused or disabled"] += 1
        else:
            yield FleetEntry(spec, row.stats, origin)


def _checks(rows: Iterable[StoredSchedule], left_out: Counter[str]) -> Iterator[FleetEntry]:
    for row in rows:
        if row.spec is None:
            left_out["unreadable"] += 1
        elif row.paused:
            left_out["paused or disabled"] += 1
        else:
            yield FleetEntry(row.spec, row.stats, "check")


def _pending_checks(store: ScheduleStore, until: datetime) -> Iterator[StoredSchedule]:
    """Pending checks due at or before ``until`` (overdue ones too), earliest first."""
    after: tuple[datetime, str] | None = None
    while True:
        page = store.due_checks(after, until, CHECK_PAGE)
        yield from page
        if len(page) < CHECK_PAGE:
            return
        last = page[-1]
        assert last.stats.next_target_at is not None  # a pending check has its time
        after = (last.stats.next_target_at, last.name)
