"""Soak mode of the fault suite: random faults for a set time, then the checker.

    make soak                      # SOAK_SECONDS=120 by default
    .venv/bin/python -m tests.faults.soak --seconds 600 --schedules 3 --seed 7
    make soak SOAK_ARGS="--topology sentinel"   # celery-dgs's Redis behind Sentinel
    make soak SOAK_ARGS="--schedules 6 --window 2"   # beat holds 2 of the 6

A real Redis-compatible server, a SQLite store, four workers (solo, prefork
with two children, solo behind a fault proxy, solo), two beats (one leads),
``--schedules`` schedules that run back to back (0.2 .. 2 s runs). One fault
at a time, picked at random: SIGKILL of a worker or of a prefork child,
SIGSTOP of a worker past the steal bound then SIGCONT, warm or cold worker
shutdown, the proxied worker cut off from Redis or slowed down, SIGKILL or
SIGSTOP of the leader beat, Redis killed and restarted without persistence.
A killed or shut-down process is started again. After the time is up the
faults stop, the cluster settles, and the checker reads the whole history.

``--topology sentinel``: celery-dgs's Redis is a Sentinel deployment (a
primary, two replicas, three sentinels; tests/support/redis_sentinel.py) and
the broker a single server. The faults there are the ones above that do not
need the proxy (a sentinel-discovered primary cannot be proxied per worker),
plus the primary SIGKILLed (and started again as a replica) and ``SENTINEL
FAILOVER``; steal_delay is 4 s, above ping_interval + the window in which a
demoted primary still takes writes (docs/guarantees.md).

Prints runs checked, faults injected and violations found; exits 1 on any
violation (the logs and the history stay in the printed directory).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import redis

from celery_dgs.embedded import RedisServerProcess
from tests.e2e.harness import wait_for
from tests.faults.cluster import BOUNDS, FaultCluster
from tests.faults.proxy import TcpProxy
from tests.support.processes import alive
from tests.support.redis_sentinel import RedisSentinelProcesses, restart_as_replica

WORKERS = {  # key: (node, pool, concurrency, behind the proxy)
    "w1": ("node1", "solo", 1, False),
    "w2": ("node2", "prefork", 2, False),
    "w3": ("node3", "solo", 1, True),
    "w4": ("node4", "solo", 1, False),
}
#: One tick + the restart grace (a dispatch received during it waits and
#: starts when it ends) + the soak's 2 s slack.
RESTART_BOUND = BOUNDS.tick + BOUNDS.ping_timeout + BOUNDS.steal_delay + 2.0
#: Sentinel topology: the steal delay (see the module docstring), and a fault
#: of the primary's bound: 4 s until a new primary is named + the restart grace
#: + one tick + the soak's 2 s slack.
SENTINEL_STEAL_DELAY = 4.0
FAILOVER_BOUND = 4.0 + BOUNDS.ping_timeout + SENTINEL_STEAL_DELAY + BOUNDS.tick + 2.0
PLAIN_FAULTS = [
    "worker_sigkill",
    "child_sigkill",
    "worker_sigstop",
    "warm_shutdown",
    "cold_shutdown",
    "partition",
    "latency",
    "beat_sigkill",
    "beat_sigstop",
    "redis_restart",
]
SENTINEL_FAULTS = [k for k in PLAIN_FAULTS if k not in ("partition", "latency", "redis_restart")]
SENTINEL_FAULTS += ["primary_sigkill", "sentinel_failover"]


class Soak:
    def __init__(
        self,
        tmp: Path,
        server: RedisServerProcess,
        schedules: int,
        seed: int,
        deployment: RedisSentinelProcesses | None = None,
    ) -> None:
        self.server = server
        self.deployment = deployment
        self.rng = random.Random(seed)
        client = redis.Redis.from_url(server.url)
        kwargs = client.connection_pool.connection_kwargs
        self.proxy = TcpProxy(kwargs["host"], kwargs["port"])
        names = [f"soak_{i}" for i in range(schedules)]
        env = {
            "FAULTS_SOAK_N": str(schedules),
            "FAULTS_SOAK_RUN": "2",
            "E2E_BEAT_LEADER_TIMEOUT": "2",
        }
        # six processes and pool children on a small machine: 2 s of slack, not 1
        bounds = dataclasses.replace(BOUNDS, slack=2.0)
        if deployment is None:
            self.cluster = FaultCluster(tmp, server.url, names, **env)
            self.kinds = PLAIN_FAULTS
        else:
            from tests.sentinel.harness import SentinelFaults

            env["E2E_STEAL_DELAY"] = str(SENTINEL_STEAL_DELAY)
            self.cluster = SentinelFaults(tmp, deployment, server.url, names, **env)
            bounds = dataclasses.replace(bounds, steal_delay=SENTINEL_STEAL_DELAY)
            self.kinds = SENTINEL_FAULTS
        self.cluster.bounds = bounds
        self.injected: Counter[str] = Counter()

    # -- processes ------------------------------------------------------------------
    def start_worker(self, key: str) -> None:
        node, pool, concurrency, proxied = WORKERS[key]
        env = {"E2E_REDIS_URL": self.proxy.url()} if proxied and self.deployment is None else {}
        self.cluster.start_worker(key, node, pool=pool, concurrency=concurrency, env=env)

    def start(self) -> None:
        for key in WORKERS:
            self.start_worker(key)
        self.cluster.start_beat("beat1")
        wait_for(lambda: self.cluster.leader_pid() is not None, 40, "a beat leader")
        self.cluster.start_beat("beat2")

    def leader_key(self) -> str | None:
        pid = self.cluster.leader_pid()
        return next((k for k, p in self.cluster.procs.items() if p.pid == pid), None)

    def live_run_pid(self, host: str) -> int | None:
        ended = {e["run_id"] for e in self.cluster.history.events() if e["kind"] == "end"}
        live = [e for e in self.cluster.starts() if e["host"] == host and e["run_id"] not in ended]
        return live[-1]["pid"] if live else None

    # -- faults ---------------------------------------------------------------------
    def inject(self) -> str:
        c, rng = self.cluster, self.rng
        kind = rng.choice(self.kinds)
        worker = rng.choice(sorted(WORKERS))
        if kind == "worker_sigkill":
            c.sigkill_worker(worker)
            self.start_worker(worker)
        elif kind == "child_sigkill":
            pid = self.live_run_pid("node2")
            if pid is None or pid == c.procs["w2"].pid or not alive(pid):
                return "none"  # (a run whose end is not written yet may have exited)
            c.sigkill([pid])
        elif kind == "worker_sigstop":
            c.sigstop(worker)
            b = c.bounds
            time.sleep(b.ping_timeout + b.steal_delay + rng.uniform(0.5, 1.5))
            c.sigcont(worker)
        elif kind in ("warm_shutdown", "cold_shutdown"):
            with contextlib.suppress(Exception):
                c.shutdown(worker, cold=kind == "cold_shutdown")
            c.procs.pop(worker, None)
            self.start_worker(worker)
        elif kind in ("partition", "latency"):
            c.history.fault(kind, hosts=[WORKERS["w3"][0]])
            if kind == "partition":
                self.proxy.blackhole()
            else:
                self.proxy.set_delay(rng.uniform(0.2, 0.7))
            time.sleep(rng.uniform(2.0, 4.0))
            self.proxy.heal()
            c.history.resumed(hosts=[WORKERS["w3"][0]])
        elif kind in ("beat_sigkill", "beat_sigstop"):
            key = self.leader_key()
            if key is None:
                return "none"
            pid = c.procs[key].pid
            c.history.fault(kind, pids=[pid])
            if kind == "beat_sigkill":
                os.kill(pid, signal.SIGKILL)
                c.procs.pop(key).wait(10)
                c.start_beat(key)
            else:
                os.kill(pid, signal.SIGSTOP)
                time.sleep(rng.uniform(2.5, 4.0))
                os.kill(pid, signal.SIGCONT)
                c.history.resumed(pids=[pid])
        elif kind == "redis_restart":
            c.history.fault(
                kind, hosts=[n for n, *_ in WORKERS.values()], recovery_bound=RESTART_BOUND
            )
            self.server.restart(kill=True)
        elif kind in ("primary_sigkill", "sentinel_failover"):
            self.fail_over(kind)
        return kind

    def fail_over(self, kind: str) -> None:
        """SIGKILL the primary (then start it again, empty, as a replica) or
        ``SENTINEL FAILOVER``; returns once the sentinels see two synced replicas
        again, so that the next fault of the primary can fail over too."""
        d, c = self.deployment, self.cluster
        assert d is not None
        old = d.primary_addr()
        server = d.server_at(old)
        c.history.fault(
            "redis_failover",
            hosts=[n for n, *_ in WORKERS.values()],
            how=kind,
            recovery_bound=FAILOVER_BOUND,
        )
        if kind == "primary_sigkill":
            server.stop(kill=True)
            d.wait_primary_change(old)
            restart_as_replica(d, server)
        else:
            d.failover()
            d.wait_primary_change(old)
        d.wait_ready(60)

    def run(self, seconds: float) -> int:
        self.start()
        wait_for(lambda: len(self.cluster.starts()) >= 3, 60, "the first runs")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            kind = self.inject()
            self.injected[kind] += 1
            print(f"[{seconds - (deadline - time.monotonic()):6.1f}s] fault: {kind}", flush=True)
            # let the cluster recover before the next fault (one fault at a time)
            pause = {
                "redis_restart": RESTART_BOUND,
                "primary_sigkill": FAILOVER_BOUND,
                "sentinel_failover": FAILOVER_BOUND,
            }.get(kind)
            time.sleep(pause or self.cluster.bounds.recovery + self.rng.uniform(0.5, 2.0))
        time.sleep(self.cluster.bounds.recovery)
        final = self.cluster.report()
        settle = time.monotonic() + 5
        while not final.ok and time.monotonic() < settle:
            time.sleep(0.5)
            final = self.cluster.report()
        self.injected.pop("none", None)
        print("faults by kind:", dict(self.injected))
        print(final)
        return 0 if final.ok else 1

    def close(self) -> None:
        for key in list(self.cluster.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.cluster.procs[key].pid, signal.SIGCONT)
        self.cluster.stop_all()
        self.proxy.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 120)))
    parser.add_argument("--schedules", type=int, default=3)
    parser.add_argument(
        "--window",
        type=int,
        help="beat's window of schedules (dgs_schedule_window_size; default: all held)",
    )
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument(
        "--topology",
        choices=["single", "sentinel"],
        default="single",
        help="celery-dgs's Redis: one server, or a Sentinel deployment",
    )
    args = parser.parse_args(argv)
    if args.window is not None:
        os.environ["E2E_SCHEDULE_WINDOW_SIZE"] = str(args.window)
        os.environ["E2E_SCHEDULE_WINDOW"] = "30"
    tmp = Path(tempfile.mkdtemp(prefix="dgs-soak-"))
    print(
        f"soak: {args.seconds:.0f}s, {args.schedules} schedules, seed {args.seed}, "
        f"window {args.window or 'off'}, "
        f"topology {args.topology}, logs and history in {tmp}",
        flush=True,
    )
    server = RedisServerProcess().start()
    deployment = None
    if args.topology == "sentinel":
        deployment = RedisSentinelProcesses(tmp / "sentinel").start()
    soak = Soak(tmp, server, args.schedules, args.seed, deployment)
    try:
        return soak.run(args.seconds)
    finally:
        soak.close()
        server.cleanup()
        if deployment is not None:
            deployment.stop()


if __name__ == "__main__":
    sys.exit(main())
