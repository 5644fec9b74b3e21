"""The executor of ``curate --engine ray``: :class:`RayActors` runs the
batches of :func:`agl_fast.pipeline.curate` on the CPU actors of
:mod:`.ray_actors` (and its tagging actors), one batch per actor at a time;
the driver writes their rows as they come back through the progress log
(see :mod:`.ray` for the whole design)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import RAY_MISSING

try:
    import ray
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(RAY_MISSING) from exc

from ..config import CurateConfig
from ..inputs import Inputs
from ..journal import LogContents, ipc_bytes, read_ipc, read_log, read_parts
from ..run import curate
from ..stages import Stage
from .local import HEARTBEAT_S
from .ray_actors import CurateActor, RayOptions, TagActor, tag_gpus

__all__ = ["RayActors", "curate_ray", "done_keys"]


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


class RayActors:
    """The executor of a run on a Ray cluster: ``workers`` CPU actors
    (default: the cluster's CPUs over ``threads``, less the tagging
    actors'), no more than the run has batches, and ``options.tag_actors``
    tagging actors when the run tags.

    Parameters
    ----------
    address : str or None
        The cluster to join (``"auto"``, ``"ray://host:10001"``) unless Ray
        is initialised already; with neither, a new local cluster.
    options : RayOptions or None
        Isolation and the tagging pool (recorded in the summary's
        ``parameters``).
    """

    engine = "ray"
    replaces_sigterm = True

    def __init__(self, address: str | None = None, options: RayOptions | None = None) -> None:
        self.address = address
        self.options = options or RayOptions()
        self._cpus: list[Any] = []
        self._taggers: list[Any] = []

    def start(self, cfg: CurateConfig, stages: Sequence[Stage], files: int) -> int:
        """Join the cluster and create the actors for ``files`` files; their
        set-up (imports, the fork server of the isolating child, the probe
        clip) runs on the cluster while the driver goes on. Return the
        CPU actors."""
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        opts = self.options
        base = cfg.batch_config()
        tagging = bool(base.tag)
        threads = base.threads or 1
        gpus = tag_gpus(base, opts) if tagging else 0.0  # may refuse: before any actor
        if cfg.workers is not None:
            n_cpu = cfg.workers
        else:
            cpus = ray.cluster_resources().get("CPU", 1.0)
            if tagging:
                cpus -= opts.tag_actors * opts.tag_cpus
            n_cpu = max(1, int(cpus // threads))
        size = cfg.batch_size_for(files, n_cpu)
        n_cpu = min(n_cpu, -(-files // size))
        restart = {"max_restarts": -1, "max_task_retries": -1}
        curator: Any = ray.remote(CurateActor)
        curator = curator.options(num_cpus=threads, **restart)
        cpu_cfg = replace(base, tag=(), threads=threads)
        args = (cpu_cfg, tagging, opts.isolate, cfg.file_timeout, cfg.memory_limit, stages)
        self._cpus = [curator.remote(*args) for _ in range(n_cpu)]
        if tagging and n_cpu:
            tagger: Any = ray.remote(TagActor)
            tagger = tagger.options(num_cpus=opts.tag_cpus, num_gpus=gpus, **restart)
            self._taggers = [tagger.remote(base) for _ in range(opts.tag_actors)]
        return max(n_cpu, 1)

    def run(
        self, batches: Iterator[pa.Table], n_batches: int, heartbeat: Callable[[], None]
    ) -> Iterator[pa.Table]:
        """The rows of ``batches`` as the actors finish them."""
        if n_batches == 0 or not self._cpus:
            return iter(())
        return _drive(batches, self._cpus, self._taggers, heartbeat)

    def close(self) -> None:
        """Kill the run's actors (idempotent)."""
        for actor in [*self._cpus, *self._taggers]:
            ray.kill(actor)
        self._cpus, self._taggers = [], []

    def summary_fields(self) -> dict[str, dict[str, Any]]:
        """The cluster's size, the Ray options and Ray's version."""
        return {
            "this_run": {
                "cluster_cpus": ray.cluster_resources().get("CPU"),
                "cluster_nodes": len([n for n in ray.nodes() if n.get("Alive")]),
            },
            "parameters": asdict(self.options),
            "versions": {"ray": ray.__version__},
        }


def _drive(
    batches: Iterator[pa.Table], cpus: list[Any], taggers: list[Any], heartbeat: Callable[[], None]
) -> Iterator[pa.Table]:
    """Hand ``batches`` to the CPU actors (one each at a time, a batch taken
    only when an actor is free for it), chain their output to the tagging
    actors when there are any, and yield every finished table as it comes
    back; call ``heartbeat`` at least every :data:`HEARTBEAT_S` seconds. An
    actor that finishes gets its next batch once its rows are yielded (the
    driver writes them to the progress log first): a signal that stops the
    driver while it writes loses at most one batch per actor, the ones the
    actors hold."""
    n_cpu = len(cpus)
    idle = list(cpus)
    busy: dict[Any, Any] = {}  # CPU task -> its actor
    results: set[Any] = set()  # tasks whose output is a finished table
    source = batches
    state = {"exhausted": False, "tagged": 0}

    def hand_out() -> None:
        # At most one batch per CPU actor, and no more than two per actor
        # waiting for tagging: what a kill can lose stays bounded.
        while idle and not state["exhausted"] and len(results) < 2 * n_cpu:
            batch = next(source, None)
            if batch is None:
                state["exhausted"] = True
                return
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
        ready, _ = ray.wait(waiting, num_returns=1, timeout=HEARTBEAT_S)
        heartbeat()
        finished = [ref for ref in ready if ref in results]
        for ref in ready:
            if ref in busy:
                idle.append(busy.pop(ref))
        results.difference_update(finished)
        for ref in finished:
            yield read_ipc(ray.get(ref))


def curate_ray(
    inputs: Inputs,
    out: str | Path,
    cfg: CurateConfig | None = None,
    *,
    address: str | None = None,
    options: RayOptions | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """``agl-fast curate --engine ray``: :func:`~agl_fast.pipeline.curate`
    with :class:`RayActors` joining the cluster at ``address`` with
    ``options``; return the summary.

    ``cfg`` drives the run as on one machine: ``workers`` CPU actors
    (default: the cluster's CPUs over ``threads``), ``batch_size`` files per
    task, ``part_rows`` / ``part_bytes`` per part, ``resume`` and
    ``retry_failed``. ``progress`` is called as rows finish with
    ``(files_done, audio_seconds_done)``.

    Raises
    ------
    RunInterrupted
        On SIGINT or SIGTERM, after the finished rows are flushed.
    """
    return curate(inputs, out, cfg, progress=progress, executor=RayActors(address, options))
