"""Tagging results as Arrow, and the curation pipeline's tagging stage.

One row per clip:

============== ===================================================== =========
column         type                                                  meaning
============== ===================================================== =========
clip           int64                                                 position in the input
tagger         string                                                tagger name
provider       string                                                ONNX Runtime provider used
duration_s     float64                                               clip length
n_windows      int32                                                 windows (frames) run
classes        list<struct<index: int32, name: string, fraction:    classes with time fraction
               float32>>                                             ``>= floor``, largest first
group_<key>    float32 (one column per top-level group)              group fraction (null for
                                                                     a tagger without groups)
speech_fraction float32                                              fraction of the class
                                                                     ``Speech`` (null if none)
top_tags       list<string>                                          up to ``top_k`` class names
error          string                                                null, or why the clip failed
============== ===================================================== =========

A clip that cannot be tagged (empty, not 1-D, non-finite) gets a row with
its ``error`` set and nulls elsewhere; the batch goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..exceptions import ParameterError
from .ontology import GROUP_KEYS
from .tagger import ClipTags, Tagger

__all__ = ["PipelineTaggingStage", "result_schema", "tag_table", "tagging_stage"]

_CLASS = pa.struct([("index", pa.int32()), ("name", pa.string()), ("fraction", pa.float32())])


def result_schema() -> pa.Schema:
    """Schema of the tagging table."""
    fields = [
        pa.field("clip", pa.int64()),
        pa.field("tagger", pa.string()),
        pa.field("provider", pa.string()),
        pa.field("duration_s", pa.float64()),
        pa.field("n_windows", pa.int32()),
        pa.field("classes", pa.list_(_CLASS)),
        *[pa.field(f"group_{k}", pa.float32()) for k in GROUP_KEYS],
        pa.field("speech_fraction", pa.float32()),
        pa.field("top_tags", pa.list_(pa.string())),
        pa.field("error", pa.string()),
    ]
    return pa.schema(fields)


def _clip_error(y: Any, sr: int) -> str | None:
    try:
        a = np.asarray(y, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        return f"not an audio array: {exc}"
    if a.ndim != 1:
        return f"expected a mono 1-D clip at {sr} Hz, got shape {a.shape}"
    if a.shape[0] == 0:
        return "empty clip"
    if not np.all(np.isfinite(a)):
        return "clip holds NaN or infinite samples"
    return None


def _row(k: int, tagger: Tagger, t: ClipTags, floor: float, top_k: int) -> dict[str, Any]:
    keep = np.flatnonzero(t.fractions >= floor)
    keep = keep[np.lexsort((-t.max_prob[keep], -t.fractions[keep]))]
    classes: list[dict[str, Any]] = [
        {"index": int(i), "name": tagger.class_names[i], "fraction": float(t.fractions[i])}
        for i in keep
    ]
    row: dict[str, Any] = {
        "clip": k,
        "tagger": tagger.name,
        "provider": tagger.provider,
        "duration_s": float(t.duration_s),
        "n_windows": t.n_windows,
        "classes": classes,
        "top_tags": [c["name"] for c in classes[:top_k] if c["fraction"] > 0],
        "error": None,
    }
    if tagger.reports_groups:
        for g, key in enumerate(tagger.group_keys):
            row[f"group_{key}"] = float(t.groups[g])
    if "Speech" in tagger.class_names:
        row["speech_fraction"] = float(t.fractions[tagger.class_names.index("Speech")])
    return row


def tag_table(
    tagger: Tagger, clips: Sequence[Any], *, floor: float = 0.01, top_k: int = 5
) -> pa.Table:
    """Tag mono clips at ``tagger.sr`` and return the table described above.

    Parameters
    ----------
    floor : float
        Classes with a time fraction below ``floor`` are left out of ``classes``
        (``floor=0`` keeps every class).
    top_k : int
        Length of ``top_tags`` (classes present, by fraction then peak probability).
    """
    if not 0.0 <= floor <= 1.0 or top_k < 0:
        raise ParameterError(f"need 0 <= floor <= 1 and top_k >= 0, got {floor}, {top_k}")
    errors = [_clip_error(y, tagger.sr) for y in clips]
    good = [k for k, e in enumerate(errors) if e is None]
    tags = tagger.tag([np.asarray(clips[k], dtype=np.float32) for k in good])
    rows: list[dict[str, Any]] = [
        {"clip": k, "tagger": tagger.name, "provider": tagger.provider, "error": e}
        for k, e in enumerate(errors)
    ]
    for k, t in zip(good, tags, strict=True):
        rows[k] = _row(k, tagger, t, floor, top_k)
    schema = result_schema()
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.table(cols, schema=schema)


def tagging_stage(
    clips: Sequence[Any],
    *,
    tagger: Tagger | str = "speech",
    model: str | Path | None = None,
    floor: float = 0.01,
    top_k: int = 5,
    **tagger_options: Any,
) -> pa.Table:
    """Curation pipeline stage: mono 32 kHz float32 clips in, one row per clip out.

    Parameters
    ----------
    clips : sequence of np.ndarray [shape=(n_i,), dtype=float32]
    tagger : Tagger or {'speech', 'efficientat'}
        A ready tagger, or the name of one to build: ``'speech'`` (Silero VAD,
        runs anywhere) or ``'efficientat'`` (needs ``model``, an exported ONNX
        file; pass ``device`` / ``allow_cpu_fallback`` as options).
    model : path or None
        ONNX file of the ``'efficientat'`` tagger.
    tagger_options
        Keyword arguments of the tagger class (threshold, hop_s, device, ...).
    """
    if isinstance(tagger, str):
        from .registry import build_tagger

        tagger = build_tagger(tagger, model, **tagger_options)
    elif tagger_options:
        raise ParameterError("tagger options apply only when the tagger is given by name")
    return tag_table(tagger, clips, floor=floor, top_k=top_k)


class PipelineTaggingStage:
    """Adapter to the curation pipeline's stage interface
    (:mod:`agl_fast.pipeline.stages`): ``__call__(clips)`` takes the batch's
    ``[channels, n]`` audio, tags the channel mean (resampled to the
    tagger's rate when the batch has another) and returns the columns of
    :func:`tag_table` prefixed with the tagger name (``speech_classes``,
    ``speech_group_human_sounds``, ``speech_error``, ...).

    Register it with
    ``register_stage("tagging", lambda: PipelineTaggingStage(SpeechTagger()))``.
    """

    def __init__(self, tagger: Tagger, *, floor: float = 0.01, top_k: int = 5) -> None:
        self.tagger = tagger
        self.name = f"tagging_{tagger.name}"
        self.floor = floor
        self.top_k = top_k

    def __call__(self, clips: Any) -> dict[str, pa.Array]:
        # the channel mean at the tagger's rate, shared by every stage
        mono = clips.mono(self.tagger.sr)
        table = tag_table(self.tagger, mono, floor=self.floor, top_k=self.top_k)
        prefix = self.tagger.name
        return {
            (c if c.startswith(f"{prefix}_") else f"{prefix}_{c}"): table.column(c).combine_chunks()
            for c in table.column_names
            if c not in ("clip", "tagger")
        }
