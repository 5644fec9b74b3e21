"""Timing shared by the benchmarks."""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable


def steady_heap() -> bool:
    """Keep freed memory in the process (glibc only: ``mallopt`` with
    ``M_MMAP_MAX=0`` and an unbounded ``M_TRIM_THRESHOLD``), so that a
    buffer of the same size allocated again is not faulted in anew.

    Without it the system time of a row depends on which allocations ran
    before it in the round: glibc's dynamic mmap threshold moves with every
    large ``free``. Measured on the STFT peers (16 clips x 60 s): 0.0-0.44 s
    of system time for the same call. Returns whether it applied.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    m_trim_threshold, m_mmap_max = -1, -4
    return bool(mallopt(m_mmap_max, 0)) and bool(mallopt(m_trim_threshold, 2**31 - 1))


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


def best_times_interleaved(
    fns: dict[str, Callable[[], object]],
    repeat: int = 1,
    *,
    wall: bool = False,
    warmup: bool = True,
) -> dict[str, float]:
    """Best of ``repeat`` one-thread runs of each function, in process CPU
    seconds, the functions taking turns within every round (after one
    untimed warm-up run each). Compared implementations then see the same
    spells of a machine whose speed drifts, so their ratio holds even when
    their absolute times do not.

    ``wall=True`` times in wall-clock seconds instead: for comparing one
    thread with several threads of the same implementation (process CPU time
    adds up the time of every thread). ``warmup=False`` skips the warm-up
    runs, for callers that have just run every function (an output check).
    """
    clock = time.perf_counter if wall else time.process_time
    for fn in fns.values() if warmup else ():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t = clock()
            fn()
            best[name] = min(best[name], clock() - t)
    return best
