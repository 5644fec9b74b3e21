"""The curation driver: batches of files through :func:`process_batch` in
worker processes, rows into Parquet parts.

Layout of the output directory::

    progress/part-00003.log        rows of the part being filled, logged as
                                   each batch finishes (while running)
    parts/part-00000.parquet ...   finished rows (every column but
                                   ``features``), about ``part_rows`` rows
                                   or ``part_bytes`` bytes each
    features/part-00000.parquet    ``key`` and ``features`` of the same rows
    curated.parquet                every row, in input order (at the end)
    summary.json                   input, counts, throughput, parameters

Progress is durable (:mod:`agl_fast.pipeline.journal`): a batch's rows are
logged the moment they come back and flushed to disk within
:data:`~agl_fast.pipeline.journal.FLUSH_FILES` files or
:data:`~agl_fast.pipeline.journal.FLUSH_SECONDS` seconds, whatever
``part_rows`` says. SIGINT and SIGTERM stop the run after flushing
(:class:`~agl_fast.exceptions.RunInterrupted`); a run killed at any moment
(``kill -9``) loses at most its batches in flight. A restarted run
(``resume=True``) turns the logs into parts, logs how many files were in
flight (they are redone), and processes only the remaining keys: the final
table equals an uninterrupted run's. A file whose worker was lost
(``DecoderCrash``, ``Timeout``, ``ResourceLimit``) has its row like any
other, so a resumed run does not try it again; ``retry_failed=True`` runs
every failed row's file again and keeps the newest row per key. Memory is
bounded by ``workers * batch_size`` files of at most ``max_duration``
seconds plus one part (read back from its log when it is written); the work
per file does not grow with the run.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import __version__
from .._internal.safe_files import check_tree, write_atomic
from ..exceptions import ParameterError, RunInterrupted
from .batch import BASE_COLUMNS, BatchConfig, BatchProcessor, error_rows, stage_names
from .engines.local import Supervisor, SupervisorStats
from .inputs import Inputs, extra_columns_at
from .journal import PARTS_DIR, PartSink, progress_files, read_parts, recover
from .precheck import REFUSED_PATH, check_paths
from .stages import Stage, atomic_write_parquet

__all__ = [
    "PRECHECK_CHUNK",
    "CurateConfig",
    "Resumed",
    "atomic_json",
    "consume_rows",
    "curate",
    "default_workers",
    "final_table",
    "input_table",
    "interrupted",
    "metadata_pass",
    "prepare_out",
    "run_counts",
    "skipped_summary",
    "stop_on_signals",
]

_log = logging.getLogger("agl_fast.pipeline")

#: Rows of unreadable inputs handed to the part sink at a time.
PRECHECK_CHUNK = 8192

#: Batches per worker at least, when ``batch_size`` would give fewer.
_TASKS_PER_WORKER = 4

#: Seconds between two looks at the flush schedule while workers run.
_HEARTBEAT_S = 1.0


@dataclass
class CurateConfig(BatchConfig):
    """Parameters of a run (recorded in the summary): what each file gets
    (:class:`BatchConfig`) and how the run is driven.

    Attributes
    ----------
    workers : int or None
        Worker processes (default: the CPUs this process may use); 0 runs
        the batches in this process, without crash isolation.
    batch_size : int
        Files per call of the batch function.
    file_timeout : float or None
        Seconds per file before its worker is killed (a batch gets
        ``file_timeout * batch_size``); None: no limit.
    memory_limit : int or None
        Address-space cap of each worker in bytes (None: no cap).
    part_rows, part_bytes : int
        A part is written once this many rows or bytes of rows are done
        (rows are durable long before: see the module notes).
    resume : bool
        Continue the run in the output directory.
    retry_failed : bool
        With ``resume``: run the files of failed rows again.
    """

    workers: int | None = None
    batch_size: int = 8
    file_timeout: float | None = 60.0
    memory_limit: int | None = None
    part_rows: int = 20_000
    part_bytes: int = 64 << 20
    resume: bool = False
    retry_failed: bool = False

    def batch_config(self) -> BatchConfig:
        """The per-file part of the configuration."""
        return BatchConfig(**{f.name: getattr(self, f.name) for f in fields(BatchConfig)})

    def validate_run(self, min_workers: int = 0) -> BatchConfig:
        """Check the run options (both engines) and the per-file ones;
        return the per-file part.

        Parameters
        ----------
        min_workers : int
            The fewest workers the engine can run with (0: in this process).

        Raises
        ------
        ParameterError
            An option no run could start with.
        """
        if self.batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got batch_size={self.batch_size}")
        if self.part_rows < 1 or self.part_bytes < 1:
            raise ParameterError(
                f"part_rows and part_bytes must be >= 1, got part_rows={self.part_rows}, "
                f"part_bytes={self.part_bytes}"
            )
        if self.workers is not None and self.workers < min_workers:
            where = " on Ray" if min_workers else ""
            raise ParameterError(
                f"workers must be >= {min_workers}{where}, got workers={self.workers}"
            )
        cfg = self.batch_config()
        cfg.validate()
        return cfg


def default_workers() -> int:
    """Worker processes by default: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class Resumed:
    """Where a run directory stands before a run: the keys with a row (of
    which ``failed`` have an error row), the files that were in flight when
    the last run stopped and have no row (``redo``), the next part."""

    done: set[str]
    failed: set[str]
    redo: set[str]
    next_part: int


