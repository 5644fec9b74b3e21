"""Curation cost per file against the size of the run: ``agl-fast curate``
(:func:`agl_fast.pipeline.curate`, worker processes, durable progress,
Parquet parts, the final table and the summary inside the timing) over N
hard links to one short MP3, for a small and a large N, same workers.

The clip is ``--seconds`` of the first AGL1K recording (``../shared/agl1k``)
encoded once with ffmpeg (44.1 kHz stereo MP3), so every file costs the
same and the only thing that changes between the two runs is their length.
The wall time per file of the large run should equal the small run's: a
cost that grows with the rows already done (a pending table concatenated
or re-scanned per batch, a resume set rebuilt) shows as a ratio above 1.

The pytest-benchmark suite runs the same comparison outside quick mode
(``benches/test_curate.py``) and fails when the ratio exceeds its gate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "AGL_FAST_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

from agl_fast.pipeline import CurateConfig, curate, discover  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "agl1k"


def make_clip(path: Path, seconds: float) -> None:
    """``seconds`` of the first AGL1K MP3 as a 44.1 kHz stereo MP3."""
    src = sorted(SHARED.glob("*.mp3"))
    if not src:
        sys.exit(f"no MP3s in {SHARED}")
    if shutil.which("ffmpeg") is None:
        sys.exit("ffmpeg is needed to cut the clip")
    cmd = ["ffmpeg", "-v", "error", "-y", "-i", str(src[0]), "-t", f"{seconds:g}"]
    cmd += ["-ac", "2", "-ar", "44100", "-b:a", "128k", str(path)]
    subprocess.run(cmd, check=True)


def linked_corpus(clip: Path, directory: Path, n: int) -> None:
    """``n`` hard links to ``clip`` in ``directory``."""
    directory.mkdir(parents=True)
    for i in range(n):
        os.link(clip, directory / f"{i:06d}.mp3")


def time_run(directory: Path, out: Path, workers: int) -> float:
    """Wall seconds of one ``curate`` run over ``directory`` into ``out``."""
    inputs = discover(str(directory))
    cfg = CurateConfig(sr=32000, workers=workers, threads=1)
    t0 = time.perf_counter()
    summary = curate(inputs, out, cfg)
    wall = time.perf_counter() - t0
    if summary["counts"]["rows"] != len(inputs.keys) or summary["counts"]["failed"]:
        sys.exit(f"curate did not give one good row per file: {summary['counts']}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--small", type=int, default=2_000, help="files of the small run")
    ap.add_argument("--large", type=int, default=20_000, help="files of the large run")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of the clip")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of both runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        clip = tmp / "clip.mp3"
        make_clip(clip, args.seconds)
        linked_corpus(clip, tmp / "small", args.small)
        linked_corpus(clip, tmp / "large", args.large)
        time_run(tmp / "small", tmp / "warm", args.workers)  # fork server, caches
        shutil.rmtree(tmp / "warm")
        small = time_run(tmp / "small", tmp / "out-small", args.workers) / args.small
        large = time_run(tmp / "large", tmp / "out-large", args.workers) / args.large
    ratio = large / small
    print(f"\n{args.seconds:g} s MP3 clip, {args.workers} workers of one thread\n")
    print("| files | ms per file (wall) |")
    print("|---:|---:|")
    print(f"| {args.small:,} | {small * 1e3:.2f} |")
    print(f"| {args.large:,} | {large * 1e3:.2f} |")
    print(f"\nratio {args.large:,} / {args.small:,} files: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
