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
* ``fingerprint`` (on request, ``curate --stage fingerprint``): the
  clip's landmark fingerprint (:func:`fingerprint_stage`).
* ``features``: a feature preset (``bat`` or ``efficientat``) as a
  ``features`` column of per-row arrays (see :class:`FeatureStage`).
* tagging / localizability: register them with :func:`register_stage`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import _native
from .._internal.safe_files import atomic_file
from ..exceptions import ParameterError, ShapeError

__all__ = [
    "FINGERPRINT_COLUMN",
    "FINGERPRINT_DISTINCT",
    "Clips",
    "FeatureStage",
    "FnStage",
    "Stage",
    "check_requested",
    "feature_array",
    "fingerprint_stage",
    "levels_stage",
    "nested_tensor_array",
    "pass_column",
    "quality_stage",
    "register_stage",
    "registered_stages",
    "requested_stages",
]

#: Absolute level treated as clipping (full scale minus about 0.01 dB): the
#: Rust core's one declaration, the level its decoder measures at.
CLIP_LEVEL: float = _native.CLIP_LEVEL


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
    _mono: dict[int, list[np.ndarray]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.keys)

    def mono(self, sr: int | None = None) -> list[np.ndarray]:
        """Each clip's channel mean (:func:`agl_fast.presets.mono_input`),
        at ``sr`` Hz when given: computed once per rate for every stage.

        Parameters
        ----------
        sr : int or None
            Rate in Hz (default: the clips' own, :attr:`sr`).

        Returns
        -------
        list of np.ndarray [shape=(n_i,), dtype=float32]
        """
        rate = int(self.sr if sr is None else sr)
        if rate not in self._mono:
            if rate == int(self.sr):
                from ..presets import mono_input

                self._mono[rate] = [mono_input(y) for y in self.audio]
            else:
                from ..audio import resample

                self._mono[rate] = [
                    resample(m, orig_sr=int(self.sr), target_sr=rate) if m.size else m
                    for m in self.mono()
                ]
        return self._mono[rate]


Columns = Mapping[str, Sequence[Any] | pa.Array]


class Stage(Protocol):
    """The stage interface (see the module notes).

    A stage may also declare ``columns`` (the names it writes, for the
    docs and the output schema) and ``pass_column`` (a boolean column
    that, when false, fails the row: the quality stage's
    ``quality_pass``); both are optional.
    """

    name: str

    def __call__(self, clips: Clips) -> Columns: ...


def pass_column(stage: Stage) -> str | None:
    """The boolean column of ``stage`` that decides whether a row passes."""
    return getattr(stage, "pass_column", None)


@dataclass
class FnStage:
    """A stage made of a function (see :class:`Stage`)."""

    name: str
    fn: Callable[[Clips], Columns]
    columns: tuple[str, ...] = ()
    pass_column: str | None = None

    def __call__(self, clips: Clips) -> Columns:
        return self.fn(clips)


_REGISTRY: dict[str, Callable[[], Stage | None]] = {}
#: Stages a run takes only when asked (``curate --stage NAME``): name -> help.
_ON_REQUEST: dict[str, str] = {}


def register_stage(
    name: str, factory: Callable[[], Stage | None], *, on_request: str | None = None
) -> None:
    """Register a stage factory; it returns ``None`` when its component is
    unavailable (then the stage is left out of the run).

    A stage registered with ``on_request`` (its one-line help) runs only
    when a run names it (``BatchConfig.stages``, ``curate --stage NAME``);
    the others run in every batch.
    """
    _REGISTRY[name] = factory
    if on_request is None:
        _ON_REQUEST.pop(name, None)
    else:
        _ON_REQUEST[name] = on_request


def requested_stages() -> dict[str, str]:
    """The stages a run takes only when asked for, by name, with their help."""
    return dict(_ON_REQUEST)


def check_requested(requested: Sequence[str]) -> None:
    """Raise :class:`ParameterError` unless ``requested`` is a sequence of
    names of :func:`requested_stages`."""
    if isinstance(requested, str) or not all(isinstance(n, str) for n in requested):
        raise ParameterError(f"stages must be a sequence of names, got {requested!r}")
    unknown = [n for n in requested if n not in _ON_REQUEST]
    if unknown:
        raise ParameterError(
            f"unknown stage(s) {unknown}; stages to request: {sorted(_ON_REQUEST)}"
        )


def registered_stages(requested: Sequence[str] = ()) -> list[Stage]:
    """The available registered stages, in registration order: those that
    always run and those of ``requested`` (names of :func:`requested_stages`).

    Raises
    ------
    ParameterError
        A name of ``requested`` is no stage registered to run on request.
    """
    check_requested(requested)
    out = []
    for name, factory in _REGISTRY.items():
        if name in _ON_REQUEST and name not in requested:
            continue
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


levels_stage: Stage = FnStage("levels", _levels, ("peak_dbfs", "rms_dbfs", "clipped_fraction"))