def prepare_out(out: Path, inputs: Inputs, resume: bool) -> Resumed:
    """Check ``out`` for an earlier run (refused without ``resume``), bring
    it to a consistent state and tell where it stands; log, at INFO, how
    many files a resumed run redoes. A symlink in ``out`` that points
    outside it is refused (:class:`~agl_fast.exceptions.UnsafePathError`)
    before anything is written or removed."""
    check_tree(out)
    found = progress_files(out)
    if found and not resume:
        raise ParameterError(
            f"{out} already holds a run ({found} finished parts or progress logs); pass "
            "resume=True (--resume) to continue it or choose another output directory"
        )
    (out / PARTS_DIR).mkdir(parents=True, exist_ok=True)
    state = recover(out)
    done: set[str] = set()
    failed: set[str] = set()
    rows = read_parts(out, ["key", "error_type"])
    if rows is not None:
        keys = rows.column("key").to_pylist()
        bad = pc.is_valid(rows.column("error_type")).to_pylist()
        done = set(keys)
        failed = {k for k, b in zip(keys, bad, strict=True) if b}
    redo = {k for k in state.started if k not in done and k in inputs.index}
    if resume and found:
        _log.info(
            "resuming %s: %d files have rows; redoing %d files that were in flight when "
            "the run stopped",
            out,
            len(done),
            len(redo),
        )
    return Resumed(done, failed, redo, state.next_part)


@contextmanager
def stop_on_signals(override: bool = False) -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`RunInterrupted` as SIGINT
    raises ``KeyboardInterrupt`` (main thread only), so the run can flush
    and stop. A SIGTERM handler the application installed is left alone
    unless ``override`` (Ray's driver installs one that exits at once)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise RunInterrupted(signum)

    old = signal.getsignal(signal.SIGTERM)
    mine = override or old in (signal.SIG_DFL, None)
    if mine:
        signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        if mine:
            signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)


def _logged(sink: PartSink, batches: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """``batches``, each recorded as started when it is taken (that is, just
    before a worker gets it)."""
    for b in batches:
        sink.started(b)
        yield b


def interrupted(exc: KeyboardInterrupt, out: Path, sink: PartSink) -> RunInterrupted:
    """The :class:`RunInterrupted` a run raises when a signal stops it (the
    signal's own, else SIGINT), after logging what is saved and what
    ``--resume`` will redo; both engines use it."""
    signum = exc.signum if isinstance(exc, RunInterrupted) else signal.SIGINT
    _log.warning(
        "%s: stopping; rows of finished files are saved in %s, %d files in flight "
        "will be redone by --resume",
        signal.Signals(signum).name,
        out,
        len(sink.in_flight),
    )
    return RunInterrupted(signum)


def skipped_summary(inputs: Inputs) -> dict[str, Any]:
    """The ``skipped`` entry of a run summary: what listing the inputs left
    out (:attr:`Inputs.skipped`), zero counts when nothing was."""
    return inputs.skipped or {"count": 0, "by_extension": {}, "files": []}


def metadata_pass(inputs: Inputs, todo: list[int]) -> tuple[list[int], pa.Table]:
    """Split ``todo`` into the inputs to decode and the error rows of those
    that cannot be read (:func:`~agl_fast.pipeline.precheck.check_paths`) or
    whose file was refused (:attr:`Inputs.refused`), before any worker starts."""
    t0 = time.perf_counter()
    bad = check_paths([inputs.paths[i] for i in todo])
    if inputs.refused:  # their paths are empty: never among ``bad``
        why = [inputs.refused.get(inputs.keys[i]) for i in todo]
        bad = sorted(
            bad + [(j, REFUSED_PATH, f"audio refused: {w}") for j, w in enumerate(why) if w]
        )
    if not bad:
        return todo, pa.table({})
    positions = [todo[j] for j, _, _ in bad]
    rows = error_rows(
        input_table(inputs, positions), [t for _, t, _ in bad], [m for _, _, m in bad]
    )
    counts = Counter(t for _, t, _ in bad)
    _log.warning(
        "%d of %d inputs cannot be read (%s), found in %.2f s before decoding; each has "
        "its error row",
        len(bad),
        len(todo),
        ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())),
        time.perf_counter() - t0,
    )
    gone = set(positions)
    return [i for i in todo if i not in gone], rows


