"""Worker processes for the batch function: a file that kills its decoder
is a row, not the end of the run.

:class:`Supervisor` keeps ``workers`` processes busy, each running
:class:`~agl_fast.pipeline.batch.BatchProcessor` on one batch at a time
(batches overlap across workers: none waits for another's slowest file).
When a worker dies (a signal, an exit, a memory cap) or overruns its
deadline (``file_timeout`` seconds per file of its batch), it is replaced
and the batch's files are run again one per task, so the good files of
that batch still get their rows and the culprit alone gets an error row:

* ``DecoderCrash``: killed by a signal (the message names it, e.g.
  ``SIGSEGV``) or exited without answering;
* ``Timeout``: no answer within ``file_timeout`` seconds;
* ``ResourceLimit``: died of a failed allocation (or raised
  ``MemoryError``) under ``memory_limit`` (``RLIMIT_AS`` of the worker).

Workers start from a fork server that has imported the pipeline once, so a
replacement costs milliseconds, and the parent's threads never leak into a
worker.

The executors of :func:`agl_fast.pipeline.curate` on one machine (see
:class:`agl_fast.pipeline.run.Executor`): :class:`LocalWorkers` (this
supervisor, the default) and :class:`InProcess` (``workers=0``: the
batches in the driver's process, without crash isolation).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import pyarrow as pa

from ...exceptions import ParameterError
from ..batch import RESOURCE_LIMIT, BatchConfig, BatchProcessor, error_rows
from ..config import CurateConfig, default_workers
from ..stages import Stage

__all__ = [
    "DECODER_CRASH",
    "TIMEOUT",
    "InProcess",
    "LocalWorkers",
    "Supervisor",
    "SupervisorStats",
    "local_executor",
]

_log = logging.getLogger("agl_fast.pipeline")

DECODER_CRASH = "DecoderCrash"
TIMEOUT = "Timeout"
#: ``error_type`` values the supervisor writes (a worker lost on the file).
ISOLATION_ERRORS = (DECODER_CRASH, TIMEOUT, RESOURCE_LIMIT)

#: What an allocator prints before it aborts (Rust's ``handle_alloc_error``,
#: glibc, CPython).
_ALLOC_FAILURES = ("memory allocation of", "MemoryError", "Cannot allocate memory", "bad_alloc")

#: Seconds between two looks at the flush schedule while workers run.
HEARTBEAT_S = 1.0


@dataclass
class SupervisorStats:
    """What the workers did (for the run summary)."""

    worker_cpu_seconds: float = 0.0
    workers_started: int = 0
    workers_lost: int = 0
    isolated_batches: int = 0
    #: Largest address space a worker reached (``VmPeak``), in bytes: what
    #: a ``memory_limit`` must leave room for (0 where not reported).
    worker_peak_vm_bytes: int = 0


@dataclass
class _Task:
    rows: pa.Table
    single: bool


@dataclass
class _Worker:
    proc: Any
    conn: Connection
    stderr: Path
    ready: bool = False
    task: _Task | None = None
    deadline: float = float("inf")
    cpu: float = 0.0
    started: float = field(default_factory=time.monotonic)


def _worker_main(conn: Connection, spec: bytes, memory_limit: int | None, stderr_path: str) -> None:
    """A worker: build the stages, then answer batches until told to stop."""
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    # The parent handles Ctrl-C and SIGTERM (sent to the whole group by a
    # terminal, Slurm or systemd): it saves the finished rows, then stops
    # the workers. A worker that died of them would leave crash rows.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if memory_limit is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    try:
        config, stages = pickle.loads(spec)
        proc = BatchProcessor(config, stages)
    except Exception as exc:
        conn.send(("init_error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            table = conn.recv()
        except EOFError:
            return
        if table is None:
            return
        try:
            out = proc(table)
        except MemoryError as exc:
            out = error_rows(table, RESOURCE_LIMIT, f"MemoryError: {exc}")
        r = resource.getrusage(resource.RUSAGE_SELF)
        conn.send(("rows", (out, r.ru_utime + r.ru_stime, _peak_vm())))


def _peak_vm() -> int:
    """This process's peak address space in bytes (0 where unknown)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


