"""Readers for released spatial-audio QA data, into the layout of :mod:`.dataset`.

SpatialSoundQA (BAT) as its loaders read it, and BiDepth through the same
configuration (OWL's code keeps SLAM-LLM's data settings ``qa_data_root``,
``anechoic_data_root``, ``reverb_data_root``, ``channel_type``):

* questions: JSON lines, one question a line, with ``audio_id``,
  ``reverb_id``, ``audio_id2``, ``reverb_id2`` (null for one source),
  ``question_id``, ``question_type``, ``question``, ``answer``; the file of
  a split is ``<qa_root>/<stage>/<split>.jsonl``;
* dry source audio: ``<anechoic_root>/<audio_id>.wav`` (any rate, first
  channel; resampled to 32 kHz);
* binaural RIRs: ``<reverb_root>/<channel_type>/<reverb_id>``, NumPy
  ``[2, L]`` at 32 kHz;
* RIR positions (Spatial-AST's reverb JSON, optional): ``{"data": [{"fname":
  <reverb_id>, "sensor_position": "x,y,z", "source_position": "x,y,z"},
  ...]}`` in the simulator's frame (x right, y up, -z ahead of the
  listener), giving the BAT labels as Spatial-AST computes them;
* depth panoramas (BiDepth; its files are announced, not released, so this
  location is an assumption to adjust): ``<reverb_root>/depth/<reverb_id>``,
  NumPy ``[H, W]`` in metres.

Mixtures are made as those loaders make them: each source normalised to
-14 dBFS RMS, convolved with its RIR (full length), cut or zero-padded to
10 s, and two sources averaged.

:func:`read_slam_qa` writes ``scenes/NNNNNN.npz`` (``audio``, ``brir_k``,
``depth`` when found), ``scenes.jsonl`` (``events`` from the scene's
``CLASSIFICATION`` answers, BAT ``labels`` from the positions) and
``qa.jsonl``: SpatialSoundQA's ``CLASSIFICATION`` questions become Type I
rows that :func:`.answers.score_qa` scores; the other question types keep
their names (``type`` = the dataset's ``question_type``) and are carried,
not scored.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import ParameterError

__all__ = ["CLIP_SECONDS", "SR", "labels_from_positions", "read_slam_qa"]

from .defaults import CLIP_SECONDS, SR
from .defaults import LOUDNESS_DBFS as _LOUDNESS_DBFS

_QA_KEYS = ("audio_id", "reverb_id", "question", "answer")


def labels_from_positions(sensor: Any, source: Any) -> dict[str, Any]:
    """BAT labels of a source from simulator positions (x right, y up, -z ahead).

    Returns ``azimuth`` (0..359, counter-clockwise from the right, 90
    ahead), ``elevation`` (0..179, 90 horizontal), ``distance_class``
    (``round(2 d)``) and ``distance_m``.
    """
    s = np.asarray(sensor, dtype=np.float64)
    p = np.asarray(source, dtype=np.float64)
    if s.shape != (3,) or p.shape != (3,):
        raise ParameterError(f"positions must be 3 numbers, got {s.shape} and {p.shape}")
    dx, dy, dz = p - s
    d = float(np.linalg.norm(p - s))
    az = (round(math.degrees(math.atan2(-dz, dx))) + 360) % 360
    el = (round(math.degrees(math.atan2(dy, math.hypot(dx, dz)))) + 90) % 180
    return {"azimuth": int(az), "elevation": int(el), "distance_class": round(2 * d),
            "distance_m": d}  # fmt: skip


def _xyz(text: Any) -> list[float]:
    parts = str(text).split(",") if not isinstance(text, (list, tuple)) else list(text)
    if len(parts) != 3:
        raise ParameterError(f"a position must be 'x,y,z', got {text!r}")
    return [float(v) for v in parts]


def _positions(path: str | Path | None) -> dict[str, dict[str, Any]]:
    if path is None:
        return {}
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    items = doc["data"] if isinstance(doc, dict) else doc
    out = {}
    for it in items:
        out[str(it["fname"])] = labels_from_positions(
            _xyz(it["sensor_position"]), _xyz(it["source_position"])
        )
    return out


def _dry(path: Path) -> np.ndarray:
    import soundfile as sf
    from scipy.signal import resample_poly

    from ..exceptions import AudioDecodeError

    try:
        y, sr = sf.read(str(path), dtype="float64", always_2d=True)
    except Exception as exc:
        raise AudioDecodeError(f"cannot read {path}: {exc}") from exc
    y = y[:, 0]
    if sr != SR:
        g = math.gcd(int(sr), SR)
        y = resample_poly(y, SR // g, int(sr) // g)
    rms = float(np.sqrt(np.mean(y**2))) if y.size else 0.0
    return y if rms == 0 else y * (10 ** (_LOUDNESS_DBFS / 20) / rms)


def _wet(dry: np.ndarray, rir: np.ndarray) -> np.ndarray:
    from scipy.signal import fftconvolve

    n = round(CLIP_SECONDS * SR)
    wet = fftconvolve(dry[None], rir, mode="full")[:, :n]
    out = np.zeros((rir.shape[0], n))
    out[:, : wet.shape[1]] = wet
    return out


def _rir(path: Path) -> np.ndarray:
    if not path.is_file():
        raise ParameterError(f"RIR not found: {path}")
    h = np.load(path)
    if h.ndim != 2 or h.shape[0] != 2:
        raise ParameterError(f"{path}: a binaural RIR must be [2, L], got shape {h.shape}")
    return np.asarray(h, dtype=np.float64)


def _read_items(qa_file: str | Path, limit: int | None) -> list[dict[str, Any]]:
    """The questions of a JSONL file, or of one JSON document ``{"data": [...]}``
    (the authors' ``<stage>/<split>.json``), the first ``limit``, each with
    the keys needed."""
    text = Path(qa_file).read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None  # JSON lines
    if isinstance(doc, dict) and "data" in doc:  # (one JSONL line is a document too)
        if not isinstance(doc["data"], list):
            raise ParameterError(f"{qa_file}: a JSON document needs a 'data' list")
        items = [x for x in doc["data"] if isinstance(x, dict)][:limit]
    else:
        items = [json.loads(x) for x in text.splitlines() if x.strip()][:limit]
    for k, it in enumerate(items):
        missing = [c for c in _QA_KEYS if c not in it]
        if missing:
            raise ParameterError(f"{qa_file}: line {k + 1} lacks {missing}")
    return items


def _pairs(it: dict[str, Any]) -> list[tuple[Any, Any]]:
    """The (dry audio, RIR) pairs of a question: one, or two for two sources."""
    pairs = [(it["audio_id"], it["reverb_id"])]
    if it.get("audio_id2") is not None and it.get("reverb_id2") is not None:
        pairs.append((it["audio_id2"], it["reverb_id2"]))
    return pairs


def _write_scene(
    path: Path, pairs: list[tuple[Any, Any]], dry_root: Path, rir_root: Path, channel_type: str
) -> None:
    """Render a scene's mixture and save it with its BRIRs (and depth map, if any)."""
    brirs = [_rir(rir_root / channel_type / r) for _, r in pairs]
    dry = [_dry(dry_root / f"{a}.wav") for a, _ in pairs]
    wet = np.mean([_wet(y, h) for y, h in zip(dry, brirs, strict=True)], axis=0)
    arrays = {"audio": wet.astype(np.float32)}
    for k, h in enumerate(brirs):
        arrays[f"brir_{k}"] = h.astype(np.float32)
    depth = rir_root / "depth" / pairs[0][1]
    if depth.is_file():
        arrays["depth"] = np.asarray(np.load(depth), dtype=np.float32)
    np.savez(path, **arrays)  # type: ignore[arg-type]


def _qa_row(
    it: dict[str, Any], sid: str, split: str, n_sources: int, scene: dict[str, Any]
) -> dict[str, Any]:
    """The ``qa.jsonl`` row of a question (a one-source classification also names
    the scene's events)."""
    row: dict[str, Any] = {"scene": sid, "split": split, "question_id": it.get("question_id"),
                           "type": it.get("question_type"), "n_sources": n_sources,
                           "question": it["question"], "answer": it["answer"]}  # fmt: skip
    if it.get("question_type") == "CLASSIFICATION":
        names = [x.strip() for x in str(it["answer"]).split(";") if x.strip()]
        row.update(type="I", kind="detect", events=names, target_events=names,
                   source_type="CLASSIFICATION")  # fmt: skip
        if n_sources == 1 and not scene["events"]:
            scene["events"] = names
    return row


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def read_slam_qa(
    qa_file: str | Path,
    anechoic_root: str | Path,
    reverb_root: str | Path,
    out: str | Path,
    *,
    split: str = "test",
    positions: str | Path | None = None,
    channel_type: str = "binaural",
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Read one split of SpatialSoundQA / BiDepth into ``out`` (module docs).

    Parameters
    ----------
    qa_file : path
        ``<qa_root>/<stage>/<split>.jsonl``, or the authors' ``<split>.json``
        (one document, the questions under ``data``).
    anechoic_root, reverb_root : path
        The dry audio and RIR roots.
    out : path
        Output directory (the :mod:`.dataset` layout, ``.npz`` scenes).
    split : str
        Split name written into the rows.
    positions : path, optional
        The reverb JSON with sensor and source positions (BAT labels).
    channel_type : str
        The RIR folder under ``reverb_root``.
    limit : int, optional
        Read the first ``limit`` questions only.

    Returns
    -------
    list of dict
        The ``scenes.jsonl`` rows.
    """
    items = _read_items(qa_file, limit)
    pos = _positions(positions)
    dry_root, rir_root = Path(anechoic_root), Path(reverb_root)
    outp = Path(out)
    (outp / "scenes").mkdir(parents=True, exist_ok=True)
    scenes: dict[tuple[Any, ...], str] = {}
    rows: list[dict[str, Any]] = []
    qa_rows: list[dict[str, Any]] = []
    for it in items:
        pairs = _pairs(it)
        key = tuple(pairs)
        if key not in scenes:
            sid = f"{len(scenes):06d}"
            scenes[key] = sid
            _write_scene(outp / "scenes" / f"{sid}.npz", pairs, dry_root, rir_root, channel_type)
            rows.append({
                "id": sid, "split": split, "seed": None, "receiver": channel_type, "sr": SR,
                "sources": [{"audio_id": a, "reverb_id": r} for a, r in pairs],
                "events": [],
                "labels": [pos[r] for _, r in pairs if r in pos],
            })  # fmt: skip
        sid = scenes[key]
        qa_rows.append(_qa_row(it, sid, split, len(pairs), rows[int(sid)]))
    _write_jsonl(outp / "scenes.jsonl", rows)
    _write_jsonl(outp / "qa.jsonl", qa_rows)
    return rows
