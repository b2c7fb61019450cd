"""Beat engines in lock-step on the same fleet: each on its own SQLite store
and key space of the session's real Redis-compatible server, one worker
registered, a shared fake clock. At each step every engine ticks once; the
runs it dispatched start and end at once, with the same duration and
outcome for every engine (drawn from the schedule's name and run number),
so engines that choose alike keep identical stores and go on choosing alike.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import ScheduleSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder


class LockstepBeat:
    """One engine of a lock-step run, with its store and what it sent."""

    def __init__(
        self,
        path: Path,
        client: redis.Redis,
        clock: FakeClock,
        settings: DgsSettings,
        specs: Sequence[ScheduleSpec],
        *,
        slots: int,
    ) -> None:
        self.clock = clock
        self.store = SqlScheduleStore.open(f"sqlite:///{path}", clock=clock)
        self.store.sync(list(specs), clock.now())
        keys = KeySpace(f"ls{uuid.uuid4().hex[:8]}")
        registry = WorkerRegistry(client, keys, ttl=600)
        registry.register(
            WorkerInfo(
                name="celery@w", node="w", queues=("celery",), slots=slots, pool="threads", pid=1
            )
        )
        self.publish = Recorder()
        self.engine = BeatEngine(
            store=self.store,
            leases=RedisLeases(client, keys, ping_timeout=60.0, steal_delay=30.0),
            registry=registry,
            dispatches=DispatchRecords(client, keys),
            publish=self.publish,
            settings=settings,
            clock=clock,
            monotonic=lambda: clock.now().timestamp(),
        )
        self.runs: dict[str, int] = {}
        #: The most schedules the engine held after a step.
        self.most_held = 0

    def step(self, durations: dict[str, float], failure_rate: float) -> list[str]:
        """One tick; the runs it dispatched start and end now. Returns their names."""
        self.engine.tick()
        state = self.engine.state
        self.most_held = max(self.most_held, len(state.tracked) - len(state.checks))
        names = self.publish.names()
        now = self.clock.now()
        for name in names:
            pending = self.engine.state.pending[name]
            self.engine.dispatches.take_back(name, pending.dispatch_id)
            self._run(name, now, durations.get(name, 60.0), failure_rate)
        return names

    def _run(self, name: str, now: datetime, mean_s: float, failure_rate: float) -> None:
        number = self.runs[name] = self.runs.get(name, 0) + 1
        draw = random.Random(f"{name}#{number}")
        duration = mean_s * draw.uniform(0.5, 1.5)
        outcome = "failure" if draw.random() < failure_rate else "success"
        run_id = uuid.uuid4().hex
        token = (self.store.get(name).current_token or 0) + 1
        self.store.record_run_start(
            schedule=name,
            run_id=run_id,
            dispatch_id=None,
            owner_node="w",
            owner_name="celery@w",
            owner_tag=run_id,
            token=token,
            started_at=now,
        )
        ended = now + timedelta(seconds=duration)
        self.store.record_run_end(run_id=run_id, outcome=outcome, ended_at=ended)

    def close(self) -> None:
        self.store.close()


def lockstep(
    beats: Sequence[LockstepBeat],
    clock: FakeClock,
    *,
    steps: int,
    step_s: float,
    durations: dict[str, float],
    failure_rate: float = 0.0,
) -> list[list[list[str]]]:
    """Run ``steps`` steps ``step_s`` apart; per engine, the names each step dispatched."""
    sent: list[list[list[str]]] = [[] for _ in beats]
    for beat in beats:
        beat.engine.load()
    for _ in range(steps):
        for i, beat in enumerate(beats):
            sent[i].append(beat.step(durations, failure_rate))
        clock.advance(timedelta(seconds=step_s))
    return sent
