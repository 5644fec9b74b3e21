"""Quality metrics: agl-fast against librosa + scipy + scikit-maad.

The same clips are processed by both sides in the same run:

* ``clip metrics``: agl-fast's :func:`agl_fast.quality.quality_metrics` (RMS,
  Welch flatness, both clipping ratios, the paper's AC and scikit-maad's ACI)
  against numpy (RMS, clipping), ``scipy.signal.welch`` + numpy (flatness),
  ``librosa.stft`` + ``maad.features.acoustic_complexity_index`` (AC on the
  power spectrogram, ACI on the amplitude spectrogram);
* ``frame rms`` and ``frame flatness``: against ``librosa.feature.rms`` and
  ``librosa.feature.spectral_flatness`` with their defaults.

Prints a Markdown table of seconds of audio per second per core and the
ratio; one-thread rows are timed in process CPU seconds, best of three in
quick mode. The pytest-benchmark suite (``benches/test_quality.py``) gates
the one-thread ratio of the clip metrics (the quality filter's workload).
The frame-wise rows are not gated: both sides run the same FFTs
(flatness) or the same vectorised sums (rms), so their ratio is bounded by
a few times.

Usage::

    python benches/bench_quality.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable

# One-thread references: keep BLAS/OpenMP pools at one thread.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from _timing import best_time  # noqa: E402

SR = 16000
CLIP_S = 10


def make_clips(total_s: float, seed: int = 0) -> np.ndarray:
    """Noise shaped by slow envelopes plus tones: ``[n_clips, CLIP_S * SR]``."""
    rng = np.random.default_rng(seed)
    n = max(1, int(total_s // CLIP_S))
    t = np.arange(CLIP_S * SR) / SR
    env = 1 + 0.8 * np.sin(2 * np.pi * rng.uniform(0.1, 2, (n, 1)) * t)
    tone = 0.2 * np.sin(2 * np.pi * rng.uniform(100, 4000, (n, 1)) * t)
    x = 0.05 * env * rng.standard_normal((n, t.size)) + tone
    return x.astype(np.float32)


def reference_clip_metrics(x: np.ndarray, sr: float = SR) -> dict[str, float]:
    """The clip metrics of :func:`agl_fast.quality.quality_metrics` computed
    with numpy, ``scipy.signal.welch``, ``librosa.stft`` and scikit-maad."""
    import librosa
    import scipy.signal
    from maad.features import acoustic_complexity_index

    x64 = x.astype(np.float64)
    rms = float(np.sqrt(np.mean(x64**2)))
    peak = np.abs(x).max()
    clip = float(np.mean(np.abs(x) == peak)) if peak > 0 else 0.0
    full = float(np.mean(np.abs(x) >= 0.999))
    _, p = scipy.signal.welch(x64, sr, nperseg=1024)
    p = np.maximum(p, 1e-10)
    flat = float(np.exp(np.mean(np.log(p))) / np.mean(p))
    amp = np.abs(librosa.stft(x, n_fft=512, hop_length=256, center=False)).astype(np.float64)
    _, _, aci = acoustic_complexity_index(amp)
    _, _, ac = acoustic_complexity_index(amp**2)
    return {"rms": rms, "flat": flat, "clip": clip, "full": full, "ac": ac, "aci": aci}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 minutes of audio instead of 1 hour")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)

    import librosa

    from agl_fast import quality

    total_s = 300.0 if args.quick else 3600.0
    clips = make_clips(total_s)
    audio_s = clips.shape[0] * CLIP_S
    repeat = 3 if args.quick else 1

    # Warm up both sides (plans, numba caches).
    quality.quality_metrics(clips[:1], SR, n_threads=1)
    reference_clip_metrics(clips[0])
    librosa.feature.spectral_flatness(y=clips[0])

    def ref_clip() -> None:
        for x in clips:
            reference_clip_metrics(x)

    def ref_rms() -> None:
        librosa.feature.rms(y=clips)

    def ref_flat() -> None:
        librosa.feature.spectral_flatness(y=clips)

    cases: list[tuple[str, Callable[[], None], Callable[[int], None]]] = [
        ("clip metrics", ref_clip, lambda n: quality.quality_metrics(clips, SR, n_threads=n)),
        ("frame rms", ref_rms, lambda n: quality.rms(clips, n_threads=n)),
        (
            "frame flatness",
            ref_flat,
            lambda n: quality.spectral_flatness(clips, n_threads=n),
        ),
    ]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, ref, ours in cases:
            t_ref = best_time(ref, repeat)
            t1 = best_time(lambda ours=ours: ours(1), repeat)
            tn = best_time(lambda ours=ours: ours(args.threads), repeat, args.threads)
            ratio = t_ref / t1
            rows.append((name, audio_s / t_ref, audio_s / t1, audio_s / tn / args.threads, ratio))

    print(f"\nQuality metrics on {audio_s / 60:.0f} min of 16 kHz audio ({clips.shape[0]} clips)\n")
    print(
        "| metric | reference (s/s) | agl-fast 1 thread (s/s) | "
        f"agl-fast {args.threads} threads (s/s/core) | ratio (1 thread) |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, r, a1, an, ratio in rows:
        print(f"| {name} | {r:,.0f} | {a1:,.0f} | {an:,.0f} | {ratio:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