@contextmanager
def _main_left_out(leave_out: bool) -> Iterator[None]:
    """While a worker starts (``leave_out``): the main module's file and
    spec hidden, so that the worker does not run the main script again
    (``multiprocessing`` re-imports it in every process it starts, which
    inside a Ray actor means Ray's worker script and ``import ray``, 0.35 s
    per worker). Only for work that needs nothing from ``__main__``."""
    main = sys.modules.get("__main__")
    if not leave_out or main is None:
        yield
        return
    saved: dict[str, Any] = {
        k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__
    }
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _context() -> Any:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(
            ["agl_fast.pipeline.engines.local", "agl_fast.quality", "agl_fast.pipeline._warm"]
        )
        return ctx
    return multiprocessing.get_context("spawn")


class Supervisor:
    """Run batches through worker processes; yield one table per batch.

    Parameters
    ----------
    config : BatchConfig
        What each worker computes.
    stages : sequence of Stage
        Extra stages, sent to every worker (they must be picklable).
    workers : int
        Worker processes (>= 1).
    file_timeout : float or None
        Seconds per file of a batch before its worker is killed (None: no
        limit).
    memory_limit : int or None
        Address-space cap of each worker in bytes (None: no cap).

    Notes
    -----
    The options are those of a :class:`~agl_fast.pipeline.config.CurateConfig`
    that :meth:`~agl_fast.pipeline.config.CurateConfig.validate` passed:
    they are not checked again here.
    """

    def __init__(
        self,
        config: BatchConfig,
        stages: Sequence[Stage] = (),
        *,
        workers: int = 1,
        file_timeout: float | None = 60.0,
        memory_limit: int | None = None,
    ) -> None:
        try:
            self._spec = pickle.dumps((config, list(stages)))
        except Exception as exc:
            raise ParameterError(
                f"the stages must be picklable to run in worker processes: {exc}"
            ) from exc
        self.n_workers = workers
        self.file_timeout = file_timeout
        self.memory_limit = memory_limit
        self.stats = SupervisorStats()
        self._ctx = _context()
        self._tmp = tempfile.TemporaryDirectory(prefix="agl-fast-workers-")
        self._workers: list[_Worker] = []
        self._serial = 0

    # -- workers -----------------------------------------------------------

    def _start(self) -> _Worker:
        self._serial += 1
        stderr = Path(self._tmp.name) / f"worker-{self._serial}.err"
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, self._spec, self.memory_limit, str(stderr)),
            name=f"agl-fast-worker-{self._serial}",
            daemon=True,
        )
        # The worker needs the main module only where the stages name
        # something of it (pickled by reference as ``__main__``).
        with _main_left_out(b"__main__" not in self._spec):
            proc.start()
        child.close()
        self.stats.workers_started += 1
        w = _Worker(proc, parent, stderr)
        self._workers.append(w)
        return w

    def _stop(self, w: _Worker, kill: bool) -> None:
        if kill and w.proc.is_alive():
            w.proc.kill()
        else:
            try:
                w.conn.send(None)
            except OSError:
                pass
        w.proc.join(5)
        if w.proc.is_alive():
            w.proc.kill()
            w.proc.join()
        w.conn.close()
        self._workers.remove(w)

    def _tail(self, w: _Worker) -> str:
        try:
            text = w.stderr.read_text(errors="replace")
        except OSError:
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        for w in list(self._workers):
            self._stop(w, kill=w.task is not None)
        self._tmp.cleanup()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop ----------------------------------------------------------

    def run(
        self,
        batches: Iterable[pa.Table],
        *,
        heartbeat: Callable[[], None] | None = None,
        heartbeat_s: float = 1.0,
    ) -> Iterator[pa.Table]:
        """Yield the output table of each batch (or of each file of a batch
        whose worker was lost), in completion order.

        A batch is taken from ``batches`` only when a worker is free to run
        it. ``heartbeat`` is called at least every ``heartbeat_s`` seconds
        while the workers run (e.g. to flush a log on a schedule).
        """
        source = iter(batches)
        retry: deque[_Task] = deque()
        exhausted = False
        while True:
            # Hand work to every idle, ready worker; start workers as needed.
            while True:
                idle = [w for w in self._workers if w.ready and w.task is None]
                if not idle:
                    while len(self._workers) < self.n_workers and (retry or not exhausted):
                        self._start()
                    break
                task = retry.popleft() if retry else None
                if task is None and not exhausted:
                    nxt = next(source, None)
                    if nxt is None:
                        exhausted = True
                    else:
                        task = _Task(nxt, single=nxt.num_rows == 1)
                if task is None:
                    break
                self._assign(idle[0], task)
            if exhausted and not retry and all(w.task is None for w in self._workers):
                return
            now = time.monotonic()
            timeout = min((w.deadline for w in self._workers), default=float("inf")) - now
            if heartbeat is not None:
                timeout = min(timeout, heartbeat_s)
            objs: list[Any] = [w.conn for w in self._workers]
            objs += [w.proc.sentinel for w in self._workers]
            ready = wait(objs, timeout=None if timeout == float("inf") else max(timeout, 0))
            if heartbeat is not None:
                heartbeat()
            for w in list(self._workers):
                if w.conn in ready or w.proc.sentinel in ready:
                    yield from self._collect(w, retry)
            now = time.monotonic()
            for w in list(self._workers):
                if w in self._workers and w.task is not None and now >= w.deadline:
                    yield from self._lost(w, retry, TIMEOUT, None)

    def _assign(self, w: _Worker, task: _Task) -> None:
        w.task = task
        n = task.rows.num_rows
        w.deadline = time.monotonic() + self.file_timeout * n if self.file_timeout else float("inf")
        try:
            w.conn.send(task.rows)
        except OSError:
            pass  # the worker died; its sentinel reports it

    def _collect(self, w: _Worker, retry: deque[_Task]) -> Iterator[pa.Table]:
        try:
            if w.conn.poll():
                kind, payload = w.conn.recv()
            else:
                raise EOFError
        except (EOFError, OSError):
            w.proc.join(1)
            yield from self._lost(w, retry, None, w.proc.exitcode)
            return
        if kind == "init_error":
            self._stop(w, kill=True)
            raise ParameterError(f"a worker could not set up the pipeline: {payload}")
        if kind == "ready":
            w.ready = True
            return
        table, cpu, peak = payload
        self.stats.worker_peak_vm_bytes = max(self.stats.worker_peak_vm_bytes, peak)
        self.stats.worker_cpu_seconds += cpu - w.cpu
        w.cpu = cpu
        w.task = None
        w.deadline = float("inf")
        yield table

    def _lost(
        self, w: _Worker, retry: deque[_Task], why: str | None, exitcode: int | None
    ) -> Iterator[pa.Table]:
        """``w`` died or overran: replace it; isolate or report its task."""
        task = w.task
        tail = self._tail(w)
        if why == TIMEOUT:
            self._stop(w, kill=True)
        else:
            self._stop(w, kill=False)
        self.stats.workers_lost += 1
        if task is None:
            if not w.ready:
                detail = f": {tail}" if tail else ""
                raise ParameterError(f"a worker died while starting (exit code {exitcode}){detail}")
            return
        if not task.single:
            # Run the batch's files one per task to find the culprit.
            self.stats.isolated_batches += 1
            retry.extendleft(
                _Task(task.rows.slice(i, 1), single=True)
                for i in reversed(range(task.rows.num_rows))
            )
            return
        kind, message = self._diagnose(why, exitcode, tail)
        _log.warning("%s: %s", task.rows.column("path")[0].as_py(), message)
        yield error_rows(task.rows, kind, message)

    def _diagnose(self, why: str | None, exitcode: int | None, tail: str) -> tuple[str, str]:
        if why == TIMEOUT:
            return TIMEOUT, f"no result within {self.file_timeout:g} s (worker killed)"
        alloc = any(s in tail for s in _ALLOC_FAILURES)
        detail = f" ({tail})" if tail else ""
        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = f"signal {-exitcode}"
            if alloc and self.memory_limit is not None:
                return RESOURCE_LIMIT, (
                    f"worker died of a failed allocation under the memory limit of "
                    f"{self.memory_limit} bytes ({name}){detail}"
                )
            return DECODER_CRASH, f"worker killed by {name}{detail}"
        return DECODER_CRASH, f"worker exited with status {exitcode} without a result{detail}"


