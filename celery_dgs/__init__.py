"""celery-dgs: a deadline greedy scheduler for Celery."""

from __future__ import annotations

__version__ = "0.1.0.dev0"
