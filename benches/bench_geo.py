"""Benchmark: agl-fast geo kernels against their best peers (same data, same
run), and the end-to-end evaluation of a synthetic prediction file.

    python benches/bench_geo.py [--quick] [--n N]

Haversine: agl-fast on one thread against a numba loop (``@njit``, no
``parallel``, no ``fastmath``; the best a skilled user writes, when numba
is installed) and numpy vectorised, best of ``--repeat`` rounds in which
the three take turns, in process CPU seconds; outputs are checked against
each other first. Geodesic: agl-fast on one thread against the best peer
installed, ``pyproj.Geod.inv`` (the C geodesic library over whole arrays)
when pyproj is there, else geographiclib's ``Inverse`` per pair with the
distance-only mask (geopy wraps it, with more overhead), on two data sets:
random global pairs and AGL1K-like ones (a true location and a guess 1 km
to 20,000 km away, log-uniform). The per-pair peer runs on the first
``--n-peer`` pairs of the same data, in the same alternating rounds, and is
compared in pairs per second; outputs are checked against it first. All
figures are per core. The pytest-benchmark suite (``benches/test_geo.py``)
gates both ratios.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from agl_fast import evaluate as ev
from agl_fast import geo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_times_interleaved

R_KM = 6371.0088


def _numba_haversine():
    """The textbook formula as a compiled scalar loop, or None without numba."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(parallel=False, fastmath=False, cache=False)
    def hav(lat1, lon1, lat2, lon2, r):
        out = np.empty(lat1.size)
        for i in range(lat1.size):
            p1 = np.radians(lat1[i])
            p2 = np.radians(lat2[i])
            sp = np.sin(0.5 * (p2 - p1))
            sl = np.sin(0.5 * np.radians(lon2[i] - lon1[i]))
            h = min(max(sp * sp + np.cos(p1) * np.cos(p2) * sl * sl, 0.0), 1.0)
            out[i] = 2.0 * r * np.arcsin(np.sqrt(h))
        return out

    return hav


def _np_haversine(lat1, lon1, lat2, lon2, r=R_KM):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    a = (
        np.sin((p2 - p1) / 2) ** 2
        + np.cos(p1) * np.cos(p2) * np.sin(np.radians(lon2 - lon1) / 2) ** 2
    )
    return 2 * r * np.arcsin(np.sqrt(a))


def _agl1k_like(n, rng):
    """A true location spread over the globe and a guess at a distance
    log-uniform in [1, 20000] km in a uniform direction (on the sphere), as
    the predictions of an audio geo-localization model scatter."""
    lat1 = np.degrees(np.arcsin(rng.uniform(-0.8, 0.95, n)))
    lon1 = rng.uniform(-180, 180, n)
    d = np.exp(rng.uniform(np.log(1.0), np.log(20_000.0), n)) / R_KM
    az = rng.uniform(0, 2 * np.pi, n)
    p1, l1 = np.radians(lat1), np.radians(lon1)
    p2 = np.arcsin(np.sin(p1) * np.cos(d) + np.cos(p1) * np.sin(d) * np.cos(az))
    dl = np.arctan2(np.sin(az) * np.sin(d) * np.cos(p1), np.cos(d) - np.sin(p1) * np.sin(p2))
    return lat1, lon1, np.degrees(p2), (np.degrees(l1 + dl) + 180) % 360 - 180


def _geodesic_peer():
    """(name, km function over arrays, whether it runs one pair at a time)."""
    try:
        from pyproj import Geod
    except ImportError:
        from geographiclib.geodesic import Geodesic

        g = Geodesic.WGS84

        def per_pair(lat1, lon1, lat2, lon2):
            pts = zip(lat1.tolist(), lon1.tolist(), lat2.tolist(), lon2.tolist(), strict=True)
            s12 = [g.Inverse(a, b, c, d, Geodesic.DISTANCE)["s12"] for a, b, c, d in pts]
            return np.array(s12) / 1e3

        return "geographiclib Inverse per pair", per_pair, True
    geod = Geod(ellps="WGS84")

    def arrays(lat1, lon1, lat2, lon2):
        return geod.inv(lon1, lat1, lon2, lat2)[2] / 1e3

    return "pyproj Geod.inv", arrays, False


