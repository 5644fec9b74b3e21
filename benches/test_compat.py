"""``agl_fast.compat.librosa`` against librosa itself, every accelerated
function (the rows of ``benches/bench_compat.py``), one thread, same data,
outputs compared first, in alternating rounds.

Each dtype is one benchmark whose figures are the lowest speed-up over its
rows and the speed-up of the soxr_hq ``resample`` row (handed to librosa,
whose soxr call gives its exact output: level by construction); it fails
when a row is below its gate
(``compat_float32``, ``compat_float64`` for every row but that one,
``compat_resample_soxr`` for it, in ``benches/_gates.py``; the rows without
audio input, ``load``, ``get_duration`` and ``filters.mel``, count with
float32), naming every such row.
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

#: The gate of each dtype's rows, and of the soxr_hq resample row.
GATE = {"float32": "compat_float32", "float64": "compat_float64"}
SOXR_GATE = "compat_resample_soxr"
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
    ratios = {label: t_lib / t_agl for label, _, t_lib, t_agl, _ in rows}
    soxr = f"resample ({kind})"
    gate_of = {k: gates[SOXR_GATE if k == soxr else name] for k in ratios}
    others = {k: v for k, v in ratios.items() if k != soxr}
    lowest = min(others, key=others.__getitem__)
    below = {k: round(v, 2) for k, v in ratios.items() if not gate_of[k].passes(v)}
    figures = {
        "ratio": ratios[lowest],
        "best_peer": "librosa",
        "lowest_row": lowest,
        "resample_soxr": ratios.get(soxr),
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
        [(name, gates[name], ratios[lowest]), (SOXR_GATE, gates[SOXR_GATE], ratios.get(soxr))],
    )
