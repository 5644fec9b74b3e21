"""Pipeline stages: callables that turn a batch of decoded clips into columns.

A stage is any object with a ``name`` and ``__call__(clips) -> dict`` that
returns, for the clips it was given (only the files that decoded), a mapping
of column name to a sequence or Arrow array with one entry per clip. Columns
of every stage are joined to the output table; rows of files that failed to
decode get nulls. A stage that raises marks its whole batch with a
``stage_error`` instead of stopping the run.

Built in:

* ``levels``: peak and RMS level in dBFS and the share of clipped samples
  (always on; measured by the decoder in its finiteness pass when it hands
  them over in :attr:`Clips.levels`, else one native pass per clip).
* ``quality``: the acoustic quality filters of :mod:`agl_fast.quality`, when
  that module is present (metrics, ``quality_pass`` and reasons).
* ``features``: a feature preset (``bat`` or ``efficientat``) as a
  ``features`` column of per-row arrays (see :class:`FeatureStage`).
* tagging / localizability: register them with :func:`register_stage`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import ParameterError, ShapeError

__all__ = [
    "Clips",
    "FeatureStage",
    "Stage",
    "feature_array",
    "levels_stage",
    "nested_tensor_array",
    "quality_stage",
    "register_stage",
    "registered_stages",
]

#: Absolute level treated as clipping (full scale minus about 0.01 dB).
CLIP_LEVEL = 0.999


@dataclass
class Clips:
    """A batch of decoded clips handed to each stage.

    Attributes
    ----------
    keys : list of str
        Row identities.
    audio : list of np.ndarray [shape=(channels, n), dtype=float32]
        Decoded audio at ``sr`` Hz.
    sr : int
        Sample rate in Hz.
    batch_id : int
        Index of the batch within its run (0 when the batch function runs
        on its own; stages must not depend on it).
    levels : np.ndarray [shape=(len(keys), 4), dtype=float64] or None
        Peak ``|x|``, RMS, share of samples at or above :data:`CLIP_LEVEL`
        and share of samples at the peak of each clip (all channels), when
        the decoder already measured them: the ``levels`` stage then reads
        them instead of another pass, and the ``quality`` stage takes its
        ``rms``, ``clipping_ratio`` and ``full_scale_ratio`` from them for
        mono clips (the same values, bit for bit).
    """

    keys: list[str]
    audio: list[np.ndarray]
    sr: int
    batch_id: int = 0
    levels: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.keys)


Columns = Mapping[str, Sequence[Any] | pa.Array]


class Stage(Protocol):
    """The stage interface (see the module notes)."""

    name: str

    def __call__(self, clips: Clips) -> Columns: ...


@dataclass
class _FnStage:
    name: str
    fn: Callable[[Clips], Columns]

    def __call__(self, clips: Clips) -> Columns:
        return self.fn(clips)


_REGISTRY: dict[str, Callable[[], Stage | None]] = {}


def register_stage(name: str, factory: Callable[[], Stage | None]) -> None:
    """Register a stage factory; it returns ``None`` when its component is
    unavailable (then the stage is left out of the run)."""
    _REGISTRY[name] = factory


def registered_stages() -> list[Stage]:
    """The available registered stages, in registration order."""
    out = []
    for factory in _REGISTRY.values():
        st = factory()
        if st is not None:
            out.append(st)
    return out


def _db(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(x > 0, 20 * np.log10(np.maximum(x, 1e-30)), -np.inf)


def _levels(clips: Clips) -> Columns:
    # One native pass per clip over all its samples (the audio reaching the
    # stages is finite: non-finite files are error rows at decoding).
    from .. import _native

    if clips.levels is not None:
        m = clips.levels
    else:
        flat = [np.ascontiguousarray(y, dtype=np.float32).reshape(-1) for y in clips.audio]
        m = _native.levels(flat, CLIP_LEVEL)
    return {
        "peak_dbfs": pa.array(_db(m[:, 0]), pa.float64()),
        "rms_dbfs": pa.array(_db(m[:, 1]), pa.float64()),
        "clipped_fraction": pa.array(m[:, 2], pa.float64()),
    }


levels_stage: Stage = _FnStage("levels", _levels)


def _downmix(y: np.ndarray) -> np.ndarray:
    """The channel mean of ``[channels, n]`` audio (float32, contiguous)."""
    if y.ndim == 1:
        return y
    if y.shape[0] == 1:
        return y[0]
    if y.shape[0] == 2:
        # What ``y.mean(axis=0)`` gives for two channels, without its
        # reduction machinery: (a + b) / 2 in float32.
        out = np.add(y[0], y[1])
        out *= np.float32(0.5)
        return out
    return np.ascontiguousarray(y.mean(axis=0), dtype=np.float32)


def quality_stage(
    thresholds: Mapping[str, float] | None = None, n_threads: int | None = None
) -> Stage | None:
    """The quality-filter stage, or ``None`` without :mod:`agl_fast.quality`.

    ``thresholds`` are keyword arguments of
    :func:`agl_fast.quality.quality_filter` (default: its defaults);
    ``n_threads`` its native threads (default: the library default).
    """
    if importlib.util.find_spec("agl_fast.quality") is None:
        return None
    quality = importlib.import_module("agl_fast.quality")
    limits = dict(thresholds or {})

    def run(clips: Clips) -> Columns:
        # The AGL1K filters are defined on mono audio: the channel mean.
        mono = [_downmix(y) for y in clips.audio]
        extra: dict[str, Any] = {}
        if (
            clips.levels is not None
            and clips.levels.shape[1] >= 4
            and "full_scale_threshold" not in limits
            and all(y.ndim == 1 or y.shape[0] == 1 for y in clips.audio)
        ):
            # One channel: the decoder's levels are the filters' sample
            # statistics at CLIP_LEVEL (rms, share at the peak, share at or
            # above full scale), so the clips are not scanned for them again.
            extra["clip_stats"] = clips.levels[:, [1, 3, 2]]
            extra["full_scale_threshold"] = CLIP_LEVEL
        table = quality.quality_filter(mono, sr=clips.sr, n_threads=n_threads, **limits, **extra)
        rename = {"pass": "quality_pass", "passed": "quality_pass"}
        return {rename.get(n, n): table.column(n) for n in table.column_names}

    return _FnStage("quality", run)


register_stage("quality", quality_stage)


class FeatureStage:
    """Compute a feature preset: columns ``features`` and ``features_shape``.

    ``features`` holds each clip's array as nested lists, one level per
    axis (``list<list<large_list<float32>>>`` for the 3-D presets; null
    where the preset rejects the clip, e.g. shorter than its padding), the
    per-row variable-shape layout that Arrow readers (Ray Data, Hugging Face
    ``datasets``, polars) load without a custom type; ``features_shape``
    (``list<int64>``) repeats the shape. ``bat`` needs two channels (a mono
    clip is duplicated, more are cut to the first two); ``efficientat``
    takes the channel mean. :func:`feature_array` turns a row back into an
    array.
    """

    def __init__(self, preset: str, n_threads: int | None = None, channels_policy: str = "refuse"):
        from ..presets import CHANNEL_POLICIES

        if preset not in ("bat", "efficientat"):
            raise ParameterError(f"features must be 'bat', 'efficientat' or 'none', got {preset!r}")
        if channels_policy not in CHANNEL_POLICIES:
            raise ParameterError(
                f"channels_policy must be one of {CHANNEL_POLICIES}, got {channels_policy!r}"
            )
        self.name = f"features:{preset}"
        self.preset = preset
        self.n_threads = n_threads
        self.channels_policy = channels_policy

    def _compute(self, audio: list[np.ndarray], sr: int) -> list[np.ndarray]:
        from .. import presets

        if self.preset == "bat":
            items = [presets.binaural_input(y, self.channels_policy) for y in audio]
            out = presets.bat(items, sr=sr, n_threads=self.n_threads, output="list")
        else:
            items = [np.ascontiguousarray(y.mean(axis=0, dtype=np.float32)) for y in audio]
            out = presets.efficientat(items, sr=sr, n_threads=self.n_threads, output="list")
        return list(out)

    def __call__(self, clips: Clips) -> Columns:
        from ..presets import binaural_input

        feats: list[np.ndarray | None]
        extra: dict[str, pa.Array] = {}
        if self.preset == "bat":
            # The channel rule first: a clip it refuses raises here, so the
            # batch runs clip by clip and that row carries the reason.
            for key, y in zip(clips.keys, clips.audio, strict=True):
                binaural_input(y, self.channels_policy, key)
            extra["channels_policy"] = pa.array(
                ["as-is" if y.shape[0] == 2 else self.channels_policy for y in clips.audio],
                pa.string(),
            )
        try:
            feats = list(self._compute(clips.audio, clips.sr))
        except Exception:
            # One clip the preset rejects (e.g. shorter than its padding)
            # must not cost the batch: go clip by clip.
            feats = []
            for y in clips.audio:
                try:
                    feats.append(self._compute([y], clips.sr)[0])
                except Exception:
                    feats.append(None)
        return {
            **extra,
            "features": nested_tensor_array(feats),
            "features_shape": pa.array(
                [None if f is None else list(f.shape) for f in feats], pa.list_(pa.int64())
            ),
        }


def nested_tensor_array(arrays: Sequence[np.ndarray | None]) -> pa.Array:
    """Arrays of one rank (any shapes) as a nested-list column, one list
    level per axis, float32 values, without a per-element copy; ``None``
    items are null rows.

    The innermost level has 64-bit offsets (``large_list``), so a column of
    long clips never overflows.
    """
    present = [a for a in arrays if a is not None]
    ndim = present[0].ndim if present else 1
    if any(a.ndim != ndim for a in present):
        raise ShapeError(
            f"arrays must share one rank, got ranks {sorted({a.ndim for a in present})}"
        )
    flat = [np.ascontiguousarray(a, dtype=np.float32).reshape(-1) for a in present]
    values = pa.array(np.concatenate(flat) if flat else np.zeros(0, np.float32), pa.float32())
    # Lengths of each level, outermost first: rows, then per-row axis sizes.
    lengths: list[list[int]] = [[] for _ in range(ndim)]
    for a in present:
        count = 1
        for axis in range(ndim):
            lengths[axis].extend([a.shape[axis]] * count)
            count *= a.shape[axis]
    inner: pa.Array = values
    for axis in range(ndim - 1, -1, -1):
        offsets = np.zeros(len(lengths[axis]) + 1, np.int64)
        np.cumsum(lengths[axis], out=offsets[1:])
        if axis == ndim - 1:
            inner = pa.LargeListArray.from_arrays(pa.array(offsets), inner)
        else:
            inner = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), inner)
    if len(present) == len(arrays):
        return inner
    # Null rows: take the present rows into place.
    slot: list[int | None] = []
    j = 0
    for item in arrays:
        slot.append(None if item is None else j)
        j += item is not None
    return inner.take(pa.array(slot, pa.int64()))


def feature_array(column: pa.Array | pa.ChunkedArray, i: int) -> np.ndarray | None:
    """Row ``i`` of a :func:`nested_tensor_array` column as a float32
    ndarray (``None`` for a null row)."""
    row = column.slice(i, 1)
    arr = row.combine_chunks() if isinstance(row, pa.ChunkedArray) else row
    if arr.null_count:
        return None
    shape: list[int] = []
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        lengths = arr.value_lengths().to_numpy(zero_copy_only=False)
        shape.append(int(lengths[0]) if len(lengths) else 0)
        arr = arr.flatten()
    return arr.to_numpy(zero_copy_only=False).reshape(shape)


def atomic_write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
