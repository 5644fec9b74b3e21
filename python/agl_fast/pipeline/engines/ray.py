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

:func:`curate_ray` (``agl-fast curate --engine ray``) is
:func:`agl_fast.pipeline.curate` with the executor
:class:`~agl_fast.pipeline.engines.ray_run.RayActors`: the one curation
driver hands batches to the CPU actors (one at a time each) and writes
their rows as they come back, through the same durable progress log and
with the same layout as on one machine (:mod:`agl_fast.pipeline.journal`)::

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

import os
from collections.abc import Sequence
from dataclasses import asdict, replace
from functools import partial
from typing import Any

import pyarrow as pa

from agl_fast.pipeline.engines import RAY_MISSING
from agl_fast.pipeline.engines.ray_actors import (
    CurateActor,
    RayOptions,
    TagActor,
    row_keys,
    tag_gpus,
)

try:
    import ray
    import ray.data
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(RAY_MISSING) from exc

from agl_fast.pipeline.batch import BatchConfig
from agl_fast.pipeline.config import CurateConfig
from agl_fast.pipeline.inputs import AUDIO_EXTENSIONS, Inputs
from agl_fast.pipeline.run import input_table

__all__ = ["RayOptions", "curate_dataset", "files_dataset", "inputs_dataset"]


def _drop_done(table: pa.Table, done: frozenset[str]) -> pa.Table:
    keep = [k not in done for k in row_keys(table)]
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
    run.validate("ray")
    base = run.batch_config()
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
        CurateActor,
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
            TagActor,
            fn_constructor_kwargs={"config": base},
            batch_size=opts.tag_batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=opts.tag_actors),
            num_gpus=tag_gpus(base, opts),
            num_cpus=opts.tag_cpus,
        )
    return ds
