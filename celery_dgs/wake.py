"""A freed slot wakes the leading beat: workers signal, beat waits on the signal.

Beat sleeps between rounds until its next start time, capped by
``dgs_store_poll_interval``. A slot freed by a short run would wait out that
sleep. Instead, workers push a signal to one Redis list and the leading beat
waits on the list with ``BLPOP`` for at most its sleep: the next round
starts within milliseconds of the signal. The round reads the leases and the
store as always; the signal carries nothing but "look now".

The lease release pushes it in the same call as the release itself
(``release.lua``), after the run's outcome is stored. :meth:`BeatWake.notify`
pushes it when a worker registers, and when a run's lease was taken over.

Layout: ``KeySpace.beat_wake()``, a list of at most :data:`MAX_SIGNALS`
entries that expires :data:`SIGNAL_TTL_MS` after the last push (no beat
waiting: nothing piles up). After a wake, beat deletes the rest, so a burst of
run ends during one round costs one more round, not one per run. A signal
deleted that way is never lost work: every signal is pushed with (or after)
the change it announces, so the round that follows the wake sees it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import redis

from .keys import BEAT_WAKE_MAX_SIGNALS, BEAT_WAKE_TTL_MS, KeySpace

logger = logging.getLogger(__name__)

#: Signals kept in the list (more add nothing: one wake is enough).
MAX_SIGNALS = BEAT_WAKE_MAX_SIGNALS
#: The list expires this long after the last push.
SIGNAL_TTL_MS = BEAT_WAKE_TTL_MS
#: Shortest wait worth a ``BLPOP`` (Redis reads a timeout of 0 as "forever").
MIN_WAIT_S = 0.002


class BeatWake:
    """The signal between the workers (:meth:`notify`) and the leading beat
    (:meth:`wait`), on ``client``.

    ``max_block_s`` caps one ``BLPOP`` below the client's socket timeout (a
    longer block would read as a dead connection). ``sleep`` is the fallback
    wait when Redis fails."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        *,
        max_block_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.key = keys.beat_wake()
        self.max_block_s = max_block_s
        self._sleep = sleep
        self._monotonic = monotonic
        #: True while :meth:`wait` blocks on Redis (a signal handler that runs
        #: then must leave the client's connections open: the wait holds one).
        self.waiting = False

    def notify(self) -> None:
        """Signal a free slot (one round trip; failures are logged at DEBUG:
        beat then finds the slot at its next round, as without the signal)."""
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.lpush(self.key, "1")
            pipe.ltrim(self.key, 0, MAX_SIGNALS - 1)
            pipe.pexpire(self.key, SIGNAL_TTL_MS)
            pipe.execute()
        except redis.RedisError as exc:
            logger.debug("celery-dgs: signalling beat failed: %s", exc)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a signal; True if one came. Redis
        failing turns the rest of the wait into a plain sleep."""
        deadline = self._monotonic() + timeout_s
        while True:
            left = deadline - self._monotonic()
            if left < MIN_WAIT_S:
                return False
            self.waiting = True
            try:
                popped = self.client.blpop([self.key], timeout=min(left, self.max_block_s))
                if popped is not None:
                    self.client.delete(self.key)
                    return True
            except redis.RedisError as exc:
                logger.debug("celery-dgs: waiting for a free slot's signal failed: %s", exc)
                self._sleep(max(0.0, deadline - self._monotonic()))
                return False
            finally:
                self.waiting = False
