"""Float64 benchmark: agl-fast's double-precision path against librosa on
the same float64 data in the same process, one thread.

Workloads, librosa's defaults (22,050 Hz, n_fft 2048, hop 512, 128 mel
bands) over ``--seconds`` of noise (default 300) as one float64 clip:
* ``stft``: complex128 STFT;
* ``melspectrogram``: float64 power mel spectrogram;
* ``power_to_db``: dB of a float64 power spectrogram ``[1025, t]``.

Times are the best of ``--repeat`` runs in process CPU seconds, the two
implementations taking turns (see ``_timing``); BLAS and FFT pools are held
to one thread, and freed memory is kept for reuse (``_timing.steady_heap``,
as the other benchmarks), so that a row's page faults do not depend on the
allocations before it. Prints a Markdown table with each speed ratio, the
largest difference between the two results, that difference over the
largest value of librosa's result, and the largest pointwise relative
difference (which, for an STFT, is set by the smallest bins: two FFT
algorithms' rounding of a near-zero bin).

    python benches/bench_float64.py --seconds 300 --repeat 5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import agl_fast
from _timing import best_times_interleaved, steady_heap

SR = 22050


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=300.0, help="audio length in seconds")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per implementation")
    args = ap.parse_args()

    import librosa
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    heap = "freed memory kept for reuse" if steady_heap() else "default allocator"
    rng = np.random.default_rng(0)
    y = 0.1 * rng.standard_normal(int(args.seconds * SR))
    S = np.abs(librosa.stft(y)) ** 2

    cases = {
        "stft": (
            lambda: librosa.stft(y),
            lambda: agl_fast.stft(y, n_threads=1),
        ),
        "melspectrogram": (
            lambda: librosa.feature.melspectrogram(y=y, sr=SR),
            lambda: agl_fast.melspectrogram(y, sr=SR, hop_length=512, n_threads=1),
        ),
        "power_to_db": (
            lambda: librosa.power_to_db(S),
            lambda: agl_fast.power_to_db(S, n_threads=1),
        ),
    }
    print(
        f"{args.seconds:g} s of float64 audio at {SR} Hz, one thread, {heap}, best of {args.repeat}"
    )
    print()
    print(
        "| workload | librosa (ms) | agl-fast (ms) | agl-fast speed-up | max abs difference "
        "| / peak | max pointwise relative |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (ref, ours) in cases.items():
        t = best_times_interleaved({"librosa": ref, "agl": ours}, repeat=args.repeat)
        a, b = ref(), ours()
        assert a.dtype == b.dtype, (name, a.dtype, b.dtype)
        diff = float(np.max(np.abs(a - b)))
        # Relative to librosa's value, where that is not at the dB floor /
        # exactly zero (a zero keeps the absolute difference).
        rel = float(np.max(np.abs(a - b) / np.maximum(np.abs(a), np.finfo(np.float64).tiny)))
        print(
            f"| {name} | {t['librosa'] * 1e3:,.1f} | {t['agl'] * 1e3:,.1f} | "
            f"{t['librosa'] / t['agl']:.2f}x | {diff:.1e} | "
            f"{diff / float(np.max(np.abs(a))):.1e} | {rel:.1e} |"
        )


if __name__ == "__main__":
    main()