def quality_stage(
    thresholds: Mapping[str, float] | None = None, n_threads: int | None = None
) -> Stage:
    """The quality-filter stage: the metrics of :mod:`agl_fast.quality`,
    ``quality_pass`` (its pass column) and ``reasons``.

    ``thresholds`` are thresholds by filter name
    (:func:`agl_fast.quality_filters.check_thresholds`; default: the
    registered defaults); ``n_threads`` its native threads (default: the
    library default).
    """
    from ..quality import METRICS, quality_filter

    limits = dict(thresholds or {})

    def run(clips: Clips) -> Columns:
        # The AGL1K filters are defined on mono audio: the channel mean.
        mono = clips.mono()
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
        table = quality_filter(mono, sr=clips.sr, n_threads=n_threads, **limits, **extra)
        return {
            ("quality_pass" if n == "passed" else n): table.column(n) for n in table.column_names
        }

    return FnStage("quality", run, (*METRICS, "quality_pass", "reasons"), "quality_pass")


register_stage("quality", quality_stage)


#: Columns of the ``fingerprint`` stage: the clip's landmark fingerprint
#: (:meth:`agl_fast.fingerprint.Fingerprint.to_bytes`), and how many
#: distinct hashes it holds (below :data:`agl_fast.fingerprint.MIN_DISTINCT`
#: the clip is not fingerprintable: never paired).
FINGERPRINT_COLUMN, FINGERPRINT_DISTINCT = "fingerprint", "fingerprint_distinct"


def fingerprint_stage(n_threads: int | None = None) -> Stage:
    """The ``fingerprint`` stage: each clip's landmark fingerprint
    (:func:`agl_fast.fingerprint.fingerprint_many`, which takes the channel
    mean at its analysis rate) as the binary column
    :data:`FINGERPRINT_COLUMN`, with its number of distinct hashes
    (:data:`FINGERPRINT_DISTINCT`)."""

    def run(clips: Clips) -> Columns:
        from ..fingerprint import fingerprint_many

        fps = fingerprint_many(clips.audio, [clips.sr] * len(clips), n_threads=n_threads)
        return {
            FINGERPRINT_COLUMN: pa.array([fp.to_bytes() for fp in fps], pa.binary()),
            FINGERPRINT_DISTINCT: pa.array([fp.distinct for fp in fps], pa.int64()),
        }

    return FnStage("fingerprint", run, (FINGERPRINT_COLUMN, FINGERPRINT_DISTINCT))


register_stage(
    "fingerprint",
    fingerprint_stage,
    on_request="landmark fingerprint of each clip (column fingerprint), read by "
    "'agl-fast dedup' to find duplicate recordings",
)


class FeatureStage:
    """Compute a registered feature recipe: columns ``features`` and
    ``features_shape``.

    ``features`` holds each clip's array as nested lists, one level per
    axis (``list<list<large_list<float32>>>`` for the 3-D recipes; null
    where the recipe rejects the clip, e.g. shorter than its padding), the
    per-row variable-shape layout that Arrow readers (Ray Data, Hugging Face
    ``datasets``, polars) load without a custom type; ``features_shape``
    (``list<int64>``) repeats the shape. The recipe's input follows its
    declared channels (:meth:`agl_fast.presets.Recipe.prepare`): a binaural
    recipe refuses a clip that is not two-channel unless ``channels_policy``
    converts it (column ``channels_policy`` says what was done), a mono one
    takes the channel mean. :func:`feature_array` turns a row back into an
    array.
    """

    def __init__(self, preset: str, n_threads: int | None = None, channels_policy: str = "refuse"):
        from ..presets import CHANNEL_POLICIES, get_recipe

        self.recipe = get_recipe(preset)
        if channels_policy not in CHANNEL_POLICIES:
            raise ParameterError(
                f"channels_policy must be one of {CHANNEL_POLICIES}, got {channels_policy!r}"
            )
        self.name = f"features:{preset}"
        self.preset = preset
        self.n_threads = n_threads
        self.channels_policy = channels_policy

    def _compute(self, items: list[np.ndarray], sr: int) -> list[np.ndarray]:
        return list(self.recipe.run(items, sr=sr, n_threads=self.n_threads, output="list"))

    def __call__(self, clips: Clips) -> Columns:
        feats: list[np.ndarray | None]
        extra: dict[str, pa.Array] = {}
        # The channel rule first: a clip it refuses raises here, so the
        # batch runs clip by clip and that row carries the reason.
        items = [
            self.recipe.prepare(y, self.channels_policy, key)
            for key, y in zip(clips.keys, clips.audio, strict=True)
        ]
        if self.recipe.channels == "binaural":
            extra["channels_policy"] = pa.array(
                ["as-is" if y.shape[0] == 2 else self.channels_policy for y in clips.audio],
                pa.string(),
            )
        try:
            feats = list(self._compute(items, clips.sr))
        except Exception:
            # One clip the recipe rejects (e.g. shorter than its padding)
            # must not cost the batch: go clip by clip.
            feats = []
            for y in items:
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


def atomic_write_parquet(table: pa.Table, path: Path, root: Path | None = None) -> None:
    """Write ``table`` to ``path`` through a new temporary file (never a
    symlink) and a rename, inside ``root`` (default: ``path``'s folder)."""
    with atomic_file(path, root=root) as fh:
        pq.write_table(table, fh)
