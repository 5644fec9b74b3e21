"""Fingerprint and pairing workloads shared by ``benches/test_fingerprint.py``
and the scale run.

The pairing scale run uses synthetic fingerprints (uniform random 22-bit
hashes at the density real recordings give, anchor frames in order), with
planted duplicates: every ``DUP_EVERY``-th clip is a copy of the clip before
it shifted by a few seconds, with half of its hashes dropped (a re-encoded,
trimmed copy). The run must find exactly the planted pairs.

    python benches/bench_fingerprint.py pair --clips 50000 --seconds 30
    python benches/bench_fingerprint.py pair --clips 50000 --seconds 30 --shards 4

prints one JSON line: wall and CPU seconds of :func:`agl_fast.fingerprint.pair`,
the process's resident memory before the call and its peak during it
(``VmHWM``, reset just before), and what was found.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from agl_fast import fingerprint as fpm

#: Hashes per second of audio the synthetic fingerprints carry by default
#: (the two real recordings give 29.6 and 38.8, see docs/fingerprint.md;
#: ``--hashes-per-s`` sets it).
HASHES_PER_S = 30.0
#: Every this many clips, one is a planted duplicate of the one before.
DUP_EVERY = 50
AGL1K = Path(__file__).resolve().parents[2] / "shared" / "agl1k"


def synthetic(
    n_clips: int, seconds: float, seed: int = 0, hashes_per_s: float = HASHES_PER_S
) -> tuple[list[fpm.Fingerprint], set[tuple[int, int]]]:
    """``n_clips`` synthetic fingerprints and the planted pairs ``(a, b)``.
    Each clip owns its arrays, as :meth:`Fingerprint.from_bytes` gives them
    when ``agl-fast dedup`` reads a curated table."""
    rng = np.random.default_rng(seed)
    n_frames = int(seconds / fpm.HOP_S)
    n = int(seconds * hashes_per_s)
    fps: list[fpm.Fingerprint] = []
    planted: set[tuple[int, int]] = set()
    for i in range(n_clips):
        if i % DUP_EVERY == DUP_EVERY - 1:
            src = fps[-1]
            shift = int(rng.integers(1, n_frames // 3))
            keep = (src.times >= shift) & (rng.random(src.hashes.size) < 0.5)
            h, t = src.hashes[keep], src.times[keep] - np.uint32(shift)
            planted.add((i - 1, i))
        else:
            h = rng.integers(0, 1 << fpm.HASH_BITS, n, dtype=np.uint32)
            t = np.sort(rng.integers(0, n_frames, n, dtype=np.uint32))
        fps.append(fpm.Fingerprint(h, t, fpm.HOP_S, seconds, int(np.unique(h).size), n_frames))
    return fps, planted


def peak_rss() -> int:
    """Peak resident memory of this process in bytes (``VmHWM``)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss() -> int:
    """Resident memory of this process in bytes (``VmRSS``)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pair_scale(
    n_clips: int,
    seconds: float,
    n_threads: int | None,
    shards: int | None = None,
    hashes_per_s: float = HASHES_PER_S,
) -> dict[str, object]:
    """Pair ``n_clips`` synthetic clips (in one index, or ``shards``
    block by block); the figures of the run."""
    fps, planted = synthetic(n_clips, seconds, hashes_per_s=hashes_per_s)
    n_hashes = sum(f.hashes.size for f in fps)
    before = rss()
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM: the peak below is the pairing's
    wall, cpu = time.perf_counter(), time.process_time()
    if shards is None:
        m = fpm.pair(fps, n_threads=n_threads)
    else:
        m = fpm.pair_sharded(fps, shards, n_threads=n_threads)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    found = set(zip(m.a.tolist(), m.b.tolist(), strict=True))
    return {
        "clips": n_clips,
        "seconds_per_clip": seconds,
        "shards": shards,
        "hashes": n_hashes,
        "pair_wall_s": wall,
        "pair_cpu_s": cpu,
        "rss_before_bytes": before,
        "peak_rss_bytes": peak_rss(),
        "pair_peak_growth_bytes": peak_rss() - before,
        "planted": len(planted),
        "planted_found": len(planted & found),
        "other_pairs": len(found - planted),
    }


def fpcalc_path() -> str | None:
    """The ``fpcalc`` executable (Debian's ``libchromaprint-tools``), if any."""
    return shutil.which("fpcalc")


def fpcalc_raw(path: Path, length_s: int) -> tuple[np.ndarray, float]:
    """Chromaprint's raw fingerprint of a file and the CPU seconds fpcalc
    took (decoding included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # fpcalc 1.5 exits with 3 on the decoder's end-of-file notice after
    # printing a complete fingerprint: the JSON decides, not the status.
    res = subprocess.run(
        [str(fpcalc_path()), "-raw", "-json", "-length", str(length_s), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        raw = json.loads(res.stdout)["fingerprint"]
    except (ValueError, KeyError):
        raise RuntimeError(f"fpcalc failed on {path}: {res.stderr[-500:]}") from None
    return np.asarray(raw, dtype=np.int64).astype(np.uint32), cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pair", help="pair synthetic fingerprints at scale")
    p.add_argument("--clips", type=int, default=50_000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--shards",
        type=int,
        default=None,
        help="pair block by block, an index per shard (fingerprint.pair_sharded)",
    )
    p.add_argument("--hashes-per-s", type=float, default=HASHES_PER_S)
    args = ap.parse_args(argv)
    fig = pair_scale(args.clips, args.seconds, args.threads, args.shards, args.hashes_per_s)
    print(json.dumps(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main())