def _bench_geodesic(data, n_peer, repeat):
    """Check agl-fast against the best peer, then time both in alternating
    rounds; returns (peer name, agl-fast pairs/s, peer pairs/s)."""
    name, peer, per_pair = _geodesic_peer()
    n = data[0].size
    sub = tuple(x[: min(n_peer, n)] if per_pair else x for x in data)
    err = float(np.abs(peer(*sub) - geo.geodesic(*sub, n_threads=1)).max())
    if not err < 1e-9:
        raise SystemExit(f"FAIL: {name} differs from agl-fast geodesic by {err} km")
    fns = {"agl-fast": lambda: geo.geodesic(*data, n_threads=1), name: lambda: peer(*sub)}
    t = best_times_interleaved(fns, repeat=repeat)
    return name, n / t["agl-fast"], sub[0].size / t[name]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5, help="alternating rounds")
    ap.add_argument(
        "--n-peer", type=int, default=None, help="pairs for a geodesic peer that runs per pair"
    )
    args = ap.parse_args()
    n = args.n or (1_000_000 if args.quick else 10_000_000)
    n_peer = args.n_peer or (5_000 if args.quick else 50_000)
    rng = np.random.default_rng(0)
    lat1 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lat2 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon1, lon2 = rng.uniform(-180, 180, n), rng.uniform(-180, 180, n)

    nb = _numba_haversine()
    fns = {"agl-fast": lambda: geo.haversine(lat1, lon1, lat2, lon2, n_threads=1)}
    if nb is not None:
        fns["numba"] = lambda: nb(lat1, lon1, lat2, lon2, R_KM)
    fns["numpy"] = lambda: _np_haversine(lat1, lon1, lat2, lon2)
    # Outputs first: every peer agrees with agl-fast away from the antipode
    # (where the textbook formula loses up to 0.2 m to rounding).
    ref = fns["agl-fast"]()
    far = ref < np.pi * R_KM - 1.0
    for name, fn in fns.items():
        err = float(np.abs(fn()[far] - ref[far]).max())
        if not err < 1e-6:
            print(f"FAIL: {name} haversine differs from agl-fast by {err} km")
            return 1
    t = best_times_interleaved(fns, repeat=args.repeat)
    peers = [k for k in fns if k != "agl-fast"]
    best_peer = min(peers, key=lambda k: t[k])

    geod = {
        "global": _bench_geodesic((lat1, lon1, lat2, lon2), n_peer, args.repeat),
        "AGL1K-like": _bench_geodesic(_agl1k_like(n, rng), n_peer, args.repeat),
    }

    print(
        f"\n{n:,} pairs, one thread, process CPU time (best of {args.repeat} alternating rounds)\n"
    )
    print("| kernel | implementation | s | M pairs/s per core | agl-fast ratio |")
    print("|---|---|---:|---:|---:|")
    for k in fns:
        ratio = t[k] / t["agl-fast"]
        print(f"| haversine | {k} | {t[k]:.3f} | {n / t[k] / 1e6:.1f} | {ratio:.2f}x |")
    print("\n| geodesic pairs | implementation | M pairs/s per core | agl-fast ratio |")
    print("|---|---|---:|---:|")
    for data, (peer, r_agl, r_peer) in geod.items():
        print(f"| {data} | agl-fast | {r_agl / 1e6:.2f} | 1.00x |")
        print(f"| {data} | {peer} | {r_peer / 1e6:.4f} | {r_agl / r_peer:.1f}x |")
    ratios = {
        "haversine": t[best_peer] / t["agl-fast"],
        "geodesic": min(r_agl / r_peer for _, r_agl, r_peer in geod.values()),
    }
    print(f"\nhaversine against the best peer ({best_peer}): {ratios['haversine']:.2f}x")
    peer = geod["global"][0]
    print(f"geodesic against the best peer ({peer}), lower of the two: {ratios['geodesic']:.1f}x")

    # End to end: a synthetic truth and prediction file of n_clips clips.
    n_clips = 10_000 if args.quick else 100_000
    keys = [f"clip_{i}" for i in range(n_clips)]
    truth = pd.DataFrame(
        {
            "key": keys,
            "latitude": lat1[:n_clips],
            "longitude": lon1[:n_clips],
            "city": "Paris",
            "country": "France",
            "continent": "Europe",
            "human_sounds": rng.random(n_clips),
            **{
                c: rng.random(n_clips)
                for c in (
                    "animal",
                    "music",
                    "natural_sounds",
                    "channel",
                    "environment_and_background",
                    "sounds_of_things",
                )
            },
        }
    )
    pred = pd.DataFrame(
        {
            "question_id": keys,
            "predicted_latitude": [f"{x:.4f}" for x in lat2[:n_clips]],
            "predicted_longitude": [f"{x:.4f}" for x in lon2[:n_clips]],
            "predicted_city": "Paris",
            "predicted_country": "France",
            "predicted_continent": "Europe",
        }
    )
    with tempfile.TemporaryDirectory() as td:
        p = Path(td) / "synthetic.parquet"
        pred.to_parquet(p)
        for mode in ("agl1k", "strict"):
            t = time.perf_counter()
            df, _ = ev.read_predictions(p)
            scored, _ = ev.score(df, truth, mode=mode)
            tidy = ev.tidy_metrics("synthetic", scored, n_boot=1000)
            dt = time.perf_counter() - t
            print(
                f"\nend-to-end {mode}: {n_clips:,} clips, read + score + all metrics + "
                f"1000-resample bootstrap CIs ({len(tidy)} rows): {dt:.1f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
