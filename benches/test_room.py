"""Room acoustics: agl-fast's EDC and decay times against pyrato (plain and
Lundeby + Chu) and against a numba loop a skilled user writes
(``benches/bench_room.py``), one thread, same RIRs, outputs checked first."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import _memory
import agl_fast
import bench_room as br
from _gates import Gate
from _suite import pair_figures, quiet, report, run_pair

pytestmark = pytest.mark.benchmark(group="room", timer=time.process_time)


@pytest.fixture(scope="module")
def rirs(quick: bool) -> np.ndarray:
    return br.make_rirs(500 if quick else 10_000)


def _params(x: np.ndarray, method: str) -> dict[str, np.ndarray]:
    return agl_fast.room_parameters(x, br.SR, method=method, n_threads=1)


def _memory_figures(n_rirs: int, method: str) -> dict[str, Any]:
    mem = _memory.in_fresh_process("room", str(n_rirs), method)
    channels = 2 * n_rirs
    return {
        "memory_method": "peak RSS growth of the call in a fresh process (VmHWM)",
        "peak_rss_bytes": None if mem is None else mem["peak_bytes"],
        "peak_bytes_per_rir_channel": None if mem is None else mem["peak_bytes"] / channels,
    }


@pytest.mark.parametrize("method", ["none", "lundeby_chu"])
def test_room_vs_pyrato(
    benchmark: Any, method: str, rirs: np.ndarray, gates: dict[str, Gate]
) -> None:
    # pyrato's Lundeby + Chu loops over RIRs in Python: a tenth of them.
    x = rirs if method == "none" else rirs[: max(1, len(rirs) // 10)]
    got = _params(x, method)
    if method == "none":
        want = quiet(lambda: br.pyrato_decay_times(x))()
        pairs = [("edt", want[0], 0.015), ("t20", want[1], 0.01), ("t30", want[2], 0.01)]
        peer = quiet(lambda: br.pyrato_decay_times(x))
    else:
        lund = np.stack(quiet(lambda: br.pyrato_lundeby_t20(x))())  # type: ignore[call-overload]
        # noise compensation differs in detail (iteration stops, fit ranges)
        pairs = [("t20", lund, 0.05)]
        peer = quiet(lambda: br.pyrato_lundeby_t20(x))
    for key, ref, rel in pairs:
        ref = np.asarray(ref, dtype=np.float64).reshape(got[key].shape)
        ok = np.isfinite(ref) & np.isfinite(got[key])
        assert ok.mean() > 0.95, f"{key}: too few finite values to compare"
        np.testing.assert_allclose(got[key][ok], ref[ok], rtol=rel, err_msg=key)

    pair = run_pair(benchmark, lambda: _params(x, method), {"pyrato": peer}, rounds=3)
    figures = pair_figures(pair, 2 * len(x), unit="RIR channels")
    figures.update(_memory_figures(len(x), method))
    name = "room_pyrato"
    report(benchmark, f"room: {method} vs pyrato", figures, [(name, gates[name], pair.ratio)])


@pytest.mark.parametrize("method", ["none", "lundeby_chu"])
def test_room_vs_numba(
    benchmark: Any, method: str, rirs: np.ndarray, gates: dict[str, Gate]
) -> None:
    nb = br._numba_rt()
    if nb is None:
        pytest.skip("numba is not installed: no numba peer")
    flat = np.ascontiguousarray(rirs.reshape(-1, br.SR))
    got = nb(flat, float(br.SR))
    p = _params(flat, "none")
    ref = np.stack([p["edt"], p["t20"], p["t30"]], axis=1)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0, equal_nan=True)

    # The peer computes EDT, T20 and T30; agl-fast all nine parameters.
    peer = {"numba": lambda: nb(flat, float(br.SR))}
    pair = run_pair(benchmark, lambda: _params(flat, method), peer, rounds=5)
    figures = pair_figures(pair, flat.shape[0], unit="RIR channels")
    figures.update(_memory_figures(len(rirs), method))
    name = "room_numba"
    report(benchmark, f"room: {method} vs numba", figures, [(name, gates[name], pair.ratio)])
