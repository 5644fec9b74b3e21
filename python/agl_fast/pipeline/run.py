"""The curation driver: batches of files through :func:`process_batch` on
an :class:`Executor` (this process, worker processes on this machine, or
Ray actors), rows into Parquet parts. There is one driver for every
engine: it owns the output directory, the skip set, the progress log, the
signals and the summary; the executor only runs batches.

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
import platform
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import __version__
from .._internal.safe_files import check_tree, write_atomic
from ..exceptions import ParameterError, RunInterrupted
from .batch import BASE_COLUMNS, error_rows, stage_names
from .config import CurateConfig, default_workers
from .engines.local import local_executor
from .inputs import Inputs, extra_columns_at
from .journal import PARTS_DIR, PartSink, progress_files, read_parts, recover
from .precheck import REFUSED_PATH, check_paths
from .stages import Stage, atomic_write_parquet

__all__ = [
    "CurateConfig",
    "Executor",
    "Resumed",
    "curate",
    "default_workers",
    "final_table",
    "input_table",
    "prepare_out",
    "run_counts",
    "stop_on_signals",
]

_log = logging.getLogger("agl_fast.pipeline")

#: Rows of unreadable inputs handed to the part sink at a time.
PRECHECK_CHUNK = 8192


class Executor(Protocol):
    """What runs the batches of :func:`curate`: :class:`~.engines.local.InProcess`,
    :class:`~.engines.local.LocalWorkers` (the default) or
    :class:`~agl_fast.ray.RayActors`. The driver owns everything else: the
    output directory, the skip set, the progress log, the signals and the
    summary.

    Attributes
    ----------
    engine : str
        Its name among :data:`~agl_fast.pipeline.config.ENGINES` (the
        rules :meth:`CurateConfig.validate` applies, and the summary's
        ``engine``).
    replaces_sigterm : bool
        Whether the run's SIGTERM handler replaces one the application
        installed (Ray's driver installs one that exits at once).
    """

    engine: str
    replaces_sigterm: bool

    def start(self, cfg: CurateConfig, stages: Sequence[Stage], files: int) -> int:
        """Set up for a run of at most ``files`` files (the set-up may go on
        while the driver checks the inputs); return how many batches it
        runs at once."""
        ...

    def run(
        self, batches: Iterator[pa.Table], n_batches: int, heartbeat: Callable[[], None]
    ) -> Iterator[pa.Table]:
        """Yield a table of rows for every file of ``batches`` (``n_batches``
        of them, each taken only when it is handed out), in any order;
        call ``heartbeat`` at least every second or so while waiting."""
        ...

    def close(self) -> None:
        """Stop whatever :meth:`start` and :meth:`run` started (idempotent)."""
        ...

    def summary_fields(self) -> dict[str, dict[str, Any]]:
        """Entries of its own for the summary's ``this_run``,
        ``parameters`` and ``versions``."""
        ...


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


def _interrupted(exc: KeyboardInterrupt, out: Path, sink: PartSink) -> RunInterrupted:
    """The :class:`RunInterrupted` a run raises when a signal stops it (the
    signal's own, else SIGINT), after logging what is saved and what
    ``--resume`` will redo."""
    signum = exc.signum if isinstance(exc, RunInterrupted) else signal.SIGINT
    _log.warning(
        "%s: stopping; rows of finished files are saved in %s, %d files in flight "
        "will be redone by --resume",
        signal.Signals(signum).name,
        out,
        len(sink.in_flight),
    )
    return RunInterrupted(signum)


def _metadata_pass(inputs: Inputs, todo: list[int]) -> tuple[list[int], pa.Table]:
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
    executor: Executor | None = None,
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
        Run parameters, checked once (:meth:`CurateConfig.validate`) for
        the executor's engine before anything is read or written.
    stages : sequence of Stage
        Extra stages (e.g. a custom tagger), run after the built-in ones;
        sent to the worker processes, so they must be picklable.
    progress : callable or None
        Called as rows finish with ``(files_done, audio_seconds_done)``.
    executor : Executor or None
        What runs the batches (default: worker processes on this machine,
        or this process for ``workers=0``; :class:`~agl_fast.ray.RayActors`
        for a Ray cluster).

    Raises
    ------
    ParameterError
        An option no run could start with, or an output directory that
        holds a run without ``resume``.
    RunInterrupted
        On SIGINT or SIGTERM, after the finished rows are flushed.
    """
    cfg = cfg or CurateConfig()
    executor = executor or local_executor(cfg)
    cfg.validate(executor.engine)
    if not inputs.keys:
        spec = inputs.source.get("spec", "")
        raise ParameterError(f"no audio files to curate in {spec!r}" if spec else "no inputs")
    out = Path(out)
    state = prepare_out(out, inputs, cfg.resume)
    skip = state.done - state.failed if cfg.retry_failed else state.done
    todo = [i for i, k in enumerate(inputs.keys) if k not in skip]
    try:
        # The executor may set up (e.g. start actors) while the inputs are checked.
        parallel = executor.start(cfg, stages, len(todo))
        todo, unreadable = _metadata_pass(inputs, todo)
        sink = PartSink(out, state.next_part, cfg.part_rows, cfg.part_bytes)
        size = cfg.batch_size_for(len(todo), parallel)
        tables = (input_table(inputs, todo[s : s + size]) for s in range(0, len(todo), size))
        batches = _logged(sink, tables), -(-len(todo) // size)
        audio_s, wall = _execute(executor, sink, unreadable, batches, progress, out)
    finally:
        executor.close()
    final = _write_final(out, inputs)
    this_run = {
        "files": len(todo),
        "audio_seconds": audio_s,
        "wall_seconds": wall,
        "redone_in_flight": len(state.redo),
    }
    names = [*stage_names(cfg), *(s.name for s in stages)]
    summary = _summary(final, cfg, inputs, names, this_run, executor)
    write_atomic(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _execute(
    executor: Executor,
    sink: PartSink,
    unreadable: pa.Table,
    batches: tuple[Iterator[pa.Table], int],
    progress: Callable[[int, float], None] | None,
    out: Path,
) -> tuple[float, float]:
    """Put the error rows of ``unreadable`` inputs, then the rows of
    ``batches`` (the tables and their count) as ``executor`` returns them,
    into ``sink``, under the run's signal handler; return the audio seconds
    done and the wall time. A run that does not finish leaves its log
    flushed for ``resume``."""
    t0 = time.perf_counter()
    finished = False
    try:
        with stop_on_signals(override=executor.replaces_sigterm):
            chunks = range(0, unreadable.num_rows, PRECHECK_CHUNK)
            audio_s = _consume_rows(
                sink, (unreadable.slice(a, PRECHECK_CHUNK) for a in chunks), progress
            )
            rows = executor.run(*batches, sink.tick)
            audio_s = _consume_rows(sink, rows, progress, audio_s)
            sink.finish()
            finished = True
    except KeyboardInterrupt as exc:
        raise _interrupted(exc, out, sink) from exc
    finally:
        if not finished:
            sink.abort()
    return audio_s, time.perf_counter() - t0


def _logged(sink: PartSink, batches: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """``batches``, each recorded as started when it is taken (that is, just
    before a worker gets it)."""
    for b in batches:
        sink.started(b)
        yield b


def _consume_rows(
    sink: PartSink,
    tables: Iterable[pa.Table],
    progress: Callable[[int, float], None] | None,
    audio_s: float = 0.0,
) -> float:
    """Put each table into ``sink`` and report progress; return the audio
    seconds done, ``audio_s`` plus those of ``tables``."""
    for table in tables:
        sink.add(table)
        at = table.schema.get_field_index("duration")
        if at >= 0 and pa.types.is_floating(table.schema.field(at).type):
            audio_s += float(np.nansum(table.column(at).to_numpy(zero_copy_only=False)))
        if progress is not None:
            progress(table.num_rows, audio_s)
    return audio_s


def _write_final(out: Path, inputs: Inputs) -> pa.Table:
    """Join the finished parts into ``curated.parquet`` in input order;
    return the table."""
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
    this_run: dict[str, Any],
    executor: Executor,
) -> dict[str, Any]:
    """``summary.json`` of a run: the input and what listing it left out,
    the counts of the final table, this run's work and throughput, the
    stages, parameters and versions, with the executor's own entries."""
    dur = (
        final.column("duration").to_numpy(zero_copy_only=False)
        if "duration" in final.column_names
        else np.zeros(0)
    )
    files, audio_s, wall = this_run["files"], this_run["audio_seconds"], this_run["wall_seconds"]
    own = executor.summary_fields()
    return {
        "engine": executor.engine,
        "input": dict(inputs.source),
        "skipped": inputs.skipped or {"count": 0, "by_extension": {}, "files": []},
        "counts": run_counts(final, len(inputs.keys)),
        "audio_hours": float(np.nansum(dur.astype(np.float64))) / 3600,
        "this_run": {
            **this_run,
            "files_per_second": files / wall if wall > 0 else None,
            "x_real_time": audio_s / wall if wall > 0 else None,
            **own.get("this_run", {}),
        },
        "stages": list(stages),
        "parameters": {
            **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
            **own.get("parameters", {}),
        },
        "versions": {
            "agl_fast": __version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "pyarrow": pa.__version__,
            **own.get("versions", {}),
        },
    }
