"""The driver of ``curate --engine ray``: batches handed to the CPU actors
of :mod:`.ray`, rows written as they come back through the progress log
(see :mod:`.ray` for the whole design)."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import RAY_MISSING

try:
    import ray
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(RAY_MISSING) from exc

from ... import __version__
from ..inputs import Inputs
from ..journal import LogContents, PartSink, ipc_bytes, read_ipc, read_log, read_parts
from ..run import (
    PRECHECK_CHUNK,
    CurateConfig,
    atomic_json,
    consume_rows,
    input_table,
    interrupted,
    metadata_pass,
    prepare_out,
    run_counts,
    skipped_summary,
    stop_on_signals,
    write_final,
)
from .ray_actors import _HEARTBEAT_S, RayOptions, _Curator, _tag_gpus, _Tagger

__all__ = ["curate_ray", "done_keys"]


def done_keys(out: str | Path) -> set[str]:
    """Keys with a row in the run directory ``out``: its finished parts and
    the records of its progress logs (read only; a record cut short is
    ignored, its files run again)."""
    out = Path(out)
    rows = read_parts(out, ["key"])
    done = set(rows.column("key").to_pylist()) if rows is not None else set()
    for path in sorted((out / "progress").glob("part-*.log")):
        got: LogContents = read_log(path)
        for t in got.tables:
            done.update(t.column("key").to_pylist())
    return done


def _cpu_actors(cfg: CurateConfig, opts: RayOptions, tagging: bool, n_batches: int) -> int:
    if cfg.workers is not None:
        return max(1, min(cfg.workers, n_batches))
    threads = cfg.threads or 1
    cpus = ray.cluster_resources().get("CPU", 1.0)
    if tagging:
        cpus -= opts.tag_actors * opts.tag_cpus
    return max(1, min(int(cpus // threads), n_batches))


@dataclass
class _Actors:
    """The actors of one run: CPU actors, then tagging actors (possibly
    none)."""

    cpus: list[Any]
    taggers: list[Any]

    def close(self) -> None:
        for actor in [*self.cpus, *self.taggers]:
            ray.kill(actor)


def _start_actors(cfg: CurateConfig, opts: RayOptions, n_batches: int) -> _Actors:
    """Create the run's actors; their set-up (imports, the fork server of
    the isolating child, the probe clip) runs on the cluster while this
    driver goes on, e.g. with the metadata pass."""
    base = cfg.batch_config()
    tagging = bool(base.tag)
    threads = base.threads or 1
    cpu_cfg = replace(base, tag=(), threads=threads)
    gpus = _tag_gpus(base, opts) if tagging else 0.0  # may refuse: before any actor
    restart = {"max_restarts": -1, "max_task_retries": -1}
    curator: Any = ray.remote(_Curator)
    curator = curator.options(num_cpus=threads, **restart)
    n_cpu = _cpu_actors(cfg, opts, tagging, n_batches)
    args = (cpu_cfg, tagging, opts.isolate, cfg.file_timeout, cfg.memory_limit)
    cpus = [curator.remote(*args) for _ in range(n_cpu)]
    taggers: list[Any] = []
    if tagging:
        tagger: Any = ray.remote(_Tagger)
        tagger = tagger.options(num_cpus=opts.tag_cpus, num_gpus=gpus, **restart)
        taggers = [tagger.remote(base) for _ in range(opts.tag_actors)]
    return _Actors(cpus, taggers)


def _drive(batches: list[pa.Table], actors: _Actors, sink: PartSink) -> Iterator[pa.Table]:
    """Hand ``batches`` to the CPU actors (one each at a time), chain their
    output to the tagging actors when there are any, and yield every
    finished table as it comes back (for ``sink``, which logs the batches
    handed out). An actor that finishes gets its next batch before its rows
    are yielded."""
    n_cpu, taggers = len(actors.cpus), actors.taggers
    idle = list(actors.cpus)
    busy: dict[Any, Any] = {}  # CPU task -> its actor
    results: set[Any] = set()  # tasks whose output is a finished table
    source = iter(batches)
    state = {"exhausted": False, "tagged": 0}

    def hand_out() -> None:
        # At most one batch per CPU actor, and no more than two per actor
        # waiting for tagging: what a kill can lose stays bounded.
        while idle and not state["exhausted"] and len(results) < 2 * n_cpu:
            batch = next(source, None)
            if batch is None:
                state["exhausted"] = True
                return
            sink.started(batch)
            actor = idle.pop()
            ref = actor.__call__.remote(ipc_bytes(batch))
            busy[ref] = actor
            if taggers:
                ref = taggers[state["tagged"] % len(taggers)].__call__.remote(ref)
                state["tagged"] += 1
            results.add(ref)

    while True:
        hand_out()
        if not busy and not results:
            return
        waiting = [*busy, *(r for r in results if r not in busy)]
        ready, _ = ray.wait(waiting, num_returns=1, timeout=_HEARTBEAT_S)
        sink.tick()
        finished = [ref for ref in ready if ref in results]
        for ref in ready:
            if ref in busy:
                idle.append(busy.pop(ref))
        results.difference_update(finished)
        hand_out()
        for ref in finished:
            yield read_ipc(ray.get(ref))


def _summary(
    inputs: Inputs,
    cfg: CurateConfig,
    opts: RayOptions,
    final: pa.Table,
    this_run: dict[str, Any],
    redone: int,
) -> dict[str, Any]:
    """``summary.json`` of a Ray run (the local engine's keys, plus the
    cluster's size and Ray's version)."""
    files, audio_s, wall = this_run["files"], this_run["audio_seconds"], this_run["wall_seconds"]
    return {
        "engine": "ray",
        "input": dict(inputs.source),
        "skipped": skipped_summary(inputs),
        "counts": run_counts(final, len(inputs.keys)),
        "this_run": {
            **this_run,
            "files_per_second": files / wall if wall > 0 else None,
            "x_real_time": audio_s / wall if wall > 0 else None,
            "cluster_cpus": ray.cluster_resources().get("CPU"),
            "cluster_nodes": len([n for n in ray.nodes() if n.get("Alive")]),
            "redone_in_flight": redone,
        },
        "parameters": {
            **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
            **asdict(opts),
        },
        "versions": {
            "agl_fast": __version__,
            "python": platform.python_version(),
            "pyarrow": pa.__version__,
            "ray": ray.__version__,
        },
    }


def curate_ray(
    inputs: Inputs,
    out: str | Path,
    cfg: CurateConfig | None = None,
    *,
    address: str | None = None,
    options: RayOptions | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """``agl-fast curate --engine ray``: the batch function of
    :func:`curate_dataset` on Ray actors over ``inputs``, rows written into
    ``out`` by this driver as they come back (see the module notes); return
    the summary.

    Connects to the cluster at ``address`` (``"auto"``, ``"ray://host:10001"``)
    unless Ray is initialised already; with neither, starts a local one.
    ``cfg`` drives the run as on one machine: ``workers`` CPU actors
    (default: the cluster's CPUs over ``threads``), ``batch_size`` files per
    task, ``part_rows`` / ``part_bytes`` per part, ``resume`` and
    ``retry_failed``. ``progress`` is called as rows finish with
    ``(files_done, audio_seconds_done)``, as by
    :func:`~agl_fast.pipeline.curate`.

    Raises
    ------
    RunInterrupted
        On SIGINT or SIGTERM, after the finished rows are flushed.
    """
    cfg = cfg or CurateConfig()
    opts = options or RayOptions()
    cfg.validate_run(min_workers=1)
    out = Path(out)
    state = prepare_out(out, inputs, cfg.resume)
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    skip = state.done - state.failed if cfg.retry_failed else state.done
    todo = [i for i, k in enumerate(inputs.keys) if k not in skip]
    size = cfg.batch_size
    # The actors set up while the metadata pass runs (at most one too many
    # when it finds unreadable files).
    actors = _start_actors(cfg, opts, -(-len(todo) // size)) if todo else _Actors([], [])
    try:
        todo, unreadable = metadata_pass(inputs, todo)
        batches = [input_table(inputs, todo[s : s + size]) for s in range(0, len(todo), size)]
        sink = PartSink(out, state.next_part, cfg.part_rows, cfg.part_bytes)
        t0 = time.perf_counter()
        finished = False
        try:
            with stop_on_signals(override=True):
                chunks = range(0, unreadable.num_rows, PRECHECK_CHUNK)
                audio_s = consume_rows(
                    sink, (unreadable.slice(a, PRECHECK_CHUNK) for a in chunks), progress
                )
                audio_s = consume_rows(sink, _drive(batches, actors, sink), progress, audio_s)
                sink.finish()
                finished = True
        except KeyboardInterrupt as exc:
            raise interrupted(exc, out, sink) from exc
        finally:
            if not finished:
                sink.abort()
    finally:
        actors.close()
    wall = time.perf_counter() - t0
    final = write_final(out, inputs)
    this_run = {"files": len(todo), "audio_seconds": audio_s, "wall_seconds": wall}
    summary = _summary(inputs, cfg, opts, final, this_run, len(state.redo))
    atomic_json(summary, out / "summary.json")
    return summary
