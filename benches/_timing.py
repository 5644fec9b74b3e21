"""Timing shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_time(
    fn: Callable[[], object], repeat: int = 1, threads: int = 1, *, warmup: bool = False
) -> float:
    """Best of ``repeat`` runs of ``fn`` in seconds.

    One-thread runs are timed in process CPU seconds (what "per core" means,
    and robust to other jobs on the machine); multi-thread runs in wall-clock
    seconds. ``warmup`` runs ``fn`` once first, untimed (plans, pools, caches).
    """
    clock = time.process_time if threads == 1 else time.perf_counter
    if warmup:
        fn()
    best = float("inf")
    for _ in range(repeat):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best
