"""Performance benchmarks of celery-dgs: ``make bench`` or ``python -m benchmarks.run``.

Figures are printed, never asserted: the machine they run on is shared and
noisy, so every figure is a median over repeats and is compared with a
baseline measured in the same run.
"""
