"""The actors of curation on Ray, apart from Ray Data: what the driver of
``curate --engine ray`` (:mod:`.ray_run`) and the Ray Data stages
(:mod:`.ray`) both run on the cluster.

A CPU actor (:class:`CurateActor`) is a Ray worker process that imports this
module when it starts, so it imports nothing it does not use: not Ray Data
(and, through it, pandas), 0.6 s of CPU at each actor's start for no
use. With isolation (the default) the actor is a thin relay: its
supervised child (:class:`~agl_fast.pipeline.engines.local.Supervisor`,
one persistent worker started from a fork server) does the work, and the
actor converts no Python objects to Arrow itself.
"""

from __future__ import annotations

import io
import logging
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from agl_fast.pipeline.engines import RAY_MISSING

try:
    import ray
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(RAY_MISSING) from exc

from agl_fast.exceptions import ParameterError
from agl_fast.pipeline.batch import BatchConfig, BatchProcessor, build_stages, run_stage
from agl_fast.pipeline.engines.local import Supervisor
from agl_fast.pipeline.journal import ipc_bytes, read_ipc
from agl_fast.pipeline.stages import Clips, Stage

__all__ = ["RayOptions"]

_log = logging.getLogger("agl_fast.ray")

#: Private column that carries a clip's channel mean from the CPU stage to
#: the tagging actors (dropped by them).
_TAG_AUDIO = "_tag_audio"


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


class CurateActor:
    """The CPU actor: the batch function, built once, optionally behind a
    supervised child process.

    With the child, the actor builds no Arrow array from Python objects (it
    relays tables, conforms them and builds its probe clip from buffers), so
    it never imports pandas, which pyarrow does on the first such
    conversion: half a second or more of the actor's start-up. The child,
    started from a fork server that has imported it once, does the work.
    """

    def __init__(
        self,
        config: BatchConfig,
        carry_audio: bool,
        isolate: bool,
        file_timeout: float | None,
        memory_limit: int | None,
        extra_stages: Sequence[Stage] = (),
    ) -> None:
        stages = [*extra_stages, *([_TagAudio()] if carry_audio else [])]
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

    def __call__(self, batch: pa.Table | bytes) -> pa.Table | bytes:
        return _relay(lambda table: _conform(self._run(table), self.schema), batch)

    def _run(self, table: pa.Table) -> pa.Table:
        if self.proc is not None:
            return self.proc(table)
        assert self.sup is not None
        parts = list(self.sup.run([table]))
        if len(parts) == 1:
            return parts[0]
        # files run one by one after a lost worker
        out = pa.concat_tables(parts, promote_options="permissive")
        rank = {k: i for i, k in enumerate(out.column("key").to_pylist())}
        want = [rank[k] for k in row_keys(table)]
        return out.take(pa.array(want, pa.int64()))

    def __del__(self) -> None:
        # also called on the class Ray wraps for the actor, which has no sup
        sup = getattr(self, "sup", None)
        if sup is not None:
            sup.close()


def _relay(fn: Callable[[pa.Table], pa.Table], batch: pa.Table | bytes) -> pa.Table | bytes:
    """``fn`` of ``batch``, answered in the form it came in: a table (a Ray
    Data block) or an Arrow IPC stream (the driver of ``curate --engine
    ray`` sends those). Ray moves bytes as they are, where a table goes
    through Ray's own Arrow reducer: about 2 ms more per batch and hop, and
    the import of pandas into the actor."""
    if isinstance(batch, bytes):
        return ipc_bytes(fn(read_ipc(batch)))
    return fn(batch)


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
    name = _one_value(pa.string(), b"probe.wav")
    return pa.Table.from_arrays(
        [name, name, _one_value(pa.binary(), buf.getvalue())], names=["key", "path", "bytes"]
    )


def _one_value(type_: pa.DataType, value: bytes) -> pa.Array:
    """A string or binary array of one ``value``, built from its buffers:
    unlike a conversion from Python objects, it does not import pandas."""
    offsets = np.array([0, len(value)], np.int32)
    return pa.Array.from_buffers(type_, 1, [None, pa.py_buffer(offsets), pa.py_buffer(value)])


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


def row_keys(table: pa.Table) -> list[str]:
    name = "key" if "key" in table.column_names else "path"
    return [str(k) for k in table.column(name).to_pylist()]


class TagActor:
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

    def __call__(self, batch: pa.Table | bytes) -> pa.Table | bytes:
        return _relay(self._tag, batch)

    def _tag(self, table: pa.Table) -> pa.Table:
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


def tag_gpus(config: BatchConfig, opts: RayOptions) -> float:
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
