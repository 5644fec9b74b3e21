"""Simulated binaural datasets: scenes, mixtures, labels and QA, on disk.

:func:`build_dataset` writes, under ``out``:

* ``scenes/NNNNNN.npz``: ``audio`` ``[2, seconds * sr]`` float32 (the
  spatialized mixture), ``brir_k`` ``[2, L]`` per source (``format='npz'``,
  the default); or, with ``format='parquet'``, ``shards/NNNNN.parquet``:
  ``shard_size`` scenes per Parquet file, one row per scene with the columns
  ``id`` (string), ``audio`` (list<float32>, the ``[2, n]`` mixture
  row-major), ``brirs`` (list<list<float32>>, each ``[2, L]`` row-major),
  ``brir_length`` (list<int32>), and the depth images of
  :mod:`agl_fast.spatial.depth` with their shapes: ``depth`` (list<float32>,
  the ``[H, W]`` panorama row-major), ``depth_shape`` (list<int32>,
  ``[H, W]``), ``depth_views`` and ``depth_views_shape`` (the 20-degree
  views side by side); the ``.npz`` files hold the same arrays under those
  names; :func:`load_scene` reads either layout into the same arrays;
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

from ..exceptions import ParameterError
from .defaults import CLIP_SECONDS, SR
from .depth import depth_panorama, depth_views
from .qa import generate_qa
from .simulate import simulate_scene, spatialize

__all__ = [
    "DEPTH_ARRAYS",
    "SYNTHETIC_EVENTS",
    "build_dataset",
    "load_scene",
    "load_scenes",
    "read_qa",
    "synthetic_event",
]

SYNTHETIC_EVENTS = ("tone", "noise burst", "chirp", "click train")
DEPTH_ARRAYS = ("depth", "depth_views")  # stored per scene, with ``<name>_shape``


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
        raise ParameterError(f"kind must be one of {SYNTHETIC_EVENTS}, got {kind!r}")
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
        int(rng.integers(2**31)), n_sources=n_src, sr=sr, receiver=job["receiver"],
        through_door=job["through_door"],
    )  # fmt: skip
    mix = spatialize(audio, scene.brirs, sr=sr, seconds=seconds)
    sid = f"{i:06d}"
    arrays = {
        "audio": mix,
        **{f"brir_{k}": h for k, h in enumerate(scene.brirs)},
        "depth": depth_panorama(scene.spec),
        "depth_views": depth_views(scene.spec),
    }
    if job["format"] == "npz":
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
    if job["format"] != "npz":
        row["_arrays"] = arrays
    return row, qa


def _n_brirs(arrays: dict[str, np.ndarray]) -> int:
    return sum(k.startswith("brir_") for k in arrays)


def _write_shard(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = [r.pop("_arrays") for r in rows]
    brirs = [[a[f"brir_{k}"] for k in range(_n_brirs(a))] for a in arrays]
    f32 = pa.float32()
    i32 = pa.list_(pa.int32())
    table = pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.string()),
            "audio": pa.array([a["audio"].ravel() for a in arrays], pa.list_(f32)),
            "brirs": pa.array([[h.ravel() for h in hs] for hs in brirs], pa.list_(pa.list_(f32))),
            "brir_length": pa.array([[h.shape[1] for h in hs] for hs in brirs], i32),
            **{
                col: pa.array([a[col].ravel() for a in arrays], pa.list_(f32))
                for col in DEPTH_ARRAYS
            },
            **{
                f"{col}_shape": pa.array([list(a[col].shape) for a in arrays], i32)
                for col in DEPTH_ARRAYS
            },
        }
    )
    pq.write_table(table, path)
    for r in rows:
        r["shard"] = path.name


def _jobs(
    out: Path, n_scenes: int, *, seed: int, sources: list[str] | None, test_every: int,
    settings: dict[str, Any],
) -> list[dict[str, Any]]:  # fmt: skip
    """One job per scene: every ``test_every``-th scene is a test scene, drawing
    its sources from the test part of the files (every ``test_every``-th)."""
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
                **settings,
            }
        )
    return jobs


def _write_lists(out: Path, results: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
    """``scenes.jsonl`` and ``qa.jsonl`` of the simulated scenes."""
    with open(out / "scenes.jsonl", "w") as f:
        for row, _ in results:
            f.write(json.dumps(row) + "\n")
    with open(out / "qa.jsonl", "w") as f:
        for _, qa in results:
            for q in qa:
                f.write(json.dumps(q) + "\n")


def build_dataset(
    out: str | Path,
    n_scenes: int,
    *,
    seed: int = 0,
    sources: list[str] | None = None,
    max_sources: int = 2,
    seconds: float = CLIP_SECONDS,
    sr: int = SR,
    receiver: str = "auto",
    test_every: int = 5,
    workers: int = 1,
    format: str = "npz",
    shard_size: int = 256,
    through_door: float = 0.0,
) -> list[dict[str, Any]]:
    """Simulate ``n_scenes`` scenes into ``out`` (see the module docs).

    ``format`` is ``'npz'`` (one file per scene) or ``'parquet'`` (shards of
    ``shard_size`` scenes, written as the scenes arrive, so memory holds one
    shard). ``through_door`` is the probability that a source stands in an
    adjoining room, heard through a door
    (:func:`agl_fast.spatial.simulate.sample_scene`). Returns the
    ``scenes.jsonl`` rows (with ``shard``, the file
    name, in Parquet datasets).
    """
    if format not in ("npz", "parquet"):
        raise ParameterError(f"format must be 'npz' or 'parquet', got {format!r}")
    if shard_size < 1:
        raise ParameterError(f"shard_size must be >= 1, got {shard_size}")
    out = Path(out)
    (out / ("scenes" if format == "npz" else "shards")).mkdir(parents=True, exist_ok=True)
    jobs = _jobs(
        out, n_scenes, seed=seed, sources=sources, test_every=test_every,
        settings={"max_sources": max_sources, "seconds": seconds, "sr": sr,
                  "receiver": receiver, "format": format, "through_door": through_door},
    )  # fmt: skip
    results: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    pending: list[dict[str, Any]] = []

    def collect(it: Any) -> None:
        for row, qa in it:
            results.append((row, qa))
            if format == "parquet":
                pending.append(row)
                if len(pending) == shard_size:
                    _write_shard(out / "shards" / f"{len(results) // shard_size - 1:05d}.parquet",
                                 pending)  # fmt: skip
                    pending.clear()

    if workers > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            collect(pool.map(_scene_job, jobs))
    else:
        collect(_scene_job(j) for j in jobs)
    if pending:
        _write_shard(out / "shards" / f"{(len(results) - 1) // shard_size:05d}.parquet", pending)
    _write_lists(out, results)
    return [r for r, _ in results]


def load_scene(root: str | Path, scene_id: str) -> dict[str, np.ndarray]:
    """The arrays of one scene (``audio``, ``brir_0``, ...), from either layout."""
    return load_scenes(root, [scene_id])[0]


def _shard_rows(root: Path) -> dict[str, str]:
    rows = [json.loads(x) for x in (root / "scenes.jsonl").read_text().splitlines()]
    return {r["id"]: r["shard"] for r in rows if "shard" in r}


def read_qa(root: str | Path, *, split: str | None = None, types: Any = None) -> list[dict]:
    """Rows of ``root/qa.jsonl`` (optionally one split and some types)."""
    path = Path(root) / "qa.jsonl"
    if not path.is_file():
        raise ParameterError(f"no qa.jsonl in {root}")
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    if split is not None:
        rows = [r for r in rows if r.get("split") == split]
    if types:
        rows = [r for r in rows if r.get("type") in set(types)]
    return rows


def load_scenes(root: str | Path, scene_ids: list[str]) -> list[dict[str, np.ndarray]]:
    """The arrays of several scenes, in order; each Parquet shard is read once.

    Returns
    -------
    list of dict
        ``audio`` ``[2, n]`` float32, ``brir_k`` ``[2, L_k]`` float32 per
        source and, where the dataset has them, ``depth`` ``[H, W]`` and
        ``depth_views`` ``[H, W']`` float32 (metres), as stored in
        ``scenes/NNNNNN.npz``.
    """
    root = Path(root)
    out: dict[str, dict[str, np.ndarray]] = {}
    shards: dict[str, list[str]] = {}
    where = _shard_rows(root) if (root / "shards").is_dir() else {}
    for sid in scene_ids:
        if sid in where:
            shards.setdefault(where[sid], []).append(sid)
        elif (root / "scenes" / f"{sid}.npz").is_file():
            with np.load(root / "scenes" / f"{sid}.npz") as z:
                out[sid] = {k: z[k] for k in z.files}
    if shards:
        import pyarrow.parquet as pq

        for name, ids in shards.items():
            table = pq.read_table(root / "shards" / name)
            audio = table.column("audio").combine_chunks()
            a_off, a_val = audio.offsets.to_numpy(), audio.values.to_numpy()
            brirs = table.column("brirs").combine_chunks()
            b_off, inner = brirs.offsets.to_numpy(), brirs.values
            i_off, i_val = inner.offsets.to_numpy(), inner.values.to_numpy()
            lengths = table.column("brir_length").combine_chunks().values.to_numpy()
            depth = {}
            for col in DEPTH_ARRAYS:
                if col in table.column_names:
                    c = table.column(col).combine_chunks()
                    shape = table.column(f"{col}_shape").combine_chunks().values.to_numpy()
                    depth[col] = (c.offsets.to_numpy(), c.values.to_numpy(), shape.reshape(-1, 2))
            wanted = set(ids)
            for i, sid in enumerate(table.column("id").to_pylist()):
                if sid not in wanted:
                    continue
                arrays = {"audio": a_val[a_off[i] : a_off[i + 1]].reshape(2, -1).copy()}
                for k in range(b_off[i], b_off[i + 1]):
                    h = i_val[i_off[k] : i_off[k + 1]]
                    arrays[f"brir_{k - b_off[i]}"] = h.reshape(2, int(lengths[k])).copy()
                for col, (off, val, shape) in depth.items():
                    arrays[col] = val[off[i] : off[i + 1]].reshape(shape[i]).copy()
                out[sid] = arrays
    missing = [sid for sid in scene_ids if sid not in out]
    if missing:
        raise KeyError(f"scenes not found in {root}: {missing[:5]}")
    return [out[sid] for sid in scene_ids]
