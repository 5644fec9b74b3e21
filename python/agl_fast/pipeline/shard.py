"""Splitting a run across machines without a cluster engine, and merging
the pieces: ``agl-fast curate --shard I/N`` and ``agl-fast curate merge``.

A key belongs to shard ``blake2b(key) mod N`` (the first 8 bytes of the
digest, big-endian), so every task of a Slurm array computes the same
split from the same inputs, whatever their order or the machine, and
the shards of a run are disjoint and cover it.

>>> shard_of("site0/clip00.wav", 4)
3
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._internal.safe_files import check_tree, write_atomic
from ..exceptions import ParameterError
from .batch import BASE_COLUMNS
from .inputs import Inputs
from .stages import atomic_write_parquet

__all__ = ["merge_runs", "parse_shard", "shard_inputs", "shard_of"]

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def shard_of(key: str, n: int) -> int:
    """The shard (``0 <= shard < n``) that ``key`` belongs to."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def parse_shard(text: str) -> tuple[int, int]:
    """``(index, count)`` from ``"I/N"`` with ``0 <= I < N``."""
    m = _SPEC.match(text)
    if m is None:
        raise ParameterError(f"shard must look like I/N (e.g. 0/4), got shard={text!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise ParameterError(f"shard I/N needs 0 <= I < N, got shard={text!r}")
    return i, n


def shard_inputs(inputs: Inputs, index: int, count: int) -> Inputs:
    """The inputs whose keys fall in shard ``index`` of ``count``, in
    input order, with the shard recorded in ``source``."""
    if count < 1 or not 0 <= index < count:
        raise ParameterError(f"shard needs 0 <= index < count, got {index}/{count}")
    keep = [i for i, k in enumerate(inputs.keys) if shard_of(k, count) == index]
    source = {**inputs.source, "shard": f"{index}/{count}"}
    keys = [inputs.keys[i] for i in keep]
    return Inputs(
        keys,
        [inputs.paths[i] for i in keep],
        {name: [vals[i] for i in keep] for name, vals in inputs.extra.items()},
        source=source,
        # skipped files are the whole input's: reported once, by shard 0
        skipped=inputs.skipped if index == 0 else {},
        refused={k: inputs.refused[k] for k in keys if k in inputs.refused},
    )


def merge_runs(outs: list[str | Path], dest: str | Path) -> dict[str, Any]:
    """Join the ``curated.parquet`` of finished runs (e.g. the shards of a
    Slurm array) into ``dest/curated.parquet``, rows ordered by key, and
    their feature shards into ``dest/features/``; return the summary
    (also written to ``dest/summary.json``).

    A key present in two runs is refused (:class:`ParameterError`): shards
    of one split never overlap, so it means runs were mixed up.
    """
    from .run import run_counts

    if not outs:
        raise ParameterError("merge needs at least one run directory")
    dest = Path(dest)
    tables, summaries = [], []
    for out in map(Path, outs):
        path = out / "curated.parquet"
        if not path.is_file():
            raise ParameterError(f"{out} holds no finished run (no curated.parquet)")
        tables.append(pq.read_table(path))
        s = out / "summary.json"
        summaries.append(json.loads(s.read_text()) if s.is_file() else {})
    table = pa.concat_tables(tables, promote_options="permissive")
    keys = table.column("key").to_numpy(zero_copy_only=False).astype(str)
    uniq, counts = np.unique(keys, return_counts=True)
    if (counts > 1).any():
        dups = uniq[counts > 1]
        raise ParameterError(
            f"{len(dups)} key(s) appear in more than one run, e.g. {list(dups[:3])}"
        )
    base = [n for n in BASE_COLUMNS if n in table.column_names]
    table = table.select(base + sorted(set(table.column_names) - set(base)))
    table = table.take(pa.array(np.argsort(keys, kind="stable")))
    dest.mkdir(parents=True, exist_ok=True)
    check_tree(dest)
    atomic_write_parquet(table, dest / "curated.parquet", dest)
    shards = [p for out in map(Path, outs) for p in sorted((out / "features").glob("*.parquet"))]
    if shards:
        (dest / "features").mkdir(exist_ok=True)
        for j, p in enumerate(shards):
            atomic_write_parquet(
                pq.read_table(p), dest / "features" / f"part-{j:05d}.parquet", dest
            )
    n_inputs = sum(int(s.get("counts", {}).get("inputs", 0)) for s in summaries)
    summary = {
        "merged": [str(o) for o in outs],
        "counts": run_counts(table, n_inputs or table.num_rows),
        "inputs": [s.get("input", {}) for s in summaries],
        "parameters": summaries[0].get("parameters", {}) if summaries else {},
    }
    write_atomic(dest / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary
