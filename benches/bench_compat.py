"""Every accelerated function of ``agl_fast.compat.librosa`` against librosa
itself, same data, same run, one thread, outputs checked first.

    python benches/bench_compat.py [--seconds 60] [--repeat 5] [--only stft,power_to_db] [--script]

A 60 s clip at 22,050 Hz (noise, float32 and float64), librosa's default
arguments. Prints a Markdown table: librosa and agl-fast milliseconds, the
speed-up (librosa time / agl-fast time) and the largest difference relative
to the output's scale. ``--script`` adds ``tests/librosa_script.py`` end
to end, plain librosa against ``python -m agl_fast.compat.librosa``
(``benches/bench_librosa_script.py``, same clip length).
The names come from ``coverage()``: a newly accelerated function without a
row here fails the run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_times_interleaved, steady_heap  # noqa: E402

SR = 22050


def _wav(path: Path, y: np.ndarray) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((np.clip(y, -1, 1) * 32767).astype("<i2").tobytes())


def cases(y: np.ndarray, path: str) -> dict[str, tuple[Callable[[Any], Any], None]]:
    """Name -> (call taking the module, librosa or the compat layer)."""
    import librosa

    D = librosa.stft(y)
    S = np.abs(D) ** 2
    A = np.sqrt(S)
    mfcc = librosa.feature.mfcc(y=y, sr=SR)
    mel = librosa.feature.melspectrogram(y=y, sr=SR)
    stereo = np.stack([y, y[::-1]])
    return {
        "load": (lambda m: m.load(path, sr=None)[0], None),
        "resample": (lambda m: m.resample(y, orig_sr=SR, target_sr=16000), None),
        "resample polyphase": (
            lambda m: m.resample(y, orig_sr=SR, target_sr=16000, res_type="polyphase"),
            None,
        ),
        "get_duration": (lambda m: m.get_duration(path=path), None),
        "stft": (lambda m: m.stft(y), None),
        "power_to_db": (lambda m: m.power_to_db(S), None),
        "amplitude_to_db": (lambda m: m.amplitude_to_db(A), None),
        "feature.melspectrogram": (lambda m: m.feature.melspectrogram(y=y, sr=SR), None),
        "feature.mfcc": (lambda m: m.feature.mfcc(y=y, sr=SR), None),
        "feature.rms": (lambda m: m.feature.rms(y=y), None),
        "feature.spectral_flatness": (lambda m: m.feature.spectral_flatness(y=y), None),
        "feature.spectral_centroid": (lambda m: m.feature.spectral_centroid(y=y, sr=SR), None),
        "feature.spectral_bandwidth": (lambda m: m.feature.spectral_bandwidth(y=y, sr=SR), None),
        "feature.spectral_rolloff": (lambda m: m.feature.spectral_rolloff(y=y, sr=SR), None),
        "feature.zero_crossing_rate": (lambda m: m.feature.zero_crossing_rate(y), None),
        "effects.trim": (lambda m: m.effects.trim(y)[1], None),
        "effects.split": (lambda m: m.effects.split(y), None),
        "onset.onset_strength": (lambda m: m.onset.onset_strength(y=y, sr=SR), None),
        "onset.onset_strength_multi": (lambda m: m.onset.onset_strength_multi(y=y, sr=SR), None),
        "filters.mel": (lambda m: m.filters.mel(sr=SR, n_fft=2048), None),
        "istft": (lambda m: m.istft(D), None),
        "feature.spectral_contrast": (lambda m: m.feature.spectral_contrast(y=y, sr=SR), None),
        "feature.chroma_stft": (lambda m: m.feature.chroma_stft(y=y, sr=SR), None),
        "feature.delta": (lambda m: m.feature.delta(mfcc), None),
        "util.normalize": (lambda m: m.util.normalize(y), None),
        "to_mono": (lambda m: m.to_mono(stereo), None),
        "pcen": (lambda m: m.pcen(mel * 2**31, sr=SR), None),
    }


def _diff(a: Any, b: Any) -> float:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    scale = float(np.max(np.abs(a))) or 1.0
    return float(np.max(np.abs(a.astype(np.complex128) - b))) / scale


#: Rows without audio input: timed once, not per dtype.
NO_AUDIO = ("load", "get_duration", "filters.mel")


class MissingRow(Exception):
    """An accelerated function without a row in :func:`cases`."""


def measure(
    seconds: float,
    repeat: int,
    only: set[str] | None = None,
    dtypes: tuple[type, ...] = (np.float32, np.float64),
) -> list[tuple[str, str, float, float, float]]:
    """``(label, dtype, librosa s, agl-fast s, max diff / scale)`` of every
    row (``only``: these names; ``dtypes``: these audio dtypes, the rows
    without audio input going with the first), best of ``repeat`` interleaved rounds, one
    thread, outputs compared first. Raises :class:`MissingRow` when
    ``coverage()`` names a function :func:`cases` has no row for."""
    import librosa

    import agl_fast
    import agl_fast.compat.librosa as compat

    agl_fast.set_num_threads(1)
    steady_heap()
    rng = np.random.default_rng(0)
    base = 0.1 * rng.standard_normal(int(seconds * SR))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "clip.wav")
        _wav(Path(path), base)
        for dtype in dtypes:
            table = cases(base.astype(dtype), path)
            missing = set(compat.coverage().accelerated) - set(table)
            if missing:
                raise MissingRow(f"no benchmark row for {sorted(missing)}")
            for name, (call, _) in table.items():
                if only is not None and name not in only:
                    continue
                if dtype is not dtypes[0] and name in NO_AUDIO:
                    continue  # no audio input: one row
                diff = _diff(call(librosa), call(compat))
                best = best_times_interleaved(
                    {"librosa": lambda c=call: c(librosa), "agl": lambda c=call: c(compat)},
                    repeat=repeat,
                )
                kind = np.dtype(dtype).name
                label = name if name in NO_AUDIO else f"{name} ({kind})"
                rows.append((label, kind, best["librosa"], best["agl"], diff))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default=None, help="comma-separated names: time only these rows")
    ap.add_argument("--script", action="store_true", help="also time tests/librosa_script.py")
    args = ap.parse_args(argv)
    only = None if args.only is None else set(args.only.split(","))
    try:
        rows = measure(args.seconds, args.repeat, only)
    except MissingRow as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"| function ({args.seconds:g} s at {SR} Hz, 1 thread) | librosa ms | agl-fast ms "
          "| speed-up | max diff / scale |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for label, _, a, b, d in rows:
        print(f"| `{label}` | {a * 1e3:.2f} | {b * 1e3:.2f} | {a / b:.2f}x | {d:.1e} |")
    if args.script:
        import bench_librosa_script

        best = bench_librosa_script.measure(args.seconds, args.repeat)
        print()
        print(bench_librosa_script.table(best, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
