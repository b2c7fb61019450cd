"""The status page's read-only routes: the overview (also as JSON), the
schedules table, one schedule or deferred check, and the leases. The
overview reads the shared :class:`~.cache.SnapshotCache`; each table page
(filters and page number) is read from the store and kept the same way; a
schedule's row and runs are read from the store when its page is shown."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.condition import Level
from ..core.spec import CheckSpec
from ..errors import UnknownScheduleError
from ..leases.types import LeaseInfo
from ..ops.actions import ActionResult
from ..ops.checks import check_name, read_check, summary_json
from ..ops.env import Env, utcnow
from ..ops.errors import UnknownTarget
from ..ops.leases import owner_restarted, silent_owner_note
from ..ops.runs import recent_runs
from ..ops.spec_words import spec_words
from ..ops.state import Live, read_live, rows_of
from ..ops.timetext import iso
from ..status import StatusRow, is_check_name
from ..store.records import RunRecord
from . import views
from .cache import KeyedCaches, SnapshotCache
from .overview import HIST_H, HIST_W, histogram_bars
from .overview import overview as figures_of
from .snapshot import Snapshot
from .templating import HEADERS, Renderer, is_fragment

#: A schedule's page is shown against the overview's snapshot of the live
#: runs and workers (and its clock) while it is at most this old; past it
#: (its re-read is slow, or failing) the page reads them itself.
PAGE_FRESH_S = 2.0
#: Runs shown on a schedule's page.
RUNS_SHOWN = 30
#: Failing schedules shown on the leases page.
FAILURES_SHOWN = 20

#: The most digits of a page number (a larger one is past the last page anyway).
PAGE_DIGITS = 12


def page_number(text: str) -> int:
    """The ``page`` parameter (empty: 1); anything but a whole number of at
    most :data:`PAGE_DIGITS` digits is a 400. A number past the last page
    shows the last."""
    text = text.strip()
    if not text:
        return 1
    if not (text.isascii() and text.isdigit()) or len(text) > PAGE_DIGITS:
        raise HTTPException(400, f"page must be a whole number from 1, got {text[:20]!r}")
    return max(1, int(text))


class Pages:
    """The read-only routes over ``env``'s state, as of the cached snapshot.
    What a page derives from a whole snapshot (the overview's figures, the
    recent failures) is computed once per snapshot, not on every poll."""

    def __init__(self, env: Env, cache: SnapshotCache[Snapshot], renderer: Renderer) -> None:
        self.env = env
        self.cache = cache
        self.renderer = renderer
        self.tables: KeyedCaches[views.Query, views.Page] = KeyedCaches(
            lambda query: views.page_of(env, cache.get(), query), cache.max_age
        )
        self._overview: tuple[Snapshot, dict[str, Any]] | None = None
        self._failures: tuple[Snapshot, list[tuple[StatusRow, RunRecord | None]]] | None = None

    def overview_of(self, snap: Snapshot) -> dict[str, Any]:
        memo = self._overview
        if memo is not None and memo[0] is snap:
            return memo[1]
        data = figures_of(snap)
        self._overview = (snap, data)
        return data

    def overview(self, request: Request) -> Response:
        snap = self.cache.get()
        data = self.overview_of(snap)
        bars = histogram_bars(data["histogram"])
        page = "overview_live.html" if is_fragment(request) else "overview.html"
        return self.renderer.render(
            page, request, snap=snap, o=data, bars=bars, hist=(HIST_W, HIST_H)
        )

    def overview_json(self, request: Request) -> Response:
        snap = self.cache.get()
        data = self.overview_of(snap)
        return JSONResponse(
            {
                "now": iso(snap.now),
                "counts": data["counts"],
                "reasons": {k: dict(v) for k, v in data["reasons"].items()},
                "beat_leader": data["leader"],
                "beat_pace": data["pace"],
                "beat_pace_text": data["pace_text"],
                "overload": data["overload"],
                "overload_text": data["overload_text"],
                "redis_restart_grace": data["restart_grace"],
                "beat_leader_warning": data["leader_warning"],
                "workers": [
                    {"name": w.name, "slots": w.slots, "busy": w.busy, "free": w.free}
                    for w in data["workers"]
                ],
                "queues": [dataclasses.asdict(q) for q in data["queues"]],
                "pending_dispatches": data["pending_dispatches"],
                "histogram": dict(data["histogram"]),
                "checks": summary_json(snap.checks, snap.now),
            },
            headers=HEADERS,
        )

    def schedules(self, request: Request) -> Response:
        p = request.query_params
        try:
            level = views.condition_level(p.get("condition", ""))
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        query = views.Query(
            q=p.get("q", ""),
            condition=level,
            pool=p.get("pool", ""),
            task=p.get("task", ""),
            page=page_number(p.get("page", "")),
        )
        page = self.tables.get(query)
        name = "schedules_table.html" if is_fragment(request) else "schedules.html"
        return self.renderer.render(
            name,
            request,
            page=page,
            pools=views.pools_of(self.cache.get(), self.env, query),
            levels=[lv.name for lv in sorted(Level, reverse=True)],
        )

    def schedule(
        self,
        request: Request,
        notice: ActionResult | None = None,
        problem: str | None = None,
        status: int = 200,
    ) -> Response:
        """A schedule's page (a deferred check's: :meth:`check`), with a notice
        or a problem after an action."""
        snap = self.cache.get()
        name = request.query_params.get("name", "")
        if is_check_name(name):
            return self.check(request, name, notice, problem, status)
        try:
            stored = self.env.runtime.store.get(name)
        except UnknownScheduleError:
            stored = None
        if stored is None or not stored.active:
            return self.renderer.render("missing.html", request, status=404, name=name)
        # The row is read now: so are its run and the clock it is shown against,
        # unless the overview's snapshot is as good as new.
        live = snap.live if _fresh(snap.now) else read_live(self.env)
        (row,) = rows_of(self.env, [stored], live)
        runs = recent_runs(self.env, name, RUNS_SHOWN)
        lease = note = None
        if row.running is not None:
            lease = self.lease_view(row.running, live)
            settings = self.env.settings
            note = silent_owner_note(  # why a silent owner's run shows, and what comes next
                name,
                row.running,
                live.now,
                ping_timeout=settings.ping_timeout,
                steal_delay=settings.steal_delay,
                can_start_by=row.can_start_by,
                restarted_at=owner_restarted(row.running, live.workers),
                pool=row.pool,
                workers=live.workers,
            )
        avg, dev = views.average_of(stored)
        page = "schedule_live.html" if is_fragment(request) else "schedule.html"
        return self.renderer.render(
            page,
            request,
            status=status,
            snap=snap,
            row=row,
            stored=stored,
            runs=runs,
            words=spec_words(stored.spec) if stored.spec is not None else "",
            tl=views.timeline(runs, row, live.now),
            now=live.now,
            lease=lease,
            silent_note=note,
            avg=avg,
            dev=dev,
            notice=notice,
            problem=problem,
        )

    def check(
        self,
        request: Request,
        name: str,
        notice: ActionResult | None = None,
        problem: str | None = None,
        status: int = 200,
    ) -> Response:
        """A deferred check's page: pending (next check, counts) or ended
        (its history), and its runs; with a notice after an action."""
        try:
            full_name, task, key = check_name(name, None)
            detail = read_check(self.env, full_name, task, key)
        except UnknownTarget:
            return self.renderer.render("missing.html", request, status=404, name=name)
        row = detail.row
        page = "check_live.html" if is_fragment(request) else "check.html"
        return self.renderer.render(
            page,
            request,
            status=status,
            notice=notice,
            problem=problem,
            snap=self.cache.get(),
            now=utcnow(),  # the check is read now: shown against the present
            c=detail,
            row=row,
            pending=row is not None and row.active,
            spec=row.spec if row is not None and isinstance(row.spec, CheckSpec) else None,
        )

    def leases(self, request: Request) -> Response:
        snap = self.cache.get()
        leases = [
            self.lease_view(lease, snap.live)
            for lease in sorted(snap.leases.values(), key=lambda x: x.started_at)
        ]
        page = "leases_live.html" if is_fragment(request) else "leases.html"
        return self.renderer.render(
            page, request, snap=snap, leases=leases, failures=self.failures_of(snap)
        )

    def lease_view(self, lease: LeaseInfo, live: Live) -> views.LeaseView:
        settings = self.env.settings
        return views.lease_view(
            lease, live.now, ping_timeout=settings.ping_timeout, steal_delay=settings.steal_delay
        )

    def failures_of(self, snap: Snapshot) -> list[tuple[StatusRow, RunRecord | None]]:
        """The failing schedules most recently ended, with their last run."""
        memo = self._failures
        if memo is not None and memo[0] is snap:
            return list(memo[1])
        stored = self.env.runtime.store.failing_schedules(FAILURES_SHOWN)
        failing = rows_of(self.env, stored, snap.live)
        failures = []
        for row in failing:
            last = recent_runs(self.env, row.name, 1)
            failures.append((row, last[0] if last else None))
        self._failures = (snap, failures)
        return failures


def _fresh(moment: datetime) -> bool:
    """Whether a snapshot read at ``moment`` is at most :data:`PAGE_FRESH_S` old."""
    return (utcnow() - moment).total_seconds() <= PAGE_FRESH_S
