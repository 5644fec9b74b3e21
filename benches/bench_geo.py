"""Benchmark: agl-fast geo kernels against numpy and geopy (same data, same run),
and the end-to-end evaluation of a synthetic prediction file.

    python benches/bench_geo.py [--quick] [--n N] [--gate RATIO]

geopy is timed on a subsample and its time extrapolated linearly to N pairs
(geopy runs one pair at a time in Python). Ratios are per core: agl-fast's
time is multiplied by its thread count.
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
from agl_fast import geo, get_num_threads


def _time(f, repeat=1):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def _np_haversine(lat1, lon1, lat2, lon2, r=6371.0088):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    a = (
        np.sin((p2 - p1) / 2) ** 2
        + np.cos(p1) * np.cos(p2) * np.sin(np.radians(lon2 - lon1) / 2) ** 2
    )
    return 2 * r * np.arcsin(np.sqrt(a))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--gate", type=float, default=None, help="min geodesic/geopy per-core ratio")
    args = ap.parse_args()
    n = args.n or (1_000_000 if args.quick else 10_000_000)
    n_geopy = 2_000 if args.quick else 20_000
    threads = get_num_threads()
    rng = np.random.default_rng(0)
    lat1 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lat2 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon1, lon2 = rng.uniform(-180, 180, n), rng.uniform(-180, 180, n)

    from geopy.distance import geodesic as geopy_geodesic

    t_hav = _time(lambda: geo.haversine(lat1, lon1, lat2, lon2), 3)
    t_np = _time(lambda: _np_haversine(lat1, lon1, lat2, lon2), 3)
    t_geo = _time(lambda: geo.geodesic(lat1, lon1, lat2, lon2))
    pts = list(zip(lat1[:n_geopy], lon1[:n_geopy], lat2[:n_geopy], lon2[:n_geopy], strict=False))
    t_gp = _time(lambda: [geopy_geodesic((a, b), (c, d)).km for a, b, c, d in pts]) * n / n_geopy

    rows = [
        ("haversine", "numpy", t_hav, t_np),
        ("geodesic", f"geopy (extrapolated from {n_geopy} pairs)", t_geo, t_gp),
    ]
    print(f"\n{n:,} pairs, agl-fast on {threads} thread(s)\n")
    print("| kernel | reference | agl-fast s | reference s | Mpairs/s/core | ratio per core |")
    print("|---|---|---:|---:|---:|---:|")
    ratios = {}
    for k, ref, ta, tr in rows:
        ratio = tr / (ta * threads)
        ratios[k] = ratio
        print(
            f"| {k} | {ref} | {ta:.3f} | {tr:.3f} | {n / ta / threads / 1e6:.2f} | {ratio:.1f}x |"
        )

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
    if args.gate is not None and ratios["geodesic"] < args.gate:
        print(f"FAIL: geodesic ratio {ratios['geodesic']:.1f} < gate {args.gate}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
