"""The start-up budget of ``python -m agl_fast.compat.librosa``: an empty
script (``import librosa``) under the runner against the same script run
plain, whole processes taking turns (``benches/bench_startup.py``).

The runner imports nothing the script does not import (``install()``
patches each librosa module as it is imported), so its cost is its own few
modules. Gates (``benches/_gates.py``): the median over pairs of the extra
CPU time (user + system: robust to other jobs on a shared machine, as the
suite's other clocks) within ``startup_overhead_cpu_ms`` and of the extra
peak resident memory within ``startup_overhead_mb``; the wall-clock
overhead is reported. Other interpreters (another environment with another
librosa) are added with ``AGL_FAST_BENCH_PYTHONS`` (paths separated by
``os.pathsep``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import bench_startup
from _gates import MB, Gate
from _suite import report

PYTHONS = [sys.executable] + [
    p for p in os.environ.get("AGL_FAST_BENCH_PYTHONS", "").split(os.pathsep) if p
]
#: Pairs of runs: quick mode, full mode.
QUICK, FULL = 10, 30


@pytest.mark.benchmark(group="start-up", timer=time.perf_counter)
@pytest.mark.parametrize("python", PYTHONS, ids=lambda p: Path(p).parent.parent.name)
def test_runner_start_up(benchmark: Any, python: str, quick: bool, gates: dict[str, Gate]) -> None:
    pytest.importorskip("librosa")
    label = bench_startup.versions(python)
    pairs = QUICK if quick else FULL
    p = benchmark.pedantic(
        lambda: bench_startup.measure(python, pairs), rounds=1, iterations=1, warmup_rounds=0
    )
    figures = {
        "interpreter": label,
        "pairs": p.pairs,
        "plain_wall_ms": p.a.wall * 1e3,
        "runner_wall_ms": p.b.wall * 1e3,
        "overhead_wall_ms": p.wall_over * 1e3,
        "overhead_cpu_ms": p.cpu_over * 1e3,
        "plain_peak_mb": p.a.peak / MB,
        "runner_peak_mb": p.b.peak / MB,
        "overhead_mb": p.peak_over / MB,
    }
    cpu, mem = "startup_overhead_cpu_ms", "startup_overhead_mb"
    report(
        benchmark,
        f"python -m agl_fast.compat.librosa empty.py ({label})",
        figures,
        [(cpu, gates[cpu], p.cpu_over * 1e3), (mem, gates[mem], p.peak_over / MB)],
    )
