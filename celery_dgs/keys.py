"""Every Redis key name celery-dgs uses, built in one place under one prefix.

Layout (``P`` is the prefix, ``dgs`` by default; ``{P}`` with ``hash_tag=True``)::

    P:lease:<schedule>     hash   the schedule's lease (owner, pings, token, ...)
    P:token:<schedule>     string fencing-token counter (INCR), never deleted
    P:leases               zset   schedule -> last_ping_at (ms): the lease index
    P:leases:gen           string lease generation: bumped when a lease is granted,
                                  taken over, released or dropped (beat re-reads owners)
    P:dispatch:<schedule>  hash   the schedule's current dispatch record
    P:dispatches           zset   schedule -> expires_at (ms): the dispatch index
    P:worker:<name>        hash   a registered worker (expires with its TTL)
    P:workers              zset   worker name -> expires_at (ms): the worker index
    P:workers:gen          string worker generation: bumped when a worker registers,
                                  deregisters or expires (beat re-reads the workers)
    P:leader:<role>        hash   a leader lease (role ``beat``: the dispatching beat)
    P:leader_token:<role>  string the leader's fencing-token counter (INCR), never deleted
    P:epoch                hash   run_id of the Redis server last seen by a lease
                                  grant, and since when (ms); see acquire.lua
    P:beat:wake            list   a worker's "a slot is free" signals to the leading
                                  beat (celery_dgs/wake.py): at most
                                  BEAT_WAKE_MAX_SIGNALS, expiring BEAT_WAKE_TTL_MS
                                  after the last push
    P:beat:pace            string the leading beat's dispatch pace over the last
                                  minute, JSON (celery_dgs/beat_pace.py)
    P:beat:overload        string what the leading beat's fewest_errors order makes
                                  wait, JSON (celery_dgs/overload_board.py)
    P:outcomes             list   run outcomes a worker could not store, JSON, for the
                                  leading beat to store (celery_dgs/outcome_spool.py)
    P:outcomes:refused     list   kept outcomes the store refused while it answered

Schedule and worker names are used verbatim after the fixed part, so a name
may contain ``:`` without clashing with another key.

Redis Cluster: the lease scripts touch a schedule's keys *and* the shared
indexes in one atomic call, and the sweep builds lease keys from
:meth:`KeySpace.lease_prefix` inside the script. Both only work when every key
lives in the same slot, so on a cluster pass ``hash_tag=True``: the prefix is
then wrapped in ``{...}`` and every key hashes to one slot (one shard holds all
celery-dgs keys; at thousands of schedules that is far below one shard's
capacity). On a single server or Sentinel the tag changes nothing but the name.
The setting is ``dgs_redis_cluster_hash_tag``; every client gets its key space
from :meth:`celery_dgs.settings.DgsSettings.keyspace`.
"""

from __future__ import annotations

DEFAULT_PREFIX = "dgs"

#: Signals kept in the ``P:beat:wake`` list (more add nothing: one wake is enough).
BEAT_WAKE_MAX_SIGNALS = 16
#: The ``P:beat:wake`` list expires this long after the last push (ms).
BEAT_WAKE_TTL_MS = 60_000

_GLOB_SPECIALS = "*?[]\\"


class KeySpace:
    """Builds key names under ``prefix``; see the module docstring for the layout."""

    def __init__(self, prefix: str = DEFAULT_PREFIX, *, hash_tag: bool = False) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError("key prefix must be a non-empty string")
        if hash_tag and ("{" in prefix or "}" in prefix):
            raise ValueError(f"key prefix {prefix!r} must not contain braces with hash_tag=True")
        self.prefix = prefix
        self.hash_tag = hash_tag
        self._base = f"{{{prefix}}}" if hash_tag else prefix

    def __repr__(self) -> str:
        return f"KeySpace({self.prefix!r}, hash_tag={self.hash_tag})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeySpace) and (self.prefix, self.hash_tag) == (
            other.prefix,
            other.hash_tag,
        )

    def __hash__(self) -> int:
        return hash((self.prefix, self.hash_tag))

    @staticmethod
    def _name(kind: str, name: str) -> str:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind} name must be a non-empty string, got {name!r}")
        return name

    # -- leases ---------------------------------------------------------------
    def lease_prefix(self) -> str:
        """``lease(name) == lease_prefix() + name`` (the sweep script relies on it)."""
        return f"{self._base}:lease:"

    def lease(self, schedule: str) -> str:
        return self.lease_prefix() + self._name("schedule", schedule)

    def token(self, schedule: str) -> str:
        return f"{self._base}:token:{self._name('schedule', schedule)}"

    def lease_index(self) -> str:
        return f"{self._base}:leases"

    def lease_generation(self) -> str:
        """``lease_index() + ":gen"`` (the lease scripts derive it from the index key)."""
        return f"{self.lease_index()}:gen"

    # -- dispatch records -----------------------------------------------------
    def dispatch_prefix(self) -> str:
        """``dispatch(name) == dispatch_prefix() + name``."""
        return f"{self._base}:dispatch:"

    def dispatch(self, schedule: str) -> str:
        return self.dispatch_prefix() + self._name("schedule", schedule)

    def dispatch_index(self) -> str:
        return f"{self._base}:dispatches"

    # -- worker registry ------------------------------------------------------
    def worker_prefix(self) -> str:
        """``worker(name) == worker_prefix() + name``."""
        return f"{self._base}:worker:"

    def worker(self, name: str) -> str:
        return self.worker_prefix() + self._name("worker", name)

    def worker_index(self) -> str:
        return f"{self._base}:workers"

    def worker_generation(self) -> str:
        """Bumped by the registry scripts when the set of workers changes."""
        return f"{self.worker_index()}:gen"

    def epoch(self) -> str:
        """The Redis ``run_id`` last seen by a grant: it vanishes with the data."""
        return f"{self._base}:epoch"

    # -- other ----------------------------------------------------------------
    def leader(self, role: str = "beat") -> str:
        """A leader lease (e.g. the active beat when two run)."""
        return f"{self._base}:leader:{self._name('role', role)}"

    def leader_token(self, role: str = "beat") -> str:
        """The leader lease's token counter (strictly increasing, never deleted)."""
        return f"{self._base}:leader_token:{self._name('role', role)}"

    def beat_wake(self) -> str:
        """The list workers push to when a slot frees; the leading beat waits on it."""
        return f"{self._base}:beat:wake"

    def beat_pace(self) -> str:
        """The leading beat's dispatch pace (JSON), for ``status`` and the page."""
        return f"{self._base}:beat:pace"

    def beat_overload(self) -> str:
        """What the leading beat's ``fewest_errors`` order makes wait (JSON)."""
        return f"{self._base}:beat:overload"

    def outcome_spool(self) -> str:
        """The list of run outcomes a worker could not store (JSON each); the
        leading beat stores them once the database answers."""
        return f"{self._base}:outcomes"

    def outcome_spool_refused(self) -> str:
        """Kept run outcomes the store refused while it answered otherwise."""
        return f"{self._base}:outcomes:refused"

    def pattern(self) -> str:
        """A ``SCAN MATCH`` pattern matching every key of this key space, and no other."""
        escaped = "".join(f"\\{c}" if c in _GLOB_SPECIALS else c for c in self._base)
        return f"{escaped}:*"
