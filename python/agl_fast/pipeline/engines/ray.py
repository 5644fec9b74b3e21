"""Curation on a Ray cluster (the ``ray`` extra): the batch function mapped
over Ray Data blocks, rows written as Parquet.

>>> import ray
>>> from agl_fast.pipeline import CurateConfig, discover
>>> from agl_fast.ray import curate_dataset, curate_ray, files_dataset
>>> rows = curate_dataset(files_dataset("s3://bucket/audio/"), CurateConfig())  # doctest: +SKIP
>>> rows.write_parquet("s3://bucket/curated/")  # doctest: +SKIP
>>> summary = curate_ray(discover("recordings/"), "curated/", CurateConfig())  # doctest: +SKIP

Two stages, each an actor pool whose actors build their work once:

* CPU: :class:`~agl_fast.pipeline.BatchProcessor` over batches of
  ``batch_size`` files (decode, levels, quality, features), ``threads``
  CPUs per actor. With ``isolate=True`` (the default) each actor runs it in
  a supervised child process (:mod:`agl_fast.pipeline.engines.local`), so a
  file that kills its decoder, hangs or exhausts memory is a
  ``DecoderCrash`` / ``Timeout`` / ``ResourceLimit`` row, exactly as on
  one machine, instead of a Ray task retried until the job fails.
* Tagging, only when ``config.tag`` is set: an actor pool with
  ``num_gpus`` per actor, each holding one ONNX session, fed the decoded
  clips' channel mean by the CPU stage.

:func:`curate_ray` drives a whole run into an output directory from the
driver: it hands batches to the CPU actors itself (one at a time each) and
writes their rows as they come back, through the same durable progress log
and with the same layout as ``agl-fast curate`` on one machine
(:mod:`agl_fast.pipeline.journal`)::

    progress/part-NNNNN.log     rows of the part being filled (while running)
    parts/*.parquet             finished rows (every column but ``features``)
    features/*.parquet          ``key`` and ``features`` of the same rows
    curated.parquet             every row, in input order (at the end)
    summary.json                counts, throughput, parameters

A driver killed at any moment loses at most the batches in flight (one per
CPU actor, plus those waiting for a tagging actor); SIGINT and SIGTERM
flush before it stops. A restarted run (``resume=True``) redoes those and
runs the inputs not started: the final table equals an uninterrupted run's.
An actor that dies is restarted by Ray and its batch run again.
"""

from __future__ import annotations

import io
import logging
import os
import wave
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

try:
    import ray
    import ray.data
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agl_fast.ray needs Ray Data: pip install 'agl-fast[ray]' (or 'ray[data]')"
    ) from exc

from agl_fast.exceptions import ParameterError
from agl_fast.pipeline.batch import BatchConfig, BatchProcessor, build_stages, run_stage
from agl_fast.pipeline.engines.local import Supervisor
from agl_fast.pipeline.inputs import AUDIO_EXTENSIONS, Inputs
from agl_fast.pipeline.run import (
    CurateConfig,
    input_table,
)
from agl_fast.pipeline.stages import Clips

__all__ = ["RayOptions", "curate_dataset", "files_dataset", "inputs_dataset"]

_log = logging.getLogger("agl_fast.ray")

#: Private column that carries a clip's channel mean from the CPU stage to
#: the tagging actors (dropped by them).
_TAG_AUDIO = "_tag_audio"

#: Seconds between two looks at the flush schedule while actors run.
_HEARTBEAT_S = 1.0


@dataclass
class RayOptions:
    """How the two stages run on the cluster.

    Attributes
    ----------
    isolate : bool
        Run the batch function in a supervised child of each CPU actor
        (crashes, hangs and memory exhaustion become rows).
    tag_actors : int
        Tagging actors (one ONNX session each).
    tag_batch_size : int
        Clips per tagging call.
    tag_gpus : float or None
        GPUs per tagging actor (default: 1 for ``tag_device="cuda"``, 0 for
        ``"cpu"``, and 0 when the cluster has no GPU and ``allow_cpu``).
    tag_cpus : float
        CPUs per tagging actor.

    Notes
    -----
    Actors hold their CPUs for the whole run: the CPU pool's default size
    leaves the tagging actors theirs, and a cluster reading with
    :func:`files_dataset` needs a CPU free for the read tasks (give
    ``workers`` explicitly on a small cluster).
    """

    isolate: bool = True
    tag_actors: int = 1
    tag_batch_size: int = 32
    tag_gpus: float | None = None
    tag_cpus: float = 1.0


