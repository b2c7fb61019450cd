"""``celery -A proj dgs simulate --find-slots``: the search for the slot
count and what it prints (the answer's table, the schedules no slot count
serves and the slots for the others, ``--json``'s document)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import click

from ..core.ranking import OrderPolicy
from ..core.servable import Unservable
from ..ops.timetext import counted
from ..sim.fleet import FleetSample
from ..sim.report import (
    AMPLE_DEMAND_FACTOR,
    SlotSearch,
    ample_slots,
    find_slots,
    format_order,
    format_table,
    wasted_note,
    workload_summary,
)
from .simulate_workload import Built


def echo_if(line: str | None) -> None:
    if line is not None:
        click.echo(line)


def find_and_print(
    built: Built,
    policy: str,
    per_worker: int,
    as_json: bool,
    problems: dict[str, Unservable],
    order: OrderPolicy,
) -> None:
    workload = built.workload
    unlimited = ample_slots(workload)
    ample = (
        "a slot for every schedule"
        if unlimited == len(workload.schedules)
        else f"{AMPLE_DEMAND_FACTOR} x the demand"
    )

    runs: list[float] = []  # the ERROR seconds of each run so far

    def progress(slots: int, error_s: float, complete: bool) -> None:
        if as_json:
            return
        # A first run in ERROR names what no count serves; the search then
        # starts over the others, with a run of ample slots for them first.
        others_first = len(runs) == 1 and runs[0] > 0
        runs.append(error_s)
        if others_first:
            click.echo(
                f"  then over the other schedules: first a run with {counted(slots, 'slot')} "
                "(ample for them), then the counts from their demand up:",
                err=True,
            )
        what = ample if len(runs) == 1 else ("slots" if slots != 1 else "slot")
        shown = f"{slots:>6} {what}"
        if complete:
            click.echo(f"  {shown}: ERROR {error_s:.0f} s", err=True)
        else:
            click.echo(f"  {shown}: ERROR (stopped at the first)", err=True)

    if not as_json:
        shown = f"; {format_order(order)}" if policy == "dgs" else ""
        summary = workload_summary(workload, searching=True)
        click.echo(f"{summary}, {built.first_line_notes()}{shown}")
        click.echo(
            f"  first a run with {counted(unlimited, 'slot')} ({ample}: what no slot "
            "count can serve is in ERROR there), then the counts from the demand up:",
            err=True,
        )
    search = find_slots(workload, policy, per_worker=per_worker, progress=progress, order=order)
    if as_json:
        click.echo(json.dumps(_search_json(built, search, policy, order, problems), indent=2))
    elif search.slots is None:
        window_h = (workload.horizon_s - workload.effective_warmup()) / 3600
        click.echo(
            f"no slot count keeps every schedule out of ERROR: with {ample} "
            f"({unlimited} slots), over the {window_h:.3g} h after warm-up:"
        )
        for name, error_s in search.unservable.items():
            why = (
                f"{problems[name].reason}: {problems[name].detail}"
                if name in problems
                else "run-time variance or its constraints"
            )
            click.echo(f"  {name}: in ERROR {seconds_text(error_s)} ({why})")
        others = search.others
        if others is not None:
            rest = len(workload.schedules) - len(search.unservable)
            if others.slots is None:
                click.echo(f"nor the {counted(rest, 'other schedule')}: see them with --json")
            else:
                kept = counted(others.slots, "slot")
                click.echo(
                    f"{policy}: {kept} {'keeps' if others.slots == 1 else 'keep'} "
                    f"the {counted(rest, 'other schedule')} out of ERROR after warm-up"
                )
    else:
        kept = counted(search.slots, "slot")
        verb = "keeps" if search.slots == 1 else "keep"
        click.echo(f"{policy}: {kept} {verb} every schedule out of ERROR after warm-up")
        echo_if(bunching_note(search.slots, workload.load() * workload.slots))
        sample = built.sample
        if sample is not None and sample.sampled:
            click.echo(_fleet_line(sample, search.slots, workload.load() * workload.slots))
        assert search.result is not None
        click.echo(format_table([search.result]))
        echo_if(wasted_note([search.result]))
    sys.exit(0 if search.slots is not None else 1)


#: An answer this many times the demand or more is explained (:func:`bunching_note`).
BUNCHING_FACTOR = 1.5


def seconds_text(seconds: float) -> str:
    """``451 s``, or ``0.3 s`` for less than one (not ``0 s``)."""
    return f"{seconds:.0f} s" if seconds >= 1 or seconds == 0 else f"{seconds:.1g} s"


def bunching_note(slots: int, demand: float) -> str | None:
    """Why ``slots`` is well above the demand (the slots busy on average), when it is."""
    if slots < BUNCHING_FACTOR * max(demand, 1.0):
        return None
    return (
        f"({slots} slots against a demand of {demand:.3g}: the demand is the slots busy "
        "on average; runs whose deadlines fall together (cron times, windows shorter "
        "than the runs' spread, schedules added at once with equal periods) need more "
        "slots at once)"
    )


def _fleet_line(sample: FleetSample, slots: int, demand: float) -> str:
    """The sample's answer as the whole fleet's: a range, as coarse as one
    sample slot scaled up (a larger ``--sample`` narrows it)."""
    low, high = sample.fleet_slot_range(slots, demand)
    head = f"on a sample of {len(sample.entries)} of {sample.total} schedules: "
    if low == high:
        return f"{head}about {high} slots for the whole fleet"
    return (
        f"{head}the whole fleet needs {low} to {high} slots (the sample's {slots} scaled "
        f"by {sample.total}/{len(sample.entries)}, and its demand, "
        f"{demand * sample.total / len(sample.entries):.2f} slots, rounded up); "
        "a larger --sample narrows it"
    )


def _search_json(
    built: Built,
    search: SlotSearch,
    policy: str,
    order: OrderPolicy,
    problems: dict[str, Unservable],
) -> dict[str, Any]:
    """``--find-slots --json``'s document; with a sample, ``fleet_slots``: the
    answer scaled to the whole fleet, and ``fleet_slots_at_least``: the low end
    of the fleet counts the sample's answer stands for."""
    doc: dict[str, Any] = {
        "policy": policy,
        **({"order": asdict(order)} if policy == "dgs" else {}),
        "slots": search.slots,
        "tried": {str(k): v for k, v in sorted(search.tried.items())},
        "unservable": {
            name: {
                "error_s": error_s,
                "reason": problems[name].reason if name in problems else None,
                "detail": problems[name].detail if name in problems else None,
            }
            for name, error_s in search.unservable.items()
        },
        "result": search.result.to_dict() if search.result else None,
    }
    if search.others is not None:  # the answer for the schedules besides the unservable
        doc["others_slots"] = search.others.slots
    if built.source:
        doc["source"] = built.source
    sample = built.sample
    if sample is not None and sample.sampled and search.slots is not None:
        demand = built.workload.load() * built.workload.slots
        low, high = sample.fleet_slot_range(search.slots, demand)
        doc["fleet_slots"], doc["fleet_slots_at_least"] = high, low
    return doc
