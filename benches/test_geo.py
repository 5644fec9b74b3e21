"""Geo kernels: agl-fast's haversine against its best peer (a numba loop, and
numpy vectorised) and its geodesic against the best peer installed
(``pyproj.Geod.inv``, else geographiclib per pair), one thread, same pairs,
outputs checked first (``benches/bench_geo.py``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import _memory
import bench_geo as bg
from _gates import Gate
from _suite import pair_figures, report, run_pair
from agl_fast import geo

pytestmark = pytest.mark.benchmark(group="geo", timer=time.process_time)

Pairs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@pytest.fixture(scope="module")
def global_pairs(quick: bool) -> Pairs:
    n = 1_000_000 if quick else 10_000_000
    rng = np.random.default_rng(0)
    lat1 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lat2 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    return lat1, rng.uniform(-180, 180, n), lat2, rng.uniform(-180, 180, n)


def _memory_figures(kernel: str, n: int) -> dict[str, Any]:
    mem = _memory.in_fresh_process("geo", kernel, str(n))
    return {
        "memory_method": "peak RSS growth of the call in a fresh process (VmHWM)",
        "peak_rss_bytes": None if mem is None else mem["peak_bytes"],
        "peak_bytes_per_pair": None if mem is None else mem["peak_bytes"] / n,
    }


def test_haversine(benchmark: Any, global_pairs: Pairs, gates: dict[str, Gate]) -> None:
    pts = global_pairs
    peers: dict[str, Any] = {"numpy": lambda: bg._np_haversine(*pts)}
    nb = bg._numba_haversine()
    if nb is not None:
        peers["numba"] = lambda: nb(*pts, bg.R_KM)

    def ours() -> np.ndarray:
        return geo.haversine(*pts, n_threads=1)

    # Outputs first, away from the antipode (where the textbook formula
    # loses up to 0.2 m to rounding).
    ref = ours()
    far = ref < np.pi * bg.R_KM - 1.0
    for name, fn in peers.items():
        err = float(np.abs(fn()[far] - ref[far]).max())
        assert err < 1e-6, f"{name} haversine differs from agl-fast by {err} km"
    pair = run_pair(benchmark, ours, peers, rounds=5)
    figures = pair_figures(pair, pts[0].size, unit="pairs")
    figures.update(_memory_figures("haversine", pts[0].size))
    report(benchmark, "geo: haversine", figures, [("haversine", gates["haversine"], pair.ratio)])


@pytest.mark.parametrize("data", ["global", "AGL1K-like"])
def test_geodesic(
    benchmark: Any, data: str, global_pairs: Pairs, quick: bool, gates: dict[str, Gate]
) -> None:
    pts = (
        global_pairs
        if data == "global"
        else bg._agl1k_like(global_pairs[0].size, np.random.default_rng(1))
    )
    name, peer, per_pair = bg._geodesic_peer()
    # A peer that runs pair by pair in Python gets the first pairs only;
    # the ratio is then in pairs per second.
    n_peer = 5_000 if quick else 50_000
    sub = tuple(x[:n_peer] for x in pts) if per_pair else pts
    err = float(np.abs(peer(*sub) - geo.geodesic(*sub, n_threads=1)).max())
    assert err < 1e-9, f"{name} differs from agl-fast geodesic by {err} km"

    pair = run_pair(
        benchmark, lambda: geo.geodesic(*pts, n_threads=1), {name: lambda: peer(*sub)}, rounds=5
    )
    n, n_sub = pts[0].size, sub[0].size
    figures = pair_figures(pair, n, unit="pairs")
    figures["peer_per_s"] = n_sub / pair.peers[name]
    figures["ratio"] = figures["agl_fast_per_s"] / figures["peer_per_s"]
    figures.update(_memory_figures("geodesic", n))
    gate = "geodesic_geographiclib" if per_pair else "geodesic_pyproj"
    report(benchmark, f"geo: geodesic, {data}", figures, [(gate, gates[gate], figures["ratio"])])