class _TagAudio:
    """A stage whose column is each clip's channel mean (float32), what the
    tagging stage would compute from the clip."""

    name = "tag_audio"

    def __call__(self, clips: Clips) -> dict[str, pa.Array]:
        mono = []
        for y in clips.audio:
            a = np.asarray(y, dtype=np.float32)
            mono.append(a.mean(axis=0) if a.ndim == 2 else a)
        return {_TAG_AUDIO: pa.array(mono, pa.list_(pa.float32()))}


class _Curator:
    """The CPU actor: the batch function, built once, optionally behind a
    supervised child process."""

    def __init__(
        self,
        config: BatchConfig,
        carry_audio: bool,
        isolate: bool,
        file_timeout: float | None,
        memory_limit: int | None,
    ) -> None:
        stages = [_TagAudio()] if carry_audio else []
        self.sup: Supervisor | None = None
        self.proc: BatchProcessor | None = None
        if isolate:
            self.sup = Supervisor(
                config, stages, workers=1, file_timeout=file_timeout, memory_limit=memory_limit
            )
        else:
            self.proc = BatchProcessor(config, stages)
        # Every block this actor writes has the columns (and types) of a
        # clip that went through every stage: Parquet files of one dataset
        # share a schema even when a batch holds only failed files.
        self.schema = self._run(_probe_table(config.sr)).schema

    def __call__(self, table: pa.Table) -> pa.Table:
        return _conform(self._run(table), self.schema)

    def _run(self, table: pa.Table) -> pa.Table:
        if self.proc is not None:
            return self.proc(table)
        assert self.sup is not None
        parts = list(self.sup.run([table]))
        out = pa.concat_tables(parts, promote_options="permissive")
        if len(parts) > 1:  # files run one by one after a lost worker
            rank = {k: i for i, k in enumerate(out.column("key").to_pylist())}
            want = [rank[k] for k in _keys(table)]
            out = out.take(pa.array(want, pa.int64()))
        return out

    def __del__(self) -> None:
        # also called on the class Ray wraps for the actor, which has no sup
        sup = getattr(self, "sup", None)
        if sup is not None:
            sup.close()


