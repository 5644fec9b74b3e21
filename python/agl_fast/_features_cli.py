"""``agl-fast features``: compute a feature preset for audio files or, with
``--demo``, for a generated stereo scene, and report shape and throughput."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from .presets import PRESETS, preset


def add_parser(sub: Any) -> None:
    p = sub.add_parser("features", help="compute a feature preset (bat, efficientat, librosa)")
    p.add_argument("inputs", nargs="*", type=Path, help=".npy files of [2, n] or [n] float audio")
    p.add_argument("--preset", choices=sorted(PRESETS), default="bat")
    p.add_argument(
        "--demo",
        action="store_true",
        help="run on a generated 10 s stereo 32 kHz clip (a source moving left to right)",
    )
    p.add_argument("--out", type=Path, help="write the features to this .npy file")
    p.add_argument("--threads", type=int, default=None)
    p.set_defaults(run=run)


def demo_scene(seconds: float = 10.0, sr: int = 32000, seed: int = 0) -> np.ndarray:
    """A ``[2, n]`` float32 scene: a harmonic source panned from the left ear
    to the right one with an interaural delay of up to 0.6 ms, over noise."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sr)
    t = np.arange(n) / sr
    src = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((220, 440, 660, 880), 1))
    src = src * (0.5 + 0.5 * np.sin(2 * np.pi * 0.5 * t) ** 2)
    pan = np.linspace(-1.0, 1.0, n)
    delay = np.rint(pan * 0.0006 * sr).astype(int)
    idx = np.arange(n)
    left = src[np.clip(idx + np.maximum(delay, 0), 0, n - 1)] * np.sqrt((1 - pan) / 2)
    right = src[np.clip(idx - np.minimum(delay, 0), 0, n - 1)] * np.sqrt((1 + pan) / 2)
    noise = 0.01 * rng.standard_normal((2, n))
    return (0.3 * np.stack([left, right]) + noise).astype(np.float32)


def run(args: argparse.Namespace) -> int:
    if args.demo:
        clips = [demo_scene()]
        names = ["demo-scene"]
        sr = 32000
    else:
        if not args.inputs:
            print("give .npy inputs or --demo")
            return 2
        clips = [np.load(p) for p in args.inputs]
        names = [str(p) for p in args.inputs]
        sr = 32000
    if args.preset == "efficientat":
        clips = [c.mean(axis=0) if c.ndim == 2 else c for c in clips]
    kwargs: dict[str, Any] = {"n_threads": args.threads}
    if args.preset == "librosa":
        kwargs["sr"] = sr
    start = time.perf_counter()
    feats = preset(args.preset, clips, **kwargs)
    elapsed = time.perf_counter() - start
    seconds = sum(c.shape[-1] for c in clips) / sr
    for name, f in zip(names, feats, strict=True):
        summary: dict[str, Any] = {"input": name, "preset": args.preset, "shape": list(f.shape)}
        if args.preset == "bat":
            # Mean interaural phase sine per second: the demo's source moves
            # from the left ear to the right one, so its sign flips.
            sin = f[3].mean(axis=1)
            per_s = sin[: len(sin) // 100 * 100].reshape(-1, 100).mean(axis=1)
            summary["ipd_sin_per_second"] = [round(float(v), 3) for v in per_s]
        summary["seconds_of_audio"] = round(seconds, 2)
        summary["x_realtime"] = round(seconds / max(elapsed, 1e-9), 1)
        print(json.dumps(summary))
    if args.out:
        np.save(args.out, feats[0] if len(feats) == 1 else np.asarray(feats, dtype=object))
    return 0
