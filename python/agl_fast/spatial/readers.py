"""Readers for released spatial-audio QA data, into the layout of :mod:`.dataset`.

SpatialSoundQA (BAT) as its loaders read it, and BiDepth through the same
configuration (OWL's code keeps SLAM-LLM's data settings ``qa_data_root``,
``anechoic_data_root``, ``reverb_data_root``, ``channel_type``; reading
BiDepth in place, without writing scenes, is :mod:`.bidepth`):

* questions: ``<qa_root>/<stage>/<split>.json``, a JSON object whose
  ``data`` list holds the rows (OWL's files; JSON lines, ``.jsonl``, are
  read too), with ``audio_id``, ``reverb_id``, ``audio_id2``, ``reverb_id2``
  (null for one source), ``question_id``, ``question_type``, ``question``,
  ``answer`` (:func:`.bidepth.iter_qa_rows`);
* dry source audio: ``<anechoic_root>/<audio_id>.wav`` (any rate, first
  channel; resampled to 32 kHz);
* binaural RIRs: ``<reverb_root>/<channel_type>/<reverb_id>``, NumPy
  ``[2, L]`` at 32 kHz;
* RIR positions (Spatial-AST's reverb JSON, optional): ``{"data": [{"fname":
  <reverb_id>, "sensor_position": "x,y,z", "source_position": "x,y,z"},
  ...]}`` in the simulator's frame (x right, y up, -z ahead of the
  listener), giving the BAT labels as Spatial-AST computes them
  (:func:`.bidepth.read_positions`);
* depth panoramas, when present: ``<reverb_root>/depth/<reverb_id>``, NumPy
  ``[H, W]`` in metres (OWL's loader reads no depth file; this location is
  agl-fast's own).

Mixtures are made as those loaders make them, by the one rule of
:func:`.bidepth.render_row` (:func:`.mix.spatialize`): each source
normalised to -14 dBFS RMS, convolved with its RIR, cut or zero-padded to
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

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from .._internal.safe_files import resolve_inside
from ..exceptions import ParameterError
from .bidepth import (
    RESAMPLERS,
    BidepthLayout,
    event_names,
    iter_qa_rows,
    labels_from_positions,
    load_rir,
    read_positions,
    render_row,
)
from .defaults import CLIP_SECONDS, SR

__all__ = ["CLIP_SECONDS", "SR", "labels_from_positions", "read_slam_qa"]

_QA_KEYS = ("audio_id", "reverb_id", "question", "answer")


def _read_items(qa_file: str | Path, limit: int | None) -> list[dict[str, Any]]:
    """The questions of a QA file (the first ``limit``), each with the keys needed."""
    items = list(itertools.islice(iter_qa_rows(qa_file), limit))
    for k, it in enumerate(items):
        if not isinstance(it, dict):
            raise ParameterError(f"{qa_file}: row {k + 1} is not an object")
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


def _write_scene(path: Path, pairs: list[tuple[Any, Any]], layout: BidepthLayout) -> None:
    """Render a scene's mixture and save it with its BRIRs (and depth map, if any)."""
    rir_root = layout.reverb_data_root
    brirs = [load_rir(layout.rir_path(r)) for _, r in pairs]
    arrays = {"audio": render_row(layout, pairs)}
    for k, h in enumerate(brirs):
        arrays[f"brir_{k}"] = h.astype(np.float32)
    depth = resolve_inside(rir_root / "depth", str(pairs[0][1]), what="depth map")
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
        names = event_names(it["answer"])
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
    resampler: str = RESAMPLERS[0],
) -> list[dict[str, Any]]:
    """Read one split of SpatialSoundQA / BiDepth into ``out`` (module docs).

    Parameters
    ----------
    qa_file : path
        ``<qa_root>/<stage>/<split>.json`` (or ``.jsonl``).
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
    resampler : str
        How sources reach 32 kHz (:data:`.bidepth.RESAMPLERS`; ``polyphase``
        is the loaders' own SciPy call).

    Returns
    -------
    list of dict
        The ``scenes.jsonl`` rows.
    """
    items = _read_items(qa_file, limit)
    pos = read_positions(positions)
    layout = BidepthLayout(Path(), "", Path(anechoic_root), Path(reverb_root), channel_type,
                           resampler=resampler)  # fmt: skip
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
            _write_scene(outp / "scenes" / f"{sid}.npz", pairs, layout)
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