def _probe_table(sr: int) -> pa.Table:
    """One in-memory WAV (1 s, two channels of tones over noise at ``sr``
    Hz) that every stage accepts: the reference for a block's columns."""
    rng = np.random.default_rng(0)
    t = np.arange(sr) / sr
    y = 0.3 * np.sin(2 * np.pi * np.outer([440.0, 660.0], t)) + 0.01 * rng.standard_normal((2, sr))
    pcm = np.round(np.clip(y.T, -1, 1) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())
    return pa.table({"key": ["probe.wav"], "path": ["probe.wav"], "bytes": [buf.getvalue()]})


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the fields of ``schema`` first, in its order and types
    (nulls where a column is missing), then its other columns."""
    n = table.num_rows
    cols, names = [], []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
        names.append(f.name)
    for name in table.column_names:
        if name not in schema.names:
            cols.append(table.column(name))
            names.append(name)
    return pa.table(cols, names=names)


def _keys(table: pa.Table) -> list[str]:
    name = "key" if "key" in table.column_names else "path"
    return [str(k) for k in table.column(name).to_pylist()]


class _Tagger:
    """The tagging actor: the configured taggers (one ONNX session each),
    run on the clips the CPU stage carried."""

    def __init__(self, config: BatchConfig) -> None:
        base = replace(config, features="none")
        self.sr = config.sr
        self.stages = [s for s in build_stages(base) if s.name.startswith("tagging_")]
        rng = np.random.default_rng(0)
        clip = (0.1 * rng.standard_normal(config.sr)).astype(np.float32)
        self.columns: dict[str, pa.DataType] = {}
        for st in self.stages:
            cols, _ = run_stage(st, Clips(["probe.wav"], [clip], config.sr))
            self.columns.update({name: arr.type for name, arr in cols.items()})

    def __call__(self, table: pa.Table) -> pa.Table:
        audio = table.column(_TAG_AUDIO).to_pylist()
        keys = table.column("key").to_pylist()
        ok = [i for i, a in enumerate(audio) if a is not None]
        clips = Clips(
            [keys[i] for i in ok], [np.asarray(audio[i], np.float32) for i in ok], self.sr
        )
        slot_of: list[int | None] = [None] * table.num_rows
        for j, i in enumerate(ok):
            slot_of[i] = j
        slot = pa.array(slot_of, pa.int64())
        errors = table.column("stage_error").to_pylist()
        table = table.drop_columns([_TAG_AUDIO])
        done: dict[str, pa.Array] = {}
        for st in self.stages:
            cols, errs = run_stage(st, clips) if ok else ({}, [])
            for j, e in enumerate(errs):
                if e is not None and errors[ok[j]] is None:
                    errors[ok[j]] = e
            for name, arr in cols.items():
                if name not in self.columns:
                    table = table.append_column(name, arr.take(slot))
            done.update(cols)
        for name, t in self.columns.items():
            col = done[name].take(slot) if name in done else pa.nulls(table.num_rows, t)
            table = table.append_column(name, col if col.type == t else col.cast(t))
        at = table.column_names.index("stage_error")
        return table.set_column(at, "stage_error", pa.array(errors, pa.string()))


def _drop_done(table: pa.Table, done: frozenset[str]) -> pa.Table:
    keep = [k not in done for k in _keys(table)]
    return table.filter(pa.array(keep, pa.bool_()))


def _add_keys(table: pa.Table, root: str) -> pa.Table:
    paths = [str(p) for p in table.column("path").to_pylist()]
    prefix = root.rstrip("/") + "/"
    keys = [p[len(prefix) :] if p.startswith(prefix) else p for p in paths]
    return table.append_column("key", pa.array(keys, pa.string()))


def files_dataset(
    paths: str | Sequence[str],
    *,
    root: str | None = None,
    filesystem: Any = None,
    extensions: Sequence[str] | None = None,
) -> ray.data.Dataset:
    """The audio files under ``paths`` (local or any filesystem pyarrow
    supports) as ``bytes`` and ``path`` columns, read by the cluster with
    ``ray.data.read_binary_files``, and a ``key``: the path relative to
    ``root`` (default: ``paths`` when it is one folder), as
    :func:`~agl_fast.pipeline.discover` names them.
    """
    exts = [e.lstrip(".") for e in (extensions or sorted(AUDIO_EXTENSIONS))]
    ds = ray.data.read_binary_files(
        paths if isinstance(paths, str) else list(paths),
        include_paths=True,
        filesystem=filesystem,
        file_extensions=exts,
    )
    if root is None and isinstance(paths, str):
        root = paths
    if root is None:
        return ds.map_batches(
            lambda t: t.append_column("key", t.column("path")), batch_format="pyarrow"
        )
    # Ray names local files without a scheme and absolute.
    fixed = os.path.abspath(root) if "://" not in root else root.split("://", 1)[1]
    return ds.map_batches(partial(_add_keys, root=fixed), batch_format="pyarrow")


def inputs_dataset(inputs: Inputs, batch_size: int = 8) -> ray.data.Dataset:
    """``inputs`` (from a manifest or :func:`~agl_fast.pipeline.discover`)
    as a dataset of ``key``, ``path`` and the carried columns, one block per
    ``batch_size`` rows; the workers read the paths (a filesystem every
    node sees)."""
    n = len(inputs.keys)
    blocks = [
        input_table(inputs, list(range(s, min(s + batch_size, n)))) for s in range(0, n, batch_size)
    ]
    return ray.data.from_arrow(blocks or [input_table(inputs, [])])


def _tag_gpus(config: BatchConfig, opts: RayOptions) -> float:
    if opts.tag_gpus is not None:
        return opts.tag_gpus
    if config.tag_device == "cpu" or "efficientat" not in config.tag:
        return 0.0
    if ray.cluster_resources().get("GPU", 0) > 0:
        return 1.0
    if config.allow_cpu:
        _log.warning("the Ray cluster has no GPU: tagging actors run on CPU (allow_cpu)")
        return 0.0
    raise ParameterError(
        "tag_device='cuda' but the Ray cluster has no GPU; pass allow_cpu=True "
        "(--allow-cpu) or tag_device='cpu'"
    )


def curate_dataset(
    ds: ray.data.Dataset,
    config: BatchConfig,
    *,
    options: RayOptions | None = None,
    skip_keys: frozenset[str] | set[str] = frozenset(),
) -> ray.data.Dataset:
    """Rows of :func:`~agl_fast.pipeline.process_batch` for every input row
    of ``ds`` (lazily; write or iterate the result).

    Parameters
    ----------
    ds : ray.data.Dataset
        A ``path`` and/or ``bytes`` column, optionally ``key`` (default:
        the path) and columns carried to the output (e.g.
        :func:`files_dataset`, :func:`inputs_dataset`).
    config : BatchConfig or CurateConfig
        What each file gets; a :class:`CurateConfig` also gives
        ``batch_size`` (files per CPU call), ``workers`` (CPU actors;
        default: an autoscaling pool up to the cluster's CPUs),
        ``threads`` (CPUs per actor, default 1), ``file_timeout`` and
        ``memory_limit`` (of the isolated child).
    options : RayOptions
        Isolation and the tagging pool.
    skip_keys : set of str
        Keys whose rows exist already (a resumed run): dropped first.

    Returns
    -------
    ray.data.Dataset
        One row per input row not skipped, with the columns of
        :func:`~agl_fast.pipeline.process_batch` (row order across blocks
        is not kept; sort by key).
    """
    opts = options or RayOptions()
    run = config if isinstance(config, CurateConfig) else CurateConfig(**asdict(config))
    base = run.batch_config()
    base.validate()
    if run.batch_size < 1:
        raise ParameterError(f"batch_size must be >= 1, got batch_size={run.batch_size}")
    if run.workers is not None and run.workers < 1:
        raise ParameterError(f"workers must be >= 1 on Ray, got workers={run.workers}")
    threads = base.threads or 1
    tagging = bool(base.tag)
    cpu_cfg = replace(base, tag=(), threads=threads)
    if skip_keys:
        ds = ds.map_batches(partial(_drop_done, done=frozenset(skip_keys)), batch_format="pyarrow")
    if run.workers is not None:
        pool = ray.data.ActorPoolStrategy(size=run.workers)
    else:
        cpus = ray.cluster_resources().get("CPU", 1.0)
        if tagging:
            cpus -= opts.tag_actors * opts.tag_cpus
        pool = ray.data.ActorPoolStrategy(min_size=1, max_size=max(1, int(cpus // threads)))
    ds = ds.map_batches(
        _Curator,
        fn_constructor_kwargs={
            "config": cpu_cfg,
            "carry_audio": tagging,
            "isolate": opts.isolate,
            "file_timeout": run.file_timeout,
            "memory_limit": run.memory_limit,
        },
        batch_size=run.batch_size,
        batch_format="pyarrow",
        compute=pool,
        num_cpus=threads,
    )
    if tagging:
        ds = ds.map_batches(
            _Tagger,
            fn_constructor_kwargs={"config": base},
            batch_size=opts.tag_batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=opts.tag_actors),
            num_gpus=_tag_gpus(base, opts),
            num_cpus=opts.tag_cpus,
        )
    return ds
