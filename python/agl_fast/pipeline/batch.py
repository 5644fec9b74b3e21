"""The pure batch function of the pipeline: a table of inputs in, a table of
rows out.

:func:`process_batch` decodes the files named by a ``path`` column, runs the
stages (levels, quality, optional features, optional tagging, any extra
stage) and returns one row per input row, in input order. It writes no
file, keeps no state between calls and gives the same table for the same
input whatever the thread count. A file that cannot be decoded, or a clip a
stage rejects, is a row with its error (``error_type`` / ``error_message`` /
``stage_error``), never an exception that costs the other rows.

``agl-fast curate`` runs it in worker processes (see
:mod:`agl_fast.pipeline.supervisor`); a distributed engine can map it over
Arrow blocks as it is (:class:`BatchProcessor` is the callable-class form,
whose stages, e.g. an ONNX tagger, are built once).

>>> import pyarrow as pa
>>> from agl_fast.pipeline import BatchConfig, process_batch
>>> rows = process_batch(pa.table({"path": ["a.flac"]}), BatchConfig(sr=16000))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from .._internal.onnx import DEVICES, Device
from ..audio import load_arrays
from ..exceptions import ParameterError, ShapeError
from ..manifest import COORDINATE_PROBLEM
from ..presets import CHANNEL_POLICIES, get_recipe
from ..quality_filters import check_thresholds, defaults
from ..tagging.registry import get_tagger
from ..tagging.windows import DEFAULT_FRACTION_SCHEME, FRACTION_SCHEMES
from .precheck import FILE_NOT_FOUND
from .stages import Clips, FeatureStage, Stage, levels_stage, pass_column, quality_stage
from .stages import registered_stages as _registered

__all__ = [
    "BASE_COLUMNS",
    "DEFAULT_MIN_DURATION",
    "INPUT_COLUMNS",
    "BatchConfig",
    "BatchProcessor",
    "error_rows",
    "process_batch",
    "run_stage",
]

#: Columns of the input table the batch function reads (``key`` defaults to
#: ``path``; a non-null ``bytes`` value is the file itself, decoded from
#: memory, with ``path`` naming it and its extension as the format hint, as
#: ``ray.data.read_binary_files(..., include_paths=True)`` gives them); every
#: other input column is carried to the output unchanged.
INPUT_COLUMNS = ("key", "path", "bytes")

#: The leading columns of every output row, in this order.
BASE_COLUMNS = (
    "key",
    "path",
    "duration",
    "sr",
    "channels",
    "frames",
    "source_sr",
    "source_channels",
    "truncated",
    "passed",
    "error_type",
    "error_message",
    "stage_error",
)

#: The decoder's level columns, handed to the ``levels`` stage.
_LEVELS = ("peak", "rms", "clipped_fraction", "peak_fraction")

#: Seconds a clip needs at least to pass (the ``min_duration`` rule).
DEFAULT_MIN_DURATION = 1.0
#: What a file longer than ``max_duration`` becomes (:class:`BatchConfig`).
LONG_CLIPS = ("cut", "fail")
#: Rejection reasons of the duration rules (in the ``reasons`` column).
TOO_SHORT, TOO_LONG = "too_short", "too_long"

#: ``error_type`` of a row whose file decodes to less than its header
#: declares.
TRUNCATED_SOURCE = "TruncatedSource"
#: A file is cut when its decoded length falls short of the declared one by
#: more than this share of it ...
CUT_SOURCE_TOLERANCE = 0.01
#: ... and by more than this many seconds (encoder padding and rounding of
#: frame counts stay well below both).
CUT_SOURCE_SECONDS = 0.1

#: ``error_type`` of a row whose manifest coordinates are invalid.
INVALID_COORDINATES = "InvalidCoordinates"

#: ``error_type`` of a row whose file ran out of memory (a ``MemoryError``
#: in the worker, or a worker killed under ``memory_limit``).
RESOURCE_LIMIT = "ResourceLimit"


@dataclass
class BatchConfig:
    """What the batch function computes per file (recorded in the summary).

    Attributes
    ----------
    sr : int
        Output sample rate in Hz.
    mono : bool
        Downmix to one channel at the source rate.
    features : {"none", "bat", "efficientat"}
        Feature preset written to the ``features`` column.
    max_duration : float or None
        Seconds decoded per file at most: a longer file is decoded up to
        this, flagged ``truncated`` and, with ``long_clips="fail"``, fails
        with the reason ``too_long``.
    min_duration : float
        A clip shorter than this many seconds fails with the reason
        ``too_short`` (default :data:`DEFAULT_MIN_DURATION`: the AGL1K
        benchmark's clips last 10-180 s, and the filters need at least a
        second to say anything); 0 turns the rule off.
    allow_cut_sources : bool
        Keep files that decode to less than their header declares (a
        ``decoded_fraction`` below 1) instead of failing them as
        :data:`TRUNCATED_SOURCE`.
    channels_policy : {"refuse", "mono-to-binaural"}
        What the ``bat`` features do with a clip that is not two-channel
        (:data:`agl_fast.presets.CHANNEL_POLICIES`).
    long_clips : {"cut", "fail"}
        What a file longer than ``max_duration`` becomes: its first
        ``max_duration`` seconds (``"cut"``, default) or a failed row.
    res_type : {"fast", "hq", "vhq"}
        Resampling filter.
    threads : int or None
        Native threads of one batch call (default: the library default).
    tag : tuple of str
        Tagging stages: ``"speech"`` and/or ``"efficientat"``.
    tag_model, tag_device, allow_cpu
        The EfficientAT tagger's ONNX file, device and CPU fallback.
    quality_thresholds : dict of str to float
        Thresholds of the quality filter, by name of
        :data:`agl_fast.quality_filters.DEFAULT_THRESHOLDS` (agl-fast's choices; the
        paper gives none); names left out keep their default.
    fraction_scheme : {"segments10", "time"}
        How the taggers turn window decisions into time fractions
        (:data:`agl_fast.tagging.FRACTION_SCHEMES`).
    """

    sr: int = 32000
    mono: bool = False
    features: str = "none"
    max_duration: float | None = 600.0
    min_duration: float = DEFAULT_MIN_DURATION
    long_clips: str = "cut"
    channels_policy: str = "refuse"
    allow_cut_sources: bool = False
    res_type: str = "hq"
    threads: int | None = None
    tag: tuple[str, ...] = field(default_factory=tuple)
    tag_model: str | None = None
    tag_device: str = "auto"
    allow_cpu: bool = False
    quality_thresholds: dict[str, float] = field(default_factory=defaults)
    fraction_scheme: str = DEFAULT_FRACTION_SCHEME

    def thresholds(self) -> dict[str, float]:
        """Every quality threshold: the defaults updated by :attr:`quality_thresholds`."""
        return check_thresholds(self.quality_thresholds)

    def validate(self) -> None:
        """Raise :class:`ParameterError` for options no batch could run with."""
        check_thresholds(self.quality_thresholds)
        if self.fraction_scheme not in FRACTION_SCHEMES:
            raise ParameterError(
                f"fraction_scheme must be one of {FRACTION_SCHEMES}, "
                f"got fraction_scheme={self.fraction_scheme!r}"
            )
        if self.features != "none":
            get_recipe(self.features)
        if self.tag_device not in DEVICES:
            raise ParameterError(
                f"tag_device must be one of {DEVICES}, got tag_device={self.tag_device!r}"
            )
        for name in self.tag:
            if get_tagger(name).needs_model and not self.tag_model:
                raise ParameterError(f"tag {name!r} needs tag_model (--tag-model MODEL.onnx)")
        if not isinstance(self.sr, int) or self.sr < 1:
            raise ParameterError(f"sr must be a positive integer, got sr={self.sr!r}")
        if self.res_type not in ("fast", "hq", "vhq"):
            raise ParameterError(
                f"res_type must be 'fast', 'hq' or 'vhq', got res_type={self.res_type!r}"
            )
        if self.max_duration is not None and not self.max_duration > 0:
            raise ParameterError(
                f"max_duration must be > 0 or None, got max_duration={self.max_duration!r}"
            )
        if (
            isinstance(self.min_duration, bool)
            or not isinstance(self.min_duration, (int, float))
            or not 0 <= self.min_duration < float("inf")
        ):
            raise ParameterError(
                f"min_duration must be a finite number >= 0, got min_duration={self.min_duration!r}"
            )
        if not isinstance(self.allow_cut_sources, bool | np.bool_):
            raise ParameterError(
                "allow_cut_sources must be a bool, got "
                f"allow_cut_sources={self.allow_cut_sources!r}"
            )
        if self.channels_policy not in CHANNEL_POLICIES:
            raise ParameterError(
                f"channels_policy must be one of {CHANNEL_POLICIES}, "
                f"got channels_policy={self.channels_policy!r}"
            )
        if self.long_clips not in LONG_CLIPS:
            raise ParameterError(
                f"long_clips must be one of {LONG_CLIPS}, got long_clips={self.long_clips!r}"
            )
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ParameterError(
                f"threads must be a positive integer, got threads={self.threads!r}"
            )


def build_stages(cfg: BatchConfig) -> list[Stage]:
    """The stages ``cfg`` asks for: levels, the registered ones (quality),
    features, then tagging."""
    stages: list[Stage] = [levels_stage]
    for st in _registered():
        # the quality filter with this configuration's thresholds
        if st.name == "quality":
            st = quality_stage(cfg.thresholds(), cfg.threads) or st
        stages.append(st)
    if cfg.features != "none":
        stages.append(FeatureStage(cfg.features, cfg.threads, cfg.channels_policy))
    stages += [_tagging_stage(name, cfg) for name in dict.fromkeys(cfg.tag)]
    return stages


def _tagging_stage(name: str, cfg: BatchConfig) -> Stage:
    """The pipeline stage of the registered tagger ``name``."""
    from ..tagging.registry import build_tagger, get_tagger
    from ..tagging.results import PipelineTaggingStage

    spec = get_tagger(name)
    offered = {
        "fraction_scheme": cfg.fraction_scheme,
        "device": cast(Device, cfg.tag_device),
        "allow_cpu_fallback": cfg.allow_cpu,
    }
    options = {k: v for k, v in offered.items() if k in spec.curate_options}
    model = str(cfg.tag_model) if spec.needs_model else None
    return PipelineTaggingStage(build_tagger(name, model, **options))


def stage_names(cfg: BatchConfig) -> list[str]:
    """Names of the stages :func:`build_stages` gives, without building the
    costly ones (taggers load a model)."""
    names = [st.name for st in (levels_stage, *_registered())]
    if cfg.features != "none":
        names.append(f"features:{cfg.features}")
    names += [f"tagging_{name}" for name in dict.fromkeys(cfg.tag)]
    return names


class BatchProcessor:
    """:func:`process_batch` with its stages built once (a tagger's model
    is loaded in the constructor, not per batch).

    Parameters
    ----------
    config : BatchConfig
        What to compute.
    extra_stages : sequence of Stage
        Stages run after the configured ones (see :mod:`.stages`).
    """

    def __init__(self, config: BatchConfig, extra_stages: Sequence[Stage] = ()) -> None:
        config.validate()
        self.config = config
        self.stages: list[Stage] = [*build_stages(config), *extra_stages]

    def __call__(self, table: pa.Table) -> pa.Table:
        """Rows for the files of ``table`` (see :func:`process_batch`)."""
        keys, paths, carried = _inputs_of(table)
        sources = _sources_of(table, paths)
        try:
            out = self._decode_and_run(keys, paths, sources)
        except Exception as exc:
            # Something one file caused failed the whole call (an allocation,
            # a value no column type holds): go file by file so that only
            # that file's row carries the error. Options were validated.
            if len(keys) > 1:
                rows = [self(table.slice(i, 1)) for i in range(len(keys))]
                return pa.concat_tables(rows, promote_options="permissive")
            out = _error_table(keys, paths, _error_type(exc), f"{keys[0]}: {exc}")
        for name in carried.column_names:
            out = out.append_column(name, carried.column(name))
        return _int64(_fail_bad_coordinates(_fail_cut_sources(out, self.config)))

    def _decode_and_run(
        self, keys: list[str], paths: list[str], sources: tuple[list[Any], list[str | None]]
    ) -> pa.Table:
        cfg = self.config
        arrays, table = load_arrays(
            sources[0],
            formats=sources[1] if any(f is not None for f in sources[1]) else None,
            keys=keys,
            sr=cfg.sr,
            mono=cfg.mono,
            max_duration=cfg.max_duration,
            res_type=cfg.res_type,
            n_threads=cfg.threads,
        )
        # In-memory files keep the path their row gave (the loader names
        # them by number).
        at = table.column_names.index("path")
        table = table.set_column(at, "path", pa.array([p or None for p in paths], pa.string()))
        ok = [i for i, a in enumerate(arrays) if a is not None]
        audio = [a for a in arrays if a is not None]
        levels = np.column_stack(
            [table.column(c).to_numpy(zero_copy_only=False)[ok] for c in _LEVELS]
        )
        table = table.drop_columns(list(_LEVELS))
        kinds = table.column("error_type").to_pylist()
        if any(k in _ROW_KINDS for k in kinds):
            fixed = [_ROW_KINDS.get(k, k) for k in kinds]
            i = table.column_names.index("error_type")
            table = table.set_column(i, "error_type", pa.array(fixed, pa.string()))
        clips = Clips([keys[i] for i in ok], audio, cfg.sr, 0, levels)
        # Row i of the output takes row slot[i] of a stage's columns (null
        # for a file that failed to decode).
        slot_of: list[int | None] = [None] * len(keys)
        for j, i in enumerate(ok):
            slot_of[i] = j
        slot = pa.array(slot_of, pa.int64())
        stage_errors: list[str | None] = [None] * len(keys)
        passed = np.array([a is not None for a in arrays], dtype=bool)
        for st in self.stages:
            cols, errs = run_stage(st, clips) if len(clips) else ({}, [None] * 0)
            for j, e in enumerate(errs):
                if e is not None and stage_errors[ok[j]] is None:
                    stage_errors[ok[j]] = e
            for name, arr in cols.items():
                full = arr.take(slot)
                table = table.append_column(name, full)
                if name == pass_column(st):
                    vals = full.to_numpy(zero_copy_only=False)
                    passed &= np.array([bool(v) if v is not None else False for v in vals])
        # a row a stage could not compute (e.g. a clip its recipe refuses)
        # does not pass silently: its stage_error says why
        passed &= np.array([e is None for e in stage_errors], dtype=bool)
        table, passed = _duration_rules(table, passed, cfg)
        table = table.append_column("passed", pa.array(passed, pa.bool_()))
        table = table.append_column("stage_error", pa.array(stage_errors, pa.string()))
        return _ordered(table)


def _duration_rules(
    table: pa.Table, passed: np.ndarray, cfg: BatchConfig
) -> tuple[pa.Table, np.ndarray]:
    """Reject decoded clips shorter than ``min_duration`` (``too_short``)
    and, with ``long_clips="fail"``, files cut at ``max_duration``
    (``too_long``): ``passed`` turns false and the reason joins the row's
    ``reasons`` (created when no stage wrote one)."""
    duration = table.column("duration").to_pylist()
    cut = table.column("truncated").to_pylist()
    decoded = table.column("error_type").to_pylist()
    extra: list[list[str]] = [[] for _ in duration]
    for i, (d, t, e) in enumerate(zip(duration, cut, decoded, strict=True)):
        if e is not None or d is None:
            continue
        if d < cfg.min_duration:
            extra[i].append(TOO_SHORT)
        if t and cfg.long_clips == "fail":
            extra[i].append(TOO_LONG)
    if not any(extra):
        return table, passed
    passed = passed & np.array([not x for x in extra], dtype=bool)
    if "reasons" in table.column_names:
        old = table.column("reasons").to_pylist()
        merged = [(o or []) + x if (o or x) else o for o, x in zip(old, extra, strict=True)]
        at = table.column_names.index("reasons")
        table = table.set_column(at, "reasons", pa.array(merged, pa.list_(pa.string())))
    else:
        merged = [x if e is None else None for x, e in zip(extra, decoded, strict=True)]
        table = table.append_column("reasons", pa.array(merged, pa.list_(pa.string())))
    return table, passed


def _fail_cut_sources(table: pa.Table, cfg: BatchConfig) -> pa.Table:
    """Rows whose file decoded to less than its header declares (the
    loader's ``decoded_fraction``, short by more than
    :data:`CUT_SOURCE_TOLERANCE` of it and :data:`CUT_SOURCE_SECONDS`) fail
    with ``error_type`` :data:`TRUNCATED_SOURCE`, unless
    ``allow_cut_sources`` (then the column alone flags them)."""
    if cfg.allow_cut_sources or "decoded_fraction" not in table.column_names:
        return table
    fractions = table.column("decoded_fraction").to_pylist()
    durations = table.column("duration").to_pylist()
    cut = []
    for i, (f, d) in enumerate(zip(fractions, durations, strict=True)):
        if f is None or d is None or f >= 1.0 - CUT_SOURCE_TOLERANCE:
            continue
        declared = d / f if f > 0 else float("inf")
        if declared - d > CUT_SOURCE_SECONDS:
            cut.append((i, d, declared))
    if not cut:
        return table
    kinds = table.column("error_type").to_pylist()
    messages = table.column("error_message").to_pylist()
    passed = table.column("passed").to_pylist()
    keys = table.column("key").to_pylist()
    for i, d, declared in cut:
        if kinds[i] is None:
            kinds[i], passed[i] = TRUNCATED_SOURCE, False
            messages[i] = (
                f"{keys[i]}: stream ends early after {d:.2f} s of the {declared:.2f} s its "
                "header declares (cut or damaged file)"
            )
    for name, vals, typ in (
        ("error_type", kinds, pa.string()),
        ("error_message", messages, pa.string()),
        ("passed", passed, pa.bool_()),
    ):
        table = table.set_column(table.column_names.index(name), name, pa.array(vals, typ))
    return table


def _fail_bad_coordinates(table: pa.Table) -> pa.Table:
    """Rows whose manifest coordinates are invalid (the manifest reader's
    :data:`~agl_fast.manifest.COORDINATE_PROBLEM`) fail with
    ``error_type`` :data:`INVALID_COORDINATES` and the reason, unless the
    file already failed for another cause."""
    if COORDINATE_PROBLEM not in table.column_names:
        return table
    problems = table.column(COORDINATE_PROBLEM).to_pylist()
    if not any(problems):
        return table
    kinds = table.column("error_type").to_pylist()
    messages = table.column("error_message").to_pylist()
    passed = table.column("passed").to_pylist()
    for i, why in enumerate(problems):
        if why and kinds[i] is None:
            kinds[i], messages[i], passed[i] = INVALID_COORDINATES, why, False
    for name, vals, typ in (
        ("error_type", kinds, pa.string()),
        ("error_message", messages, pa.string()),
        ("passed", passed, pa.bool_()),
    ):
        table = table.set_column(table.column_names.index(name), name, pa.array(vals, typ))
    return table


def _one(table: pa.Table, i: int) -> pa.Table:
    return table.slice(i, 1)


def run_stage(st: Stage, clips: Clips) -> tuple[dict[str, pa.Array], list[str | None]]:
    """Columns of ``st`` over ``clips`` and a per-clip error (or ``None``).

    A stage that raises on the batch is run clip by clip, so one clip it
    rejects does not cost the others their columns.
    """
    try:
        return _columns(st(clips), len(clips)), [None] * len(clips)
    except Exception as exc:
        if len(clips) == 1:
            return {}, [f"{st.name}: {type(exc).__name__}: {exc}"]
    parts: list[dict[str, pa.Array] | None] = []
    errs: list[str | None] = []
    for i in range(len(clips)):
        one = Clips(
            [clips.keys[i]],
            [clips.audio[i]],
            clips.sr,
            clips.batch_id,
            None if clips.levels is None else clips.levels[i : i + 1],
        )
        try:
            parts.append(_columns(st(one), 1))
            errs.append(None)
        except Exception as exc:
            parts.append(None)
            errs.append(f"{st.name}: {type(exc).__name__}: {exc}")
    names: dict[str, pa.DataType] = {}
    for p in parts:
        for n, a in (p or {}).items():
            names.setdefault(n, a.type)
    cols = {}
    for n, t in names.items():
        chunks = [p[n] if p is not None and n in p else pa.nulls(1, t) for p in parts]
        cols[n] = pa.concat_arrays([c.cast(t) for c in chunks])
    return cols, errs


def _columns(cols: Any, n: int) -> dict[str, pa.Array]:
    out = {}
    for name, col in cols.items():
        arr = col if isinstance(col, (pa.Array, pa.ChunkedArray)) else pa.array(col)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if len(arr) != n:
            raise ShapeError(f"column {name!r} has {len(arr)} rows for {n} clips")
        out[name] = arr
    return out


def _sources_of(table: pa.Table, paths: list[str]) -> tuple[list[Any], list[str | None]]:
    """What the loader decodes per row (the ``bytes`` value where there is
    one, else the path) and a format hint per row (the path's extension for
    in-memory files)."""
    if "bytes" not in table.column_names:
        return list(paths), [None] * len(paths)
    data = table.column("bytes").to_pylist()
    sources: list[Any] = [p if b is None else bytes(b) for p, b in zip(paths, data, strict=True)]
    formats = [
        None if b is None or "." not in Path(p).name else Path(p).suffix[1:] or None
        for p, b in zip(paths, data, strict=True)
    ]
    return sources, formats


def _inputs_of(table: pa.Table) -> tuple[list[str], list[str], pa.Table]:
    if "path" not in table.column_names and "bytes" not in table.column_names:
        raise ParameterError(
            f"the input table needs a 'path' or 'bytes' column, got columns {table.column_names}"
        )
    if "path" not in table.column_names:
        if "key" not in table.column_names:
            raise ParameterError("an input table of 'bytes' without 'path' needs a 'key' column")
        paths = [""] * table.num_rows
    else:
        paths = [str(p) if p is not None else "" for p in table.column("path").to_pylist()]
    if "key" in table.column_names:
        keys = [str(k) for k in table.column("key").to_pylist()]
    else:
        keys = list(paths)
    carried = table.drop_columns([c for c in INPUT_COLUMNS if c in table.column_names])
    return keys, paths, carried


#: Exception class names that mean "this file needs more memory than it
#: may have" (anywhere in the class's bases): their rows get
#: :data:`RESOURCE_LIMIT`.
_RESOURCE_ERRORS = frozenset({"MemoryError", "ResourceLimitError"})
#: The loader's error kinds that rows name as the metadata pass does (a
#: file removed after that pass is still ``FileNotFound``).
_ROW_KINDS = {
    **dict.fromkeys(_RESOURCE_ERRORS, RESOURCE_LIMIT),
    "AudioFileNotFoundError": FILE_NOT_FOUND,
}


def _error_type(exc: BaseException) -> str:
    if any(c.__name__ in _RESOURCE_ERRORS for c in type(exc).__mro__):
        return RESOURCE_LIMIT
    return _ROW_KINDS.get(type(exc).__name__, type(exc).__name__)


def _error_table(
    keys: list[str], paths: list[str], error_type: str | list[str], message: str | list[str]
) -> pa.Table:
    n = len(keys)
    types = [error_type] * n if isinstance(error_type, str) else error_type
    messages = [message] * n if isinstance(message, str) else message
    return _ordered(
        pa.table(
            {
                "key": pa.array(keys, pa.string()),
                "path": pa.array(paths, pa.string()),
                "passed": pa.array(np.zeros(n, dtype=bool), pa.bool_()),
                "error_type": pa.array(types, pa.string()),
                "error_message": pa.array(messages, pa.string()),
            }
        )
    )


def error_rows(table: pa.Table, error_type: str | list[str], message: str | list[str]) -> pa.Table:
    """Rows of ``table``'s files that all failed: the base columns (decode
    metadata null), ``error_type`` and ``message`` (one for all rows, or
    one per row) with the key before each message, and the carried input
    columns."""
    keys, paths, carried = _inputs_of(table)
    messages = [message] * len(keys) if isinstance(message, str) else message
    texts = [f"{k}: {m}" for k, m in zip(keys, messages, strict=True)]
    out = _error_table(keys, paths, error_type, texts)
    for name in carried.column_names:
        out = out.append_column(name, carried.column(name))
    return _int64(out)


_BASE_TYPES: dict[str, pa.DataType] = {
    "key": pa.string(),
    "path": pa.string(),
    "duration": pa.float64(),
    "sr": pa.int64(),
    "channels": pa.int64(),
    "frames": pa.int64(),
    "source_sr": pa.int64(),
    "source_channels": pa.int64(),
    "truncated": pa.bool_(),
    "passed": pa.bool_(),
    "error_type": pa.string(),
    "error_message": pa.string(),
    "stage_error": pa.string(),
}


def _ordered(table: pa.Table) -> pa.Table:
    """Every base column present (null where missing), first and in order."""
    n = table.num_rows
    cols = []
    for name, t in _BASE_TYPES.items():
        cols.append(table.column(name) if name in table.column_names else pa.nulls(n, t))
    rest = [c for c in table.column_names if c not in _BASE_TYPES]
    return pa.table(cols + [table.column(c) for c in rest], names=list(_BASE_TYPES) + rest)


def _int64_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_list(t):
        return pa.list_(_int64_type(t.value_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_int64_type(t.value_type))
    return t


def _int64(table: pa.Table) -> pa.Table:
    """Every integer column (and list of integers) as int64: no rate or
    count a header can claim overflows a column."""
    schema = pa.schema([f.with_type(_int64_type(f.type)) for f in table.schema])
    return table if schema.equals(table.schema) else table.cast(schema)


def process_batch(
    table: pa.Table, config: BatchConfig, *, extra_stages: Sequence[Stage] = ()
) -> pa.Table:
    """Decode and measure the files of ``table``: one row per input row.

    Parameters
    ----------
    table : pyarrow.Table
        A ``path`` column (str) and optionally ``key`` (str, default the
        path); other columns are carried to the output unchanged.
    config : BatchConfig
        What to compute (sample rate, channels, features, tagging, threads).
    extra_stages : sequence of Stage
        Stages run after the configured ones.

    Returns
    -------
    pyarrow.Table
        In input order: :data:`BASE_COLUMNS`, then the stage columns
        (``peak_dbfs``, ``rms_dbfs``, ``clipped_fraction``, the quality
        metrics, ``quality_pass``, ``reasons``, ``features`` as a nested
        list ``[...][...][...]`` of float32 with ``features_shape``, the
        tagging columns), then the carried columns. Integer columns are
        int64. A failed file has its error in ``error_type`` and
        ``error_message`` (which names its key) and nulls elsewhere.
    """
    return BatchProcessor(config, extra_stages)(table)
