"""Feature benchmark: agl-fast against the reference implementations on the
same data in the same process.

Workloads (``--minutes`` of audio, default 60, as 64 clips at 32 kHz):
* ``bat``: stereo -> [4, t, 128]; references: the best plain-Python
  transcription (float32, ``scipy.fft.rfft`` over strided frames, numpy matmul
  with the mel matrix, IPD from the normalised cross-spectrum) and, for the
  log-mel part only, librosa.
* ``efficientat``: mono -> [128, t]; reference: the same recipe in numpy/scipy.
* ``logmel``: mono librosa-style log-mel (n_fft 1024, hop 320, 128 bands);
  references: ``librosa.feature.melspectrogram`` + ``power_to_db``, and
  ``torch.stft`` power (when torch is installed).

Prints a Markdown table: seconds of audio per second per core (x real time per
core) and agl-fast's speed ratio over each reference. ``--gate`` exits
non-zero unless the one-thread ratios reach the CI thresholds (ratios measured
in this run, never absolute times).

    python benches/bench_features.py --minutes 60
    python benches/bench_features.py --quick --gate
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import agl_fast
import refimpl
from _timing import best_time as _best_time
from _timing import best_times_interleaved


def best_time(fn: Callable[[], object], repeat: int, threads: int = 1) -> float:
    """Best of ``repeat`` runs after an untimed warm-up (see ``_timing``)."""
    return _best_time(fn, repeat, threads, warmup=True)


SR = 32000


def limit_threads(n: int) -> None:
    """Pin the reference libraries' thread pools to ``n`` threads."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--clips", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="8 minutes of audio (64 clips of 7.5 s)")
    ap.add_argument("--repeat", type=int, default=None, help="best of N runs (3; 5 with --quick)")
    ap.add_argument(
        "--gate",
        action="store_true",
        help="fail unless bat >= 2x the transcription and logmel >= 2x librosa",
    )
    ap.add_argument("--gate-ratio", type=float, default=2.0)
    args = ap.parse_args(argv)
    minutes = 8.0 if args.quick else args.minutes
    # The quick run is the CI gate: more repeats, so a slow spell of the
    # machine is less likely to cover every run of one side.
    repeat = args.repeat or (5 if args.quick else 3)
    n = int(minutes * 60 * SR / args.clips)
    seconds = args.clips * n / SR
    rng = np.random.default_rng(0)
    stereo = (0.1 * rng.standard_normal((args.clips, 2, n))).astype(np.float32)
    mono = np.ascontiguousarray(stereo[:, 0])

    mel = refimpl.slaney_mel(SR, 1024, 128, 50.0, 14000.0)
    win = refimpl.padded_window("hann", 1024, 1024)

    import librosa

    def librosa_logmel() -> None:
        for y in mono:
            m = librosa.feature.melspectrogram(y=y, sr=SR, n_fft=1024, hop_length=320)
            librosa.power_to_db(m)

    def transcription_bat() -> None:
        for y in stereo:
            refimpl.bat_fast_transcription(y, mel, win)

    def numpy_efficientat() -> None:
        for y in mono:
            refimpl.efficientat_numpy(y)

    limit_threads(1)
    ours: dict[str, Callable[[int], object]] = {
        "bat (stereo)": lambda t: agl_fast.bat(stereo, n_threads=t),
        "efficientat (mono)": lambda t: agl_fast.efficientat(mono, n_threads=t),
        "logmel (mono)": lambda t: agl_fast.logmel(
            mono, sr=SR, n_fft=1024, hop_length=320, n_threads=t
        ),
    }
    refs: dict[tuple[str, str], Callable[[], object]] = {
        ("bat (stereo)", "numpy/scipy transcription"): transcription_bat,
        ("efficientat (mono)", "numpy/scipy transcription"): numpy_efficientat,
        ("logmel (mono)", "librosa"): librosa_logmel,
    }
    try:
        import torch

        tm = torch.from_numpy(mono)
        tw = torch.hann_window(1024)

        def torch_power() -> None:
            torch.stft(
                tm, 1024, 320, window=tw, center=True, pad_mode="reflect", return_complex=True
            ).abs().pow(2)

        refs[("logmel (mono)", "torch.stft power only")] = torch_power
    except ImportError:
        pass
    # The one-thread rows (the gated ratios) take turns round by round.
    one: dict[str, Callable[[], object]] = {f"{w}|agl-fast": partial(f, 1) for w, f in ours.items()}
    one.update({f"{w}|{who}": fn for (w, who), fn in refs.items()})
    best1 = best_times_interleaved(one, repeat)
    rows: list[tuple[str, str, int, float]] = []
    ratios: dict[str, float] = {}
    rows += [(w, "agl-fast", 1, best1[f"{w}|agl-fast"]) for w in ours]
    rows += [(w, "agl-fast", 2, best_time(partial(f, 2), repeat, 2)) for w, f in ours.items()]
    rows += [(w, who, 1, best1[f"{w}|{who}"]) for (w, who) in refs]

    ours1 = {w: t for (w, who, th, t) in rows if who == "agl-fast" and th == 1}
    print(
        f"\n{seconds / 3600:.2f} h of 32 kHz audio as {args.clips} clips; "
        f"{os.cpu_count()} CPUs; best of {repeat}; one-thread rows timed in process "
        "CPU seconds, two-thread rows in wall-clock seconds\n"
    )
    print("| workload | implementation | threads | x real time per core | agl-fast speed-up |")
    print("|---|---|---:|---:|---:|")
    for w, who, th, t in rows:
        per_core = seconds / t / th
        ratio = "" if who == "agl-fast" else f"{t / ours1[w]:.1f}x"
        if who != "agl-fast":
            ratios[f"{w} vs {who}"] = t / ours1[w]
        print(f"| {w} | {who} | {th} | {per_core:,.0f} | {ratio} |")
    if args.gate:
        need = {
            "bat (stereo) vs numpy/scipy transcription": args.gate_ratio,
            "logmel (mono) vs librosa": args.gate_ratio,
        }
        failed = [f"{k}: {ratios[k]:.2f}x < {v}x" for k, v in need.items() if ratios[k] < v]
        if failed:
            print("\nPERFORMANCE GATE FAILED: " + "; ".join(failed))
            return 1
        print("\nperformance gate passed: " + ", ".join(f"{k} {ratios[k]:.1f}x" for k in need))
    return 0


if __name__ == "__main__":
    sys.exit(main())
