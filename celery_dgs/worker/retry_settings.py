"""This worker's retry settings against the ones beat adopted.

A failing run's end is written by the worker that ran it, with the worker's
own ``dgs_retry_backoff`` and ``dgs_retry_duration_fraction``: the kept next
start of a schedule that failed waits this worker's retry step. Beat records
the settings it adopted in the store (:mod:`celery_dgs.store.kept_ladder`).
A worker whose settings differ logs one warning naming both: at its start
(:func:`check_at_start`) and, while it ends failing runs, after reading the
store's settings again at most every :data:`RECHECK_S` seconds
(:func:`check_after_failure`); once per distinct pair of settings. It keeps
writing with its own settings. A store that holds none (beat never started
on it) gives no warning; a store that cannot be read (unreachable, not
migrated to 0015) gives a debug line, and the run is not held up.

The watches live as long as the process; a prefork child inherits its
parent's, so the pair the main process warned about at the start is not
warned about again by each child.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from ..runtime import Runtime
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from ..store.kept_ladder import (
    KeptLadderReader,
    describe_fingerprint,
    describe_ladder,
    ladder_fingerprint,
)
from ..store.sql_kept_ladder import read_fingerprint_at

logger = logging.getLogger("celery_dgs.worker")

#: Seconds between two reads of the store's settings after failing runs.
RECHECK_S = 120.0


def mismatch_line(ladder: tuple[timedelta, ...], stored: str) -> str:
    """The warning of a worker whose ladder is not the store's ``stored`` fingerprint."""
    return (
        f"celery-dgs: this worker's retry settings {describe_ladder(ladder)} differ from "
        f"beat's {describe_fingerprint(stored)} (the store's kept settings): the failing "
        "runs it ends wait its steps, not beat's; give beat and the workers the same settings"
    )


class LadderWatch:
    """One worker's retry ladder against the fingerprint its store holds,
    read at most every ``every_s`` seconds of ``monotonic`` time."""

    def __init__(
        self,
        ladder: tuple[timedelta, ...],
        *,
        monotonic: Callable[[], float] = time.monotonic,
        every_s: float = RECHECK_S,
    ) -> None:
        self.ladder = ladder
        self.fingerprint = ladder_fingerprint(ladder)
        self._monotonic = monotonic
        self._every_s = every_s
        self._read_at: float | None = None
        #: The store's fingerprints already warned about.
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def check(self, read: Callable[[], str | None], *, force: bool = False) -> str | None:
        """Read the store's fingerprint with ``read`` when ``every_s`` has
        passed since the last read (or with ``force``): the warning line when
        it differs from this worker's and was not warned about yet, else
        ``None``. Also ``None`` while another thread checks, and when ``read``
        raises (a debug line; the next read waits ``every_s`` all the same)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            now = self._monotonic()
            if not force and self._read_at is not None and now - self._read_at < self._every_s:
                return None
            self._read_at = now
            try:
                stored = read()
            except Exception as exc:
                logger.debug("celery-dgs: the store's retry settings could not be read: %r", exc)
                return None
            if stored is None or stored == self.fingerprint or stored in self._warned:
                return None
            self._warned.add(stored)
            return mismatch_line(self.ladder, stored)
        finally:
            self._lock.release()


_watches: dict[tuple[str, str], LadderWatch] = {}
_watches_lock = threading.Lock()


def watch_for(settings: DgsSettings) -> LadderWatch:
    """This process's watch of ``settings``' ladder on its store."""
    ladder = settings.retry_ladder
    key = (settings.database_url, ladder_fingerprint(ladder))
    with _watches_lock:
        watch = _watches.get(key)
        if watch is None:
            watch = _watches[key] = LadderWatch(ladder)
        return watch


def stored_fingerprint_of(store: ScheduleStore) -> str | None:
    """The fingerprint ``store`` holds; ``None`` for a store that cannot tell."""
    return store.stored_ladder_fingerprint() if isinstance(store, KeptLadderReader) else None


def _warn(line: str | None) -> None:
    if line is not None:
        logger.warning("%s", line)


def check_at_start(settings: DgsSettings) -> None:
    """Compare with the store's settings now, read on an engine of its own
    (closed after the read; the schema is not upgraded). Never raises."""
    try:
        watch = watch_for(settings)
        _warn(watch.check(lambda: read_fingerprint_at(settings.database_url), force=True))
    except Exception:
        logger.debug("celery-dgs: comparing the retry settings failed", exc_info=True)


def check_after_failure(rt: Runtime) -> None:
    """After a failing run's end: compare with the store's settings, read
    again through ``rt.store`` when :data:`RECHECK_S` has passed. Never raises."""
    try:
        _warn(watch_for(rt.settings).check(lambda: stored_fingerprint_of(rt.store)))
    except Exception:
        logger.debug("celery-dgs: comparing the retry settings failed", exc_info=True)
