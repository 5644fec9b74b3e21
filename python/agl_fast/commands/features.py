"""``agl-fast features``: compute a feature preset for audio files (any
format :func:`agl_fast.load` decodes, or ``.npy`` arrays) or, with
``--demo``, for a generated stereo scene; report shape and throughput and
write plain float32 ``.npy`` or Parquet."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..audio import load
from ..exceptions import ParameterError
from ..presets import PRESETS, get_recipe, mono_input

_LOG = logging.getLogger(__name__)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "features",
        help="compute a feature preset (bat, efficientat, librosa) for audio files",
        description="Compute a feature preset for audio files (any format agl-fast decodes, "
        "or .npy arrays of [n] or [2, n] samples at --sr) and print one JSON summary per "
        "input. --out X.npy writes plain float32 (one input, or inputs of one shape stacked "
        "on a first axis); --out X.parquet writes one row per input with the columns "
        "path, features (nested lists, one level per axis) and features_shape.",
    )
    p.add_argument("inputs", nargs="*", type=Path, help="audio files or .npy arrays")
    p.add_argument("--preset", choices=sorted(PRESETS), default="bat", help="feature recipe")
    p.add_argument(
        "--sr",
        type=int,
        default=32000,
        help="sample rate in Hz the audio is resampled to (.npy inputs are taken to be at it)",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="run on a generated 10 s stereo 32 kHz clip (a source moving left to right)",
    )
    p.add_argument("--out", type=Path, help="write the features to this .npy or .parquet file")
    p.add_argument("--threads", type=int, default=None, help="worker threads (None: all cores)")
    p.add_argument(
        "--mono-to-binaural",
        action="store_true",
        help="with --preset bat: duplicate a mono input into two ears instead of refusing it",
    )
    p.set_defaults(run=run)


def _read(path: Path, sr: int, mono: bool) -> np.ndarray:
    """One input as float32 ``[n]`` or ``[channels, n]`` at ``sr`` Hz."""
    if path.suffix.lower() == ".npy":
        try:
            y = np.load(path, allow_pickle=False)
        except ValueError as exc:  # an object array, or not an .npy file
            raise ParameterError(f"{path}: not a plain numeric .npy array ({exc})") from None
        if y.dtype.kind not in "iuf" or y.ndim not in (1, 2):
            raise ParameterError(
                f"{path}: expected a float array of shape [n] or [channels, n], "
                f"got dtype={y.dtype}, shape={list(y.shape)}"
            )
        y = y.astype(np.float32, copy=False)
        return mono_input(y) if mono else y
    y, _ = load(path, sr=sr, mono=mono)
    return y


def _write(out: Path, names: list[str], feats: list[np.ndarray]) -> None:
    suffix = out.suffix.lower()
    if suffix == ".npy":
        shapes = {f.shape for f in feats}
        if len(shapes) != 1:
            raise ParameterError(
                f"--out {out}: inputs give features of different shapes {sorted(shapes)}; "
                "write .parquet instead"
            )
        arr = feats[0] if len(feats) == 1 else np.stack(feats)
        np.save(out, np.ascontiguousarray(arr, dtype=np.float32), allow_pickle=False)
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..pipeline.stages import nested_tensor_array

        table = pa.table(
            {
                "path": pa.array(names, pa.string()),
                "features": nested_tensor_array(feats),
                "features_shape": pa.array([list(f.shape) for f in feats], pa.list_(pa.int64())),
            }
        )
        pq.write_table(table, out)
    else:
        raise ParameterError(f"--out must end in .npy or .parquet, got {out.name!r}")


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
    if args.sr <= 0:
        raise ParameterError(f"--sr must be a positive rate in Hz, got {args.sr}")
    recipe = get_recipe(args.preset)
    if args.out is not None and args.out.suffix.lower() not in (".npy", ".parquet"):
        raise ParameterError(f"--out must end in .npy or .parquet, got {args.out.name!r}")
    if args.demo:
        sr = 32000
        clips = [demo_scene(sr=sr)]
        names = ["demo-scene"]
    elif not args.inputs:
        raise ParameterError("give audio files (or .npy arrays) or --demo")
    else:
        sr = args.sr
        clips = [_read(p, sr, recipe.channels == "mono") for p in args.inputs]
        names = [str(p) for p in args.inputs]
    policy = "mono-to-binaural" if args.mono_to_binaural else "refuse"
    clips = [recipe.prepare(c, policy, n) for c, n in zip(clips, names, strict=True)]
    start = time.perf_counter()
    feats = list(recipe.run(clips, sr=sr, n_threads=args.threads, output="list"))
    elapsed = time.perf_counter() - start
    seconds = sum(c.shape[-1] for c in clips) / sr
    for name, f in zip(names, feats, strict=True):
        summary: dict[str, Any] = {"input": name, "preset": args.preset, "shape": list(f.shape)}
        if args.preset == "bat":
            # Mean interaural phase sine per second: the demo's source moves
            # from the left ear to the right one, so its sign flips.
            frames = round(sr / 320)
            sin = f[3].mean(axis=1)
            per_s = sin[: len(sin) // frames * frames].reshape(-1, frames).mean(axis=1)
            summary["ipd_sin_per_second"] = [round(float(v), 3) for v in per_s]
        summary["seconds_of_audio"] = round(seconds, 2)
        summary["x_realtime"] = round(seconds / max(elapsed, 1e-9), 1)
        print(json.dumps(summary))
    if args.out:
        _write(args.out, names, [np.asarray(f, dtype=np.float32) for f in feats])
        _LOG.info("wrote %s", args.out)
    return 0
