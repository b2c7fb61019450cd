"""``python -m celery_dgs.sim``: the simulator without a Celery app (workload file
or generated workload); same options as ``celery dgs simulate``."""

from __future__ import annotations

from ..cli.simulate import simulate

if __name__ == "__main__":
    simulate(prog_name="python -m celery_dgs.sim")
