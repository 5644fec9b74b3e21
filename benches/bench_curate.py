"""Curation benchmark: the batch function of agl-fast curate against librosa.

MP3 (44.1 kHz stereo) -> 32 kHz -> levels and quality filters, same files,
same run.

The one-thread table (the issue's figure) times, in process
CPU seconds on one thread, the code every ``agl-fast curate`` worker runs:

* ``batch``: :class:`agl_fast.pipeline.BatchProcessor` built from the run's
  :class:`~agl_fast.pipeline.CurateConfig` (``batch_config()``, as a worker
  builds it) and called on the same input tables of ``batch_size`` files
  that ``curate`` sends to its workers: Rust decode, downmix and resampling
  (``load_arrays``, which also measures the levels), the ``levels`` and
  ``quality`` stages, the output table.
* ``decode``: its decoding step alone at the source rate
  (``load_arrays(sr=None)`` on the same batches: the MP3 decoder, the
  downmix for ``mono``, and the finiteness pass that measures the levels).
* ``decode + resample``: the same step at 32 kHz (``load_arrays(sr=32000)``
  with the run's ``res_type``), what the stages then receive.
* ``librosa``: ``librosa.load(sr=32000, mono=..., res_type='soxr_hq')``
  (libsndfile's mpg123 decoder, soxr) then the same peak / RMS /
  clipped-share reductions in numpy and the same four filters on the (mean)
  channel with numpy, ``scipy.signal.welch``, ``librosa.stft`` and
  scikit-maad (as ``benches/bench_quality.py`` computes them).

The four take turns within every round (``--repeat`` rounds, the best of
each counts) after a warm-up on one file. Two channel set-ups: ``mono`` (the
issue's reference, ``librosa.load``'s default and ``agl-fast curate
--mono``: channels averaged at the source rate, then resampled) and
``stereo`` (``curate``'s default: both channels resampled, levels over
both, the quality filters on their mean).

The end-to-end table runs ``agl_fast.pipeline.curate`` itself with
``--workers`` worker processes of one thread (worker start, Parquet parts,
the final table and the summary inside the timing): x real time per core
(wall clock) and per CPU second (this process and its workers), best of
``--repeat`` runs.

The corpus is the two real AGL1K recordings (``../shared/agl1k``) linked
repeatedly to about ``--hours`` of audio (``--quick``: about 9 minutes).
The pytest-benchmark suite (``benches/test_curate.py``) gates the
one-thread ratio of the batch function to librosa (mono) and the peak RSS
of a ``curate`` worker.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# One-thread rows: keep BLAS/OpenMP pools (numpy, scipy, soxr) and the
# native pool at one thread.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "AGL_FAST_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import agl_fast  # noqa: E402
from _timing import best_times_interleaved  # noqa: E402
from agl_fast.pipeline import BatchProcessor, CurateConfig, Inputs, curate  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "agl1k"
CLIP = 0.999


def corpus(directory: Path, target_s: float) -> tuple[list[str], float]:
    """Links to the AGL1K MP3s in ``directory``, repeated to about
    ``target_s`` seconds of audio; the paths and their total duration."""
    mp3s = sorted(SHARED.glob("*.mp3"))
    if not mp3s:
        sys.exit(f"no MP3s in {SHARED}")
    lengths = [agl_fast.load(p, sr=None)[0].shape[-1] / 44100 for p in mp3s]
    paths, total, i = [], 0.0, 0
    while total < target_s:
        src = mp3s[i % len(mp3s)]
        dst = directory / f"{i:04d}_{src.name}"
        dst.symlink_to(src)
        paths.append(str(dst))
        total += lengths[i % len(mp3s)]
        i += 1
    return paths, total


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _librosa_one(path: str, mono: bool) -> tuple[float, ...]:
    import librosa

    from bench_quality import reference_clip_metrics

    y, _ = librosa.load(path, sr=32000, mono=mono, res_type="soxr_hq")
    a = np.abs(y)
    levels = (
        float(a.max()),
        float(np.sqrt(np.mean(y.astype(np.float64) ** 2))),
        float(np.mean(a >= CLIP)),
    )
    m = reference_clip_metrics(y if mono else np.ascontiguousarray(y.mean(axis=0)), 32000)
    return levels + tuple(m.values())


def one_thread_runs(paths: list[str], cfg: CurateConfig) -> dict[str, Callable[[], object]]:
    """The timed functions of the one-thread table over ``paths``, split
    into the batches ``curate`` hands its workers."""
    bcfg = cfg.batch_config()
    proc = BatchProcessor(bcfg)  # what each worker builds once
    size = cfg.batch_size
    groups = [paths[s : s + size] for s in range(0, len(paths), size)]
    tables = [pa.table({"key": [Path(p).name for p in g], "path": g}) for g in groups]

    def load(sr: int | None) -> Callable[[], object]:
        def run() -> object:
            for g in groups:
                _, meta = agl_fast.load_arrays(
                    g,
                    sr=sr,
                    mono=bcfg.mono,
                    max_duration=bcfg.max_duration,
                    res_type=bcfg.res_type,
                    n_threads=bcfg.threads,
                )
                if meta.column("error_type").null_count != meta.num_rows:
                    sys.exit(f"decoding failed: {meta.column('error_message').to_pylist()}")
            return None

        return run

    def batch() -> object:
        for t in tables:
            rows = proc(t)
            if rows.column("error_type").null_count != rows.num_rows:
                sys.exit(f"the batch function failed: {rows.column('error_message').to_pylist()}")
        return None

    def librosa() -> object:
        for p in paths:
            _librosa_one(p, bcfg.mono)
        return None

    # Warm up on one file (imports, filter kernels, FFT plans), not the corpus.
    agl_fast.load_arrays(paths[:1], sr=bcfg.sr, mono=bcfg.mono, n_threads=bcfg.threads)
    proc(tables[0].slice(0, 1))
    _librosa_one(paths[0], bcfg.mono)
    return {
        "decode": load(None),
        "decode + resample": load(bcfg.sr),
        "batch": batch,
        "librosa": librosa,
    }


def run_curate(paths: list[str], workers: int, mono: bool) -> tuple[float, float]:
    """Wall and CPU seconds (this process and the workers) of ``curate`` with
    ``workers`` worker processes of one thread."""
    inputs = Inputs([Path(p).name for p in paths], list(paths))
    cfg = CurateConfig(sr=32000, mono=mono, workers=workers, threads=1)
    with tempfile.TemporaryDirectory() as out:
        c0 = _cpu(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        summary = curate(inputs, out, cfg)
        wall = time.perf_counter() - t0
        cpu = _cpu(resource.RUSAGE_SELF) - c0 + summary["this_run"]["worker_cpu_seconds"]
    if summary["counts"]["failed"]:
        sys.exit(f"curate failed on {summary['counts']['errors_by_reason']}")
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="about 9 minutes of audio")
    ap.add_argument("--hours", type=float, default=2.0, help="hours of audio in the corpus")
    ap.add_argument(
        "--channels", choices=["mono", "stereo", "both"], default="both", help="set-ups measured"
    )
    ap.add_argument(
        "--workers",
        type=int,
        nargs="*",
        default=[1, 2],
        help="worker processes of the end-to-end curate rows (none: skip them)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the fastest of each counts")
    args = ap.parse_args()
    target = 540.0 if args.quick else args.hours * 3600
    setups = ["mono", "stereo"] if args.channels == "both" else [args.channels]
    one: dict[str, dict[str, float]] = {}
    e2e: list[tuple[str, int, float, float]] = []
    with tempfile.TemporaryDirectory() as d:
        paths, total = corpus(Path(d), target)
        for setup in setups:
            mono = setup == "mono"
            cfg = CurateConfig(sr=32000, mono=mono, workers=1, threads=1)
            one[setup] = best_times_interleaved(one_thread_runs(paths, cfg), args.repeat)
            if args.workers:
                run_curate(paths[:1], 1, mono)  # start the fork server outside the timing
            for w in args.workers:
                runs = [run_curate(paths, w, mono) for _ in range(args.repeat)]
                wall, cpu = (min(r[k] for r in runs) for k in (0, 1))
                e2e.append((setup, w, total / wall / w, total / cpu))
    print(
        f"\n{len(paths)} MP3 files, {total / 3600:.2f} h of 44.1 kHz stereo -> 32 kHz, "
        f"levels + the four quality filters; one thread, process CPU time, best of "
        f"{args.repeat} alternating rounds\n"
    )
    print("| channels | step | x real time / core | share of the batch | vs librosa |")
    print("|---|---|---:|---:|---:|")
    for setup, t in one.items():
        for step in ("decode", "decode + resample", "batch", "librosa"):
            share = f"{t[step] / t['batch']:.0%}" if step != "librosa" else ""
            print(
                f"| {setup} | {step} | {total / t[step]:,.0f} | {share} | "
                f"{t['librosa'] / t[step]:.2f} |"
            )
    if e2e:
        print("\n`curate` end to end (worker processes of one thread)\n")
        print("| channels | workers | x real time / core (wall) | x real time / CPU s |")
        print("|---|---:|---:|---:|")
        for setup, w, per_core, per_cpu in e2e:
            print(f"| {setup} | {w} | {per_core:,.0f} | {per_cpu:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
