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
:mod:`agl_fast.pipeline.engines.local`); a distributed engine can map it over
Arrow blocks as it is (:class:`BatchProcessor` is the callable-class form,
whose stages, e.g. an ONNX tagger, are built once).

>>> import pyarrow as pa
>>> from agl_fast.pipeline import BatchConfig, process_batch
>>> rows = process_batch(pa.table({"path": ["a.flac"]}), BatchConfig(sr=16000))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from .._internal.onnx import Device
from ..audio import load_arrays
from ..exceptions import ParameterError, ShapeError
from ..tagging.registry import get_tagger
from .config import (
    DEFAULT_MIN_DURATION,
    BatchConfig,
)
from .precheck import FILE_NOT_FOUND
from .rules import duration_rules, fail_bad_coordinates, fail_cut_sources
from .stages import (
    Clips,
    FeatureStage,
    Stage,
    fingerprint_stage,
    levels_stage,
    pass_column,
    quality_stage,
)
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

#: ``error_type`` of a row whose file ran out of memory (a ``MemoryError``
#: in the worker, or a worker killed under ``memory_limit``).
RESOURCE_LIMIT = "ResourceLimit"


def build_stages(cfg: BatchConfig) -> list[Stage]:
    """The stages ``cfg`` asks for: levels, the registered ones (quality,
    and those of ``cfg.stages``), features, then tagging."""
    stages: list[Stage] = [levels_stage]
    for st in _registered(cfg.stages):
        # the quality filter with this configuration's thresholds
        if st.name == "quality":
            st = quality_stage(cfg.thresholds(), cfg.threads) or st
        elif st.name == "fingerprint":
            st = fingerprint_stage(cfg.threads)
        stages.append(st)
    if cfg.features != "none":
        stages.append(FeatureStage(cfg.features, cfg.threads, cfg.channels_policy))
    stages += [_tagging_stage(name, cfg) for name in dict.fromkeys(cfg.tag)]
    return stages


def _tagging_stage(name: str, cfg: BatchConfig) -> Stage:
    """The pipeline stage of the registered tagger ``name``."""
    from ..tagging.registry import build_tagger
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
    names = [st.name for st in (levels_stage, *_registered(cfg.stages))]
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
        return _int64(fail_bad_coordinates(fail_cut_sources(out, self.config)))

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
        table, passed = duration_rules(table, passed, cfg)
        table = table.append_column("passed", pa.array(passed, pa.bool_()))
        table = table.append_column("stage_error", pa.array(stage_errors, pa.string()))
        return _ordered(table)


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
                "path": pa.array([p or None for p in paths], pa.string()),  # "": no file
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
