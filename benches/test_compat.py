"""``agl_fast.compat.librosa`` against librosa itself, every accelerated
function (the rows of ``benches/bench_compat.py``), one thread, same data,
outputs compared first, in alternating rounds.

Each dtype is one benchmark whose figure is the lowest speed-up over its
rows; it fails when any row is below the dtype's gate (``compat_float32``,
``compat_float64`` in ``benches/_gates.py``; the rows without audio input,
``load``, ``get_duration`` and ``filters.mel``, count with float32), naming
every such row.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import bench_compat
from _gates import Gate
from _suite import report

pytestmark = pytest.mark.benchmark(group="compat.librosa", timer=time.process_time)

#: The gate of each dtype's rows.
GATE = {"float32": "compat_float32", "float64": "compat_float64"}
#: (clip seconds, rounds): quick mode, full mode.
QUICK, FULL = (30.0, 3), (60.0, 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_compat_librosa(benchmark: Any, dtype: type, quick: bool, gates: dict[str, Gate]) -> None:
    pytest.importorskip("librosa")
    seconds, rounds = QUICK if quick else FULL
    rows = benchmark.pedantic(
        lambda: bench_compat.measure(seconds, rounds, dtypes=(dtype,)),
        rounds=1,
        iterations=1,
        warmup_rounds=0,
    )
    kind = np.dtype(dtype).name
    name = GATE[kind]
    gate = gates[name]
    ratios = {label: t_lib / t_agl for label, _, t_lib, t_agl, _ in rows}
    lowest = min(ratios, key=ratios.__getitem__)
    below = {k: round(v, 2) for k, v in ratios.items() if not gate.passes(v)}
    figures = {
        "ratio": ratios[lowest],
        "best_peer": "librosa",
        "lowest_row": lowest,
        "rows": len(rows),
        "audio_s": seconds,
        "ratios": ratios,
        "below_gate": below,
        "largest_diff": max(d for *_, d in rows),
    }
    report(
        benchmark,
        f"compat.librosa ({kind}): lowest {lowest}",
        figures,
        [(name, gate, ratios[lowest])],
    )