def input_table(inputs: Inputs, idx: list[int]) -> pa.Table:
    cols: dict[str, Any] = {
        "key": pa.array([inputs.keys[i] for i in idx], pa.string()),
        "path": pa.array([inputs.paths[i] for i in idx], pa.string()),
    }
    cols.update(extra_columns_at(inputs, idx))
    return pa.table(cols)


def _in_process(
    cfg: BatchConfig, stages: Sequence[Stage], batches: Iterator[pa.Table]
) -> Iterator[pa.Table]:
    proc = BatchProcessor(cfg, stages)
    for b in batches:
        yield proc(b)


def atomic_json(obj: Any, path: Path) -> None:
    """Write ``obj`` as indented JSON to ``path`` (a new temporary file and a
    rename, inside ``path``'s folder)."""
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def final_table(rows: pa.Table, inputs: Inputs, out: str | Path) -> pa.Table:
    """A run's final table from its rows: keys of ``inputs`` only (others
    are logged and left out), the base columns first and the rest by name,
    rows in input order."""
    order = inputs.index
    known = np.array([k in order for k in rows.column("key").to_pylist()], bool)
    if not known.all():
        _log.warning("%d rows of %s have keys outside the inputs; left out", (~known).sum(), out)
        rows = rows.filter(pa.array(known))
    base = [n for n in BASE_COLUMNS if n in rows.column_names]
    rows = rows.select(base + sorted(set(rows.column_names) - set(base)))
    rank = np.array([order[k] for k in rows.column("key").to_pylist()], np.int64)
    return rows.take(pa.array(np.argsort(rank, kind="stable")))


