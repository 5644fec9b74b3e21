"""Curation on Ray against curation on one machine: same files, same worker
count, same run.

* one machine: ``agl_fast.pipeline.curate`` with W worker processes of one
  native thread (``agl-fast curate --workers W --threads 1``);
* Ray: ``agl_fast.ray.curate_ray`` on a local cluster of ``max(W)`` CPUs
  with a pool of W CPU actors of one CPU each (``agl-fast curate --engine
  ray --workers W --threads 1``), each running the batch function behind
  its supervised child (``--no-isolate``: in the actor itself). The cluster
  is started before the timing; the actors, their children, the Parquet
  writes and the final table are inside it.

The corpus is the two real AGL1K recordings (``../shared/agl1k``, MP3 44.1
kHz stereo, about two minutes each) linked ``--files`` times and read for
their first 60 s (``max_duration=60``): 60 s clips, decoded to 32 kHz stereo
with levels and the quality filters. Each row is run on half the files and
on all of them: the difference gives the steady cost per file (the slope)
apart from the fixed cost of a run (starting workers or actors, the final
table). Prints a Markdown table (whole-run files/s and x real time; steady
files/s; fixed seconds; Ray's overhead per file, in worker-milliseconds,
against one machine at the same W; steady throughput per worker against
one machine's at the smallest W; the in-run rate, files per second from
the first finished batch of a whole run to its last, which no start-up
cost enters, and the same ratio of it), then what 100 workers would take
for a million 60 s clips at the measured steady cost per file. ``--repeat
N`` keeps the fastest of N runs per size, engines alternating. The slope
takes a run's fixed cost to be the same at both sizes: on a loaded machine
half a second of difference in starting the actors moves it by 40 ms per
file, which the in-run rate does not see.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import agl_fast
from agl_fast.pipeline import CurateConfig, Inputs, curate

SHARED = Path(__file__).resolve().parents[2] / "shared" / "agl1k"


#: Seconds read per file.
CLIP_S = 60.0


def corpus(directory: Path, n: int) -> Inputs:
    mp3s = sorted(SHARED.glob("*.mp3"))
    if not mp3s:
        sys.exit(f"no MP3s in {SHARED}")
    for p in mp3s:
        if agl_fast.load(p, sr=None)[0].shape[-1] / 44100 < CLIP_S:
            sys.exit(f"{p} is shorter than {CLIP_S:g} s")
    paths = []
    for i in range(n):
        src = mp3s[i % len(mp3s)]
        dst = directory / f"{i:04d}_{src.name}"
        dst.symlink_to(src)
        paths.append(str(dst))
    return Inputs([Path(p).name for p in paths], paths)


def run(
    engine: str, inputs: Inputs, workers: int, batch_size: int, isolate: bool
) -> tuple[float, float]:
    """Wall seconds of one run into a fresh directory, and its files per
    second from its first finished batch to its last (the in-run rate)."""
    cfg = CurateConfig(
        sr=32000, workers=workers, threads=1, batch_size=batch_size, max_duration=CLIP_S
    )
    done: list[tuple[float, int]] = []

    def progress(files: int, audio_s: float) -> None:
        done.append((time.perf_counter(), files))

    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        if engine == "ray":
            from agl_fast.ray import RayOptions, curate_ray

            opts = RayOptions(isolate=isolate)
            summary = curate_ray(inputs, out, cfg, options=opts, progress=progress)
        else:
            summary = curate(inputs, out, cfg, progress=progress)
        wall = time.perf_counter() - t0
    if summary["counts"]["failed"] or summary["counts"]["rows"] != len(inputs.keys):
        sys.exit(f"{engine}: {summary['counts']}")
    after_first = sum(f for _, f in done[1:])
    return wall, after_first / (done[-1][0] - done[0][0]) if after_first else float("nan")


def _sub(inputs: Inputs, n: int) -> Inputs:
    return Inputs(inputs.keys[:n], inputs.paths[:n])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=24, help="60 s clips in the corpus")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--batch-size", type=int, default=2, help="files per batch")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest counts")
    ap.add_argument("--no-isolate", action="store_true", help="Ray actors without a child")
    args = ap.parse_args()
    import ray

    logging.getLogger("ray").setLevel(logging.ERROR)
    ray.init(num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    isolate = not args.no_isolate
    n, half = args.files, args.files // 2
    best: dict[tuple[str, int, int], float] = {}
    in_run: dict[tuple[str, int], float] = {}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as d:
        inputs = corpus(Path(d), n)
        # Warm up both engines (imports, fork server, Ray's worker pool).
        for engine in ("local", "ray"):
            run(engine, _sub(inputs, 4), 1, args.batch_size, isolate)
        for w in args.workers:
            for _ in range(args.repeat):
                for size in (half, n):
                    for engine in ("local", "ray"):
                        t, rate = run(engine, _sub(inputs, size), w, args.batch_size, isolate)
                        key = (engine, w, size)
                        best[key] = min(best.get(key, float("inf")), t)
                        if size == n:
                            in_run[engine, w] = max(in_run.get((engine, w), 0.0), rate)
                load.append(os.getloadavg()[0])
    ray.shutdown()

    def slope(engine: str, w: int) -> float:
        return (best[engine, w, n] - best[engine, w, half]) / (n - half)

    w1 = min(args.workers)
    base = 1 / slope("local", w1) / w1
    print(f"{n} clips of {CLIP_S:g} s (MP3 44.1 kHz stereo -> 32 kHz stereo), ", end="")
    print(f"Ray actors {'with' if isolate else 'without'} a supervised child; ", end="")
    print(f"load average (1 min) {min(load):.1f} to {max(load):.1f} over {os.cpu_count()} CPUs\n")
    in_base = in_run["local", w1] / w1
    print(
        "| workers | engine | wall s | files/s | x real time | steady files/s | fixed s "
        f"| Ray overhead worker-ms/file | steady files/s per worker / one machine's at {w1} "
        f"| in-run files/s | in-run per worker / one machine's at {w1} |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for w in args.workers:
        for engine in ("local", "ray"):
            t, c = best[engine, w, n], slope(engine, w)
            over = (c - slope("local", w)) * w * 1e3 if engine == "ray" else None
            r = in_run[engine, w]
            print(
                f"| {w} | {'one machine' if engine == 'local' else 'Ray'} | {t:.2f} | "
                f"{n / t:.2f} | {n * CLIP_S / t:.0f} | {1 / c:.2f} | {t - n * c:.2f} | "
                f"{'' if over is None else f'{over:.0f}'} | {1 / c / w / base:.2f} | "
                f"{r:.2f} | {r / w / in_base:.2f} |"
            )
    wmax = max(args.workers)
    per_clip = slope("ray", wmax) * wmax  # worker-seconds per 60 s clip on Ray
    hours = 1e6 * per_clip / 100 / 3600
    print(
        f"\nA million {CLIP_S:g} s clips on 100 Ray workers at {per_clip:.3f} worker-s per "
        f"clip (measured at {wmax}): {hours:.1f} h, with linear scaling"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
