"""``beat`` in the simulator: what Celery beat does (:class:`BeatPolicy`).

Every schedule is enqueued at fixed times (every period from its phase, or
at each cron time) into a FIFO queue per pool served by free worker slots; a
message whose schedule is running when a slot takes it is skipped (Celery's
"skip if running", a lock in the task). No blackouts, retries or node
constraints; a deferred check is one message at its time (a task sent with a
countdown).
"""

from __future__ import annotations

from collections import deque
from datetime import timedelta

from ..core.cron import next_cron_time
from ..core.spec import CheckSpec, CronSpec
from .policy import Policy
from .state import FIRE, PolicyHost


class BeatPolicy(Policy):
    """Celery beat: fixed enqueue times, FIFO queues, skip if running."""

    name = "beat"

    def __init__(self, sim: PolicyHost) -> None:
        super().__init__(sim)
        self.queues: dict[str, deque[tuple[float, str]]] = {}
        self.queued = 0
        for s in sim.workload.schedules:
            self.queues.setdefault(s.spec.pool or sim.workload.default_queue, deque())
            sim.schedule_event(self._first_fire(s.name), FIRE, s.name)

    def _first_fire(self, name: str) -> float:
        st = self.sim.states[name]
        spec = st.sched.spec
        anchor = st.stats.last_good_start_at or self.sim.at(0.0)
        if isinstance(spec, CheckSpec) and st.stats.next_target_at is not None:
            return max(0.0, self.sim.rel(st.stats.next_target_at))
        if isinstance(spec, CronSpec):
            return self.sim.rel(next_cron_time(spec.cron_schedule, spec.tz, self.sim.at(0.0)))
        return self.sim.rel(anchor) + st.period  # Celery: last_run_at + run_every

    def fire(self, name: str, now: float) -> None:
        st = self.sim.states[name]
        spec = st.sched.spec
        self.queues[spec.pool or self.sim.workload.default_queue].append((now, name))
        self.queued += 1
        if isinstance(spec, CheckSpec):
            return  # one message at its time: a Celery task sent with a countdown
        if isinstance(spec, CronSpec):
            nxt = self.sim.rel(
                next_cron_time(spec.cron_schedule, spec.tz, self.sim.at(now) + timedelta(seconds=1))
            )
        else:
            nxt = now + st.period
        self.sim.schedule_event(nxt, FIRE, name)

    def dispatch(self, now: float) -> None:
        if not self.queued:
            return
        sim = self.sim
        for worker in sim.worker_slots:
            while worker.free > 0 and self.queued:
                queue = self._oldest(worker.queues)
                if queue is None:
                    break
                _, name = queue.popleft()
                self.queued -= 1
                if sim.states[name].running_since is not None:
                    sim.tally.skipped += 1  # Celery's "skip if running" (a lock in the task)
                    continue
                worker.free -= 1
                sim.start_run(name, worker.name, now, slot_taken=True)
            if not self.queued:
                return

    def _oldest(self, queues: frozenset[str]) -> deque[tuple[float, str]] | None:
        best: deque[tuple[float, str]] | None = None
        for q in queues:
            dq = self.queues.get(q)
            if dq and (best is None or dq[0][0] < best[0][0]):
                best = dq
        return best