def curate(
    inputs: Inputs,
    out: str | Path,
    cfg: CurateConfig | None = None,
    *,
    stages: Sequence[Stage] = (),
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Run the pipeline over ``inputs`` into ``out``; return the summary.

    Parameters
    ----------
    inputs : Inputs
        From :func:`~agl_fast.pipeline.inputs.discover` or
        :func:`~agl_fast.pipeline.inputs.read_manifest`.
    out : str or Path
        Output directory (see the module notes for its layout).
    cfg : CurateConfig
        Run parameters.
    stages : sequence of Stage
        Extra stages (e.g. a custom tagger), run after the built-in ones;
        sent to the worker processes, so they must be picklable.
    progress : callable or None
        Called as rows finish with ``(files_done, audio_seconds_done)``.
    """
    cfg = cfg or CurateConfig()
    if not inputs.keys:
        spec = inputs.source.get("spec", "")
        raise ParameterError(f"no audio files to curate in {spec!r}" if spec else "no inputs")
    batch_cfg = cfg.validate_run()
    out = Path(out)
    state = prepare_out(out, inputs, cfg.resume)
    skip = state.done - state.failed if cfg.retry_failed else state.done
    todo = [i for i, k in enumerate(inputs.keys) if k not in skip]
    todo, unreadable = metadata_pass(inputs, todo)
    workers = default_workers() if cfg.workers is None else cfg.workers
    sink = PartSink(out, state.next_part, cfg.part_rows, cfg.part_bytes)
    batches, n_batches = _batches(inputs, todo, cfg.batch_size, workers, sink)
    stats = SupervisorStats()
    t0 = time.perf_counter()
    audio_s = 0.0
    sup = None
    finished = False
    try:
        with stop_on_signals():
            chunks = range(0, unreadable.num_rows, PRECHECK_CHUNK)
            audio_s = consume_rows(
                sink, (unreadable.slice(a, PRECHECK_CHUNK) for a in chunks), progress
            )
            if workers == 0 or not todo:
                rows = _in_process(batch_cfg, stages, batches) if todo else iter(())
            else:
                sup = Supervisor(
                    batch_cfg,
                    stages,
                    workers=min(workers, n_batches),
                    file_timeout=cfg.file_timeout,
                    memory_limit=cfg.memory_limit,
                )
                stats = sup.stats
                rows = sup.run(batches, heartbeat=sink.tick, heartbeat_s=_HEARTBEAT_S)
            audio_s = consume_rows(sink, rows, progress, audio_s)
            sink.finish()
            finished = True
    except KeyboardInterrupt as exc:
        raise interrupted(exc, out, sink) from exc
    finally:
        if not finished:
            sink.abort()
        if sup is not None:
            sup.close()
    wall = time.perf_counter() - t0
    final = write_final(out, inputs)
    names = [*stage_names(batch_cfg), *(s.name for s in stages)]
    summary = _summary(final, cfg, inputs, names, wall, len(todo), audio_s, stats)
    summary["this_run"]["redone_in_flight"] = len(state.redo)
    atomic_json(summary, out / "summary.json")
    return summary


def _batches(
    inputs: Inputs, todo: list[int], batch_size: int, workers: int, sink: PartSink
) -> tuple[Iterator[pa.Table], int]:
    """The input tables of the run's batches, each logged as started when
    it is taken, and their count. Smaller batches when there are few files,
    so that every worker gets several (a run's tail is then one file, not
    one batch, long)."""
    size = min(batch_size, max(1, -(-len(todo) // (max(workers, 1) * _TASKS_PER_WORKER))))
    tables = (input_table(inputs, todo[s : s + size]) for s in range(0, len(todo), size))
    return _logged(sink, tables), -(-len(todo) // size)


def consume_rows(
    sink: PartSink,
    tables: Iterable[pa.Table],
    progress: Callable[[int, float], None] | None,
    audio_s: float = 0.0,
) -> float:
    """Put each table into ``sink`` and report progress (both engines);
    return the audio seconds done, ``audio_s`` plus those of ``tables``."""
    for table in tables:
        sink.add(table)
        at = table.schema.get_field_index("duration")
        if at >= 0 and pa.types.is_floating(table.schema.field(at).type):
            audio_s += float(np.nansum(table.column(at).to_numpy(zero_copy_only=False)))
        if progress is not None:
            progress(table.num_rows, audio_s)
    return audio_s


def write_final(out: Path, inputs: Inputs) -> pa.Table:
    """Join the finished parts into ``curated.parquet`` in input order (both
    engines); return the table."""
    rows = read_parts(out)
    if rows is None:
        rows = pa.table({c: pa.array([], pa.string()) for c in ("key", "error_type")})
    final = final_table(rows, inputs, out)
    atomic_write_parquet(final, out / "curated.parquet", out)
    return final


_SIGNAL = re.compile(r"\b(SIG[A-Z0-9]+)\b")


def _reason(error_type: str, message: str | None) -> str:
    """An error row's reason: its type, with the signal of a crash."""
    m = _SIGNAL.search(message or "") if error_type == "DecoderCrash" else None
    return f"{error_type} ({m.group(1)})" if m else error_type


def run_counts(final: pa.Table, n_inputs: int) -> dict[str, Any]:
    """The ``counts`` of a run's summary from its final table: rows,
    decoded, failed, passed, truncated, errors by type and by reason (a
    crash's signal named), rejections by reason."""

    def col(name: str) -> list[Any]:
        return final.column(name).to_pylist() if name in final.column_names else []

    types = col("error_type")
    errors = Counter(e for e in types if e is not None)
    reasons = Counter(
        _reason(e, m) for e, m in zip(types, col("error_message"), strict=True) if e is not None
    )
    rejected: Counter[str] = Counter()
    for e, passed, rs in zip(
        types, col("passed"), col("reasons") or [None] * len(types), strict=True
    ):
        if e is None and not passed:
            for r in rs if isinstance(rs, list) else [rs]:
                rejected[str(r)] += 1
    return {
        "inputs": n_inputs,
        "rows": final.num_rows,
        "decoded": final.num_rows - sum(errors.values()),
        "failed": sum(errors.values()),
        "passed": int(sum(bool(v) for v in col("passed"))),
        "truncated": int(sum(bool(v) for v in col("truncated"))),
        "errors_by_type": dict(sorted(errors.items())),
        "errors_by_reason": dict(sorted(reasons.items())),
        "rejected_by_reason": dict(sorted(rejected.items())),
    }


def _summary(
    final: pa.Table,
    cfg: CurateConfig,
    inputs: Inputs,
    stages: Sequence[str],
    wall: float,
    processed: int,
    audio_s: float,
    stats: SupervisorStats,
) -> dict[str, Any]:
    dur = (
        final.column("duration").to_numpy(zero_copy_only=False)
        if "duration" in final.column_names
        else np.zeros(0)
    )
    total_audio = float(np.nansum(dur.astype(np.float64)))
    return {
        "input": dict(inputs.source),
        "skipped": skipped_summary(inputs),
        "counts": run_counts(final, len(inputs.keys)),
        "audio_hours": total_audio / 3600,
        "this_run": {
            "files": processed,
            "audio_seconds": audio_s,
            "wall_seconds": wall,
            "files_per_second": processed / wall if wall > 0 else None,
            "x_real_time": audio_s / wall if wall > 0 else None,
            "worker_cpu_seconds": stats.worker_cpu_seconds,
            "workers_started": stats.workers_started,
            "workers_lost": stats.workers_lost,
            "isolated_batches": stats.isolated_batches,
            "worker_peak_vm_bytes": stats.worker_peak_vm_bytes,
        },
        "stages": list(stages),
        "parameters": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
        "versions": {
            "agl_fast": __version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "pyarrow": pa.__version__,
        },
    }