class LocalWorkers:
    """The executor of a run on this machine: a :class:`Supervisor` of
    ``workers`` processes (default: :func:`default_workers`), no more than
    the run has batches."""

    engine = "local"
    replaces_sigterm = False

    def __init__(self) -> None:
        self.stats = SupervisorStats()
        self._sup: Supervisor | None = None
        self._setup: tuple[CurateConfig, Sequence[Stage]] | None = None
        self._workers = 1

    def start(self, cfg: CurateConfig, stages: Sequence[Stage], files: int) -> int:
        """Take the run's options (workers start with the first batch);
        return the workers it runs at most."""
        self._setup = (cfg, stages)
        self._workers = default_workers() if cfg.workers is None else cfg.workers
        return self._workers

    def run(
        self, batches: Iterator[pa.Table], n_batches: int, heartbeat: Callable[[], None]
    ) -> Iterator[pa.Table]:
        """The rows of ``batches`` (``n_batches`` of them) in completion order."""
        if self._setup is None or n_batches == 0:
            return iter(())
        cfg, stages = self._setup
        self._sup = Supervisor(
            cfg.batch_config(),
            stages,
            workers=min(self._workers, n_batches),
            file_timeout=cfg.file_timeout,
            memory_limit=cfg.memory_limit,
        )
        self.stats = self._sup.stats
        return self._sup.run(batches, heartbeat=heartbeat, heartbeat_s=HEARTBEAT_S)

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self._sup is not None:
            self._sup.close()

    def summary_fields(self) -> dict[str, dict[str, Any]]:
        """What the workers did, for the summary's ``this_run``."""
        return {"this_run": asdict(self.stats)}


