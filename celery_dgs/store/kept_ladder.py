"""The retry settings a store's kept start times were written with.

After a failure, a schedule's kept ``next_can_start_at`` waits the retry
ladder's step (``dgs_retry_backoff``, ``dgs_retry_duration_fraction``: a
:class:`~celery_dgs.core.timing.RetryLadder`). The store remembers the
ladder's :func:`ladder_fingerprint` beside the kept columns; a store given
another ladder (:meth:`ScheduleStore.adopt_retry_ladder
<celery_dgs.store.base.ScheduleStore.adopt_retry_ladder>`) rewrites the kept
columns of the rows a retry step can move, and reports it as a
:class:`LadderAdoption`. A :class:`KeptLadderReader` tells the fingerprint it
holds (a worker compares it with its own settings).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

from ..core.timing import DEFAULT_RETRY_DURATION_FRACTION, RetryLadder

#: The key of the fingerprint in ``dgs_kept_settings``.
RETRY_LADDER_SETTING = "retry_ladder"


def ladder_settings(ladder: Sequence[timedelta]) -> tuple[tuple[float, ...], float]:
    """The ladder's steps in seconds and its duration fraction (a plain
    sequence: :data:`~celery_dgs.core.timing.DEFAULT_RETRY_DURATION_FRACTION`,
    as :func:`~celery_dgs.core.timing.retry_delay` reads it)."""
    fraction = getattr(ladder, "duration_fraction", DEFAULT_RETRY_DURATION_FRACTION)
    return tuple(step.total_seconds() for step in ladder), float(fraction)


def ladder_fingerprint(ladder: Sequence[timedelta]) -> str:
    """The ladder as canonical JSON: the settings' names, the steps in
    seconds and the duration fraction. Two ladders that retry alike have the
    same fingerprint."""
    steps, fraction = ladder_settings(ladder)
    return json.dumps(
        {"dgs_retry_backoff": list(steps), "dgs_retry_duration_fraction": fraction},
        sort_keys=True,
        separators=(",", ":"),
    )


def describe_ladder(ladder: Sequence[timedelta]) -> str:
    """``dgs_retry_backoff=(300, 3600), dgs_retry_duration_fraction=1``."""
    steps, fraction = ladder_settings(ladder)
    backoff = ", ".join(f"{s:g}" for s in steps)
    if len(steps) == 1:
        backoff += ","
    return f"dgs_retry_backoff=({backoff}), dgs_retry_duration_fraction={fraction:g}"


def describe_fingerprint(fingerprint: str) -> str:
    """A stored :func:`ladder_fingerprint` in :func:`describe_ladder`'s form;
    the text itself when it is not a fingerprint."""
    try:
        found = json.loads(fingerprint)
        steps = [timedelta(seconds=float(s)) for s in found["dgs_retry_backoff"]]
        ladder = RetryLadder(steps, float(found["dgs_retry_duration_fraction"]))
    except (ValueError, TypeError, KeyError, OverflowError):
        return fingerprint
    return describe_ladder(ladder)


@runtime_checkable
class KeptLadderReader(Protocol):
    """A store that tells which retry ladder its kept columns were written with."""

    def stored_ladder_fingerprint(self) -> str | None:
        """The :func:`ladder_fingerprint` the store recorded last
        (``adopt_retry_ladder``); ``None``: none recorded."""
        ...


@dataclass(frozen=True)
class LadderAdoption:
    """What :meth:`~celery_dgs.store.base.ScheduleStore.adopt_retry_ladder` did.

    ``previous``: the fingerprint the store held (``None``: none recorded);
    ``rewritten``: how many rows' kept columns it rewrote, ``None`` when the
    store already held this ladder's fingerprint (nothing written)."""

    ladder: tuple[timedelta, ...]
    previous: str | None
    rewritten: int | None

    @property
    def changed(self) -> bool:
        """Whether the store recorded a new fingerprint."""
        return self.rewritten is not None

    def __str__(self) -> str:
        settings = describe_ladder(self.ladder)
        if self.rewritten is None:
            return f"kept start times already written for {settings}"
        if not self.rewritten:
            return f"retry settings recorded ({settings}): no failing schedule to re-time"
        return f"kept start times of {self.rewritten} failing schedules rewritten for {settings}"
