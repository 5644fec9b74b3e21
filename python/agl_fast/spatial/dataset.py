"""Simulated binaural datasets: scenes, mixtures, labels and QA, on disk.

:func:`build_dataset` writes, under ``out``:

* ``scenes/NNNNNN.npz``: ``audio`` ``[2, seconds * sr]`` float32 (the
  spatialized mixture), ``brir_k`` ``[2, L]`` per source;
* ``scenes.jsonl``: one row per scene: id, split, receiver, geometry,
  events, BAT labels and room acoustics per source;
* ``qa.jsonl``: the BiDepth-style questions (:mod:`agl_fast.spatial.qa`).

Every scene has its own room, so train and test share no room; source
audio files given by the user are split between train and test (every
``test_every``-th file to test), and synthetic sources are drawn per scene.
Scene ``i`` is drawn from ``seed + i``: the output does not depend on the
number of worker processes.
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .qa import generate_qa
from .simulate import simulate_scene, spatialize

__all__ = ["SYNTHETIC_EVENTS", "build_dataset", "load_scene", "synthetic_event"]

SYNTHETIC_EVENTS = ("tone", "noise burst", "chirp", "click train")


def synthetic_event(kind: str, rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    """A mono test event ``[seconds * sr]`` float32 of one of :data:`SYNTHETIC_EVENTS`."""
    n = round(seconds * sr)
    t = np.arange(n) / sr
    if kind == "tone":
        f0 = rng.uniform(150, 800)
        y = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6)) / k for k in range(1, 6))
        y = y * (0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(0.2, 2) * t))
    elif kind == "noise burst":
        y = rng.standard_normal(n) * (np.sin(2 * np.pi * rng.uniform(0.5, 3) * t) > 0)
    elif kind == "chirp":
        f = np.exp(np.linspace(np.log(rng.uniform(200, 500)), np.log(rng.uniform(3e3, 8e3)), n))
        period = max(1, round(rng.uniform(0.3, 1.0) * sr))
        y = np.sin(2 * np.pi * np.cumsum(f[np.arange(n) % period]) / sr)
    elif kind == "click train":
        y = np.zeros(n)
        y[:: max(1, round(sr / rng.uniform(2, 20)))] = 1.0
        y = np.convolve(y, np.exp(-np.arange(64) / 8.0))[:n]
    else:
        raise ValueError(f"kind must be one of {SYNTHETIC_EVENTS}, got {kind!r}")
    return np.asarray(y, dtype=np.float32)


def _scene_job(job: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    i, seed, out = job["index"], job["seed"], Path(job["out"])
    rng = np.random.default_rng(seed)
    n_src = int(rng.integers(1, job["max_sources"] + 1))
    sr, seconds = job["sr"], job["seconds"]
    files: list[str] = job["files"]
    events, audio = [], []
    for _ in range(n_src):
        if files:
            path = files[int(rng.integers(len(files)))]
            from ..audio import load

            y, _ = load(path, sr=sr, mono=True, duration=seconds)
            events.append(Path(path).stem.replace("_", " "))
            audio.append(y)
        else:
            kind = str(rng.choice(SYNTHETIC_EVENTS))
            events.append(kind)
            audio.append(synthetic_event(kind, rng, sr, seconds))
    scene = simulate_scene(
        int(rng.integers(2**31)), n_sources=n_src, sr=sr, receiver=job["receiver"]
    )
    mix = spatialize(audio, scene.brirs, sr=sr, seconds=seconds)
    sid = f"{i:06d}"
    arrays = {"audio": mix, **{f"brir_{k}": h for k, h in enumerate(scene.brirs)}}
    np.savez(out / "scenes" / f"{sid}.npz", **arrays)  # type: ignore[arg-type]
    row = {
        "id": sid,
        "split": job["split"],
        "seed": seed,
        "receiver": scene.receiver,
        "sr": sr,
        "events": events,
        "labels": scene.labels,
        "acoustics": scene.acoustics,
        "geometry": asdict(scene.spec),
    }
    qa = generate_qa(sid, events, scene.labels, rng, split=job["split"])
    return row, qa


def build_dataset(
    out: str | Path,
    n_scenes: int,
    *,
    seed: int = 0,
    sources: list[str] | None = None,
    max_sources: int = 2,
    seconds: float = 10.0,
    sr: int = 32000,
    receiver: str = "auto",
    test_every: int = 5,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """Simulate ``n_scenes`` scenes into ``out`` (see the module docs).

    Returns the ``scenes.jsonl`` rows.
    """
    out = Path(out)
    (out / "scenes").mkdir(parents=True, exist_ok=True)
    files = [str(p) for p in (sources or [])]
    test_files = files[::test_every] if len(files) >= 2 else files
    train_files = [f for f in files if f not in test_files] or files
    jobs = []
    for i in range(n_scenes):
        split = "test" if i % test_every == test_every - 1 else "train"
        jobs.append(
            {
                "index": i,
                "seed": seed + i,
                "out": str(out),
                "split": split,
                "files": test_files if split == "test" else train_files,
                "max_sources": max_sources,
                "seconds": seconds,
                "sr": sr,
                "receiver": receiver,
            }
        )
    if workers > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            results = list(pool.map(_scene_job, jobs))
    else:
        results = [_scene_job(j) for j in jobs]
    with open(out / "scenes.jsonl", "w") as f:
        for row, _ in results:
            f.write(json.dumps(row) + "\n")
    with open(out / "qa.jsonl", "w") as f:
        for _, qa in results:
            for q in qa:
                f.write(json.dumps(q) + "\n")
    return [r for r, _ in results]


def load_scene(root: str | Path, scene_id: str) -> dict[str, np.ndarray]:
    """The arrays of one scene (``audio``, ``brir_0``, ...)."""
    with np.load(Path(root) / "scenes" / f"{scene_id}.npz") as z:
        return {k: z[k] for k in z.files}
