"""The curation driver: batches of files through decode and the stages.

Layout of the output directory::

    parts/part-00000.parquet ...   one file per finished batch
    features/part-00000.parquet    feature shards (same batch numbers)
    curated.parquet                every row, in input order (at the end)
    summary.json                   counts, throughput, versions, parameters

Every file is written to a temporary name and renamed, so a killed run
leaves only whole files. A restarted run (``resume=True``) reads the keys of
the finished parts, drops feature shards whose part never landed, and
processes only the remaining keys: the final table equals an uninterrupted
run's. Memory is bounded by ``batch_size`` files of at most
``max_duration`` seconds.
"""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..audio import load_arrays
from ..exceptions import ParameterError
from .inputs import Inputs, extra_columns
from .stages import Clips, FeatureStage, Stage, atomic_write_parquet, levels_stage
from .stages import registered_stages as _registered

__all__ = ["CurateConfig", "curate"]


@dataclass
class CurateConfig:
    """Parameters of a run (recorded in the summary)."""

    sr: int = 32000
    mono: bool = False
    features: str = "none"
    workers: int | None = None
    batch_size: int = 8
    max_duration: float | None = 600.0
    res_type: str = "hq"
    resume: bool = False


_BASE = [
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
]


def _part_files(out: Path) -> list[Path]:
    return sorted((out / "parts").glob("part-*.parquet"))


def _batch_no(p: Path) -> int:
    return int(p.stem.split("-")[1])


def _prepare_out(out: Path, resume: bool) -> tuple[set[str], int]:
    parts = _part_files(out)
    if parts and not resume:
        raise ParameterError(
            f"{out} already holds a run ({len(parts)} finished batches); pass resume=True "
            "(--resume) to continue it or choose another output directory"
        )
    (out / "parts").mkdir(parents=True, exist_ok=True)
    done: set[str] = set()
    for p in parts:
        done.update(pq.read_table(p, columns=["key"]).column("key").to_pylist())
    finished = {_batch_no(p) for p in parts}
    for shard in (out / "features").glob("part-*.parquet"):
        if _batch_no(shard) not in finished:
            shard.unlink()  # its batch never landed; it will be redone
    for tmp in list(out.glob("**/.*.tmp")):
        tmp.unlink()
    return done, max(finished, default=-1) + 1


#: The decoder's level columns, handed to the ``levels`` stage.
_LEVELS = ("peak", "rms", "clipped_fraction")


def _process_batch(
    keys: list[str],
    paths: list[str],
    batch_id: int,
    cfg: CurateConfig,
    stages: Sequence[Stage],
    inputs: Inputs,
) -> pa.Table:
    arrays, table = load_arrays(
        paths,
        keys=keys,
        sr=cfg.sr,
        mono=cfg.mono,
        max_duration=cfg.max_duration,
        res_type=cfg.res_type,
        n_threads=cfg.workers,
    )
    ok = [i for i, a in enumerate(arrays) if a is not None]
    audio = [a for a in arrays if a is not None]
    levels = np.column_stack([table.column(c).to_numpy(zero_copy_only=False)[ok] for c in _LEVELS])
    table = table.drop_columns(list(_LEVELS))
    clips = Clips([keys[i] for i in ok], audio, cfg.sr, batch_id, levels)
    stage_errors: list[str | None] = [None] * len(keys)
    passed = [a is not None for a in arrays]
    for st in stages:
        try:
            cols = st(clips) if len(clips) else {}
        except Exception as exc:
            for i in ok:
                stage_errors[i] = f"{st.name}: {type(exc).__name__}: {exc}"
            continue
        for name, col in cols.items():
            arr = col if isinstance(col, (pa.Array, pa.ChunkedArray)) else pa.array(col)
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            full = pa.nulls(len(keys), arr.type).to_pylist()
            for j, i in enumerate(ok):
                full[i] = arr[j].as_py()
            table = table.append_column(name, pa.array(full, arr.type))
            if name == "quality_pass":
                passed = [p and bool(v) for p, v in zip(passed, full, strict=True)]
    table = table.append_column("passed", pa.array(passed, pa.bool_()))
    table = table.append_column("stage_error", pa.array(stage_errors, pa.string()))
    for name, arr in extra_columns(inputs, keys).items():
        table = table.append_column(name, arr)
    return table


def _atomic_json(obj: Any, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


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
        Extra stages (e.g. tagging), run after the built-in ones.
    progress : callable or None
        Called after each batch with ``(files_done, audio_seconds_done)``.
    """
    cfg = cfg or CurateConfig()
    if cfg.batch_size < 1:
        raise ParameterError(f"batch_size must be >= 1, got batch_size={cfg.batch_size}")
    out = Path(out)
    done, next_batch = _prepare_out(out, cfg.resume)
    run_stages: list[Stage] = [levels_stage, *_registered()]
    if cfg.features != "none":
        run_stages.append(FeatureStage(cfg.features, out / "features", cfg.workers))
    run_stages.extend(stages)
    todo = [i for i, k in enumerate(inputs.keys) if k not in done]
    t0 = time.perf_counter()
    audio_s = 0.0
    for start in range(0, len(todo), cfg.batch_size):
        idx = todo[start : start + cfg.batch_size]
        keys = [inputs.keys[i] for i in idx]
        paths = [inputs.paths[i] for i in idx]
        table = _process_batch(keys, paths, next_batch, cfg, run_stages, inputs)
        atomic_write_parquet(table, out / "parts" / f"part-{next_batch:05d}.parquet")
        next_batch += 1
        audio_s += float(np.nansum(table.column("duration").to_numpy(zero_copy_only=False)))
        if progress is not None:
            progress(len(idx), audio_s)
    wall = time.perf_counter() - t0
    final = pa.concat_tables(
        [pq.read_table(p) for p in _part_files(out)], promote_options="permissive"
    )
    base = [n for n in _BASE if n in final.column_names]
    final = final.select(base + sorted(set(final.column_names) - set(base)))
    order = {k: i for i, k in enumerate(inputs.keys)}
    rank = np.array([order[k] for k in final.column("key").to_pylist()], np.int64)
    final = final.take(pa.array(np.argsort(rank, kind="stable")))
    atomic_write_parquet(final, out / "curated.parquet")
    summary = _summary(final, cfg, run_stages, wall, len(todo), audio_s)
    _atomic_json(summary, out / "summary.json")
    return summary


def _summary(
    final: pa.Table,
    cfg: CurateConfig,
    stages: Sequence[Stage],
    wall: float,
    processed: int,
    audio_s: float,
) -> dict[str, Any]:
    errors = Counter(e for e in final.column("error_type").to_pylist() if e is not None)
    total_audio = float(np.nansum(final.column("duration").to_numpy(zero_copy_only=False)))
    return {
        "counts": {
            "rows": final.num_rows,
            "decoded": final.num_rows - sum(errors.values()),
            "failed": sum(errors.values()),
            "passed": int(sum(bool(v) for v in final.column("passed").to_pylist())),
            "truncated": int(sum(bool(v) for v in final.column("truncated").to_pylist())),
            "errors_by_type": dict(sorted(errors.items())),
        },
        "audio_hours": total_audio / 3600,
        "this_run": {
            "files": processed,
            "audio_seconds": audio_s,
            "wall_seconds": wall,
            "files_per_second": processed / wall if wall > 0 else None,
            "x_real_time": audio_s / wall if wall > 0 else None,
        },
        "stages": [s.name for s in stages],
        "parameters": asdict(cfg),
        "versions": {
            "agl_fast": __version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "pyarrow": pa.__version__,
        },
    }