class InProcess:
    """The executor of ``workers=0``: the batches run one after the other in
    the driver's process, without crash isolation (a file that kills its
    decoder ends the run). Its summary has the worker counts of
    :class:`LocalWorkers`, all zero."""

    engine = "local"
    replaces_sigterm = False

    def __init__(self) -> None:
        self._setup: tuple[CurateConfig, Sequence[Stage]] | None = None

    def start(self, cfg: CurateConfig, stages: Sequence[Stage], files: int) -> int:
        """Take the run's options; one batch runs at a time."""
        self._setup = (cfg, stages)
        return 1

    def run(
        self, batches: Iterator[pa.Table], n_batches: int, heartbeat: Callable[[], None]
    ) -> Iterator[pa.Table]:
        """The rows of each of ``batches``, in order."""
        if self._setup is None or n_batches == 0:
            return
        cfg, stages = self._setup
        proc = BatchProcessor(cfg.batch_config(), stages)
        for batch in batches:
            yield proc(batch)

    def close(self) -> None:
        """Nothing to stop."""

    def summary_fields(self) -> dict[str, dict[str, Any]]:
        """Zero worker counts, for the summary's ``this_run``."""
        return {"this_run": asdict(SupervisorStats())}


def local_executor(cfg: CurateConfig) -> LocalWorkers | InProcess:
    """The executor of a run on this machine: :class:`InProcess` for
    ``workers=0``, else :class:`LocalWorkers`."""
    return InProcess() if cfg.workers == 0 else LocalWorkers()
