"""Duplicate recordings in a curated table: groups of clips that share audio.

:func:`find_duplicates` reads the ``fingerprint`` column that
``curate --stage fingerprint`` writes, pairs every clip with every other
through the fingerprint's inverted index (:func:`agl_fast.fingerprint.pair`),
and joins matched clips into groups (union-find over the matches: a clip
that matches two others joins their groups). Each group has one
*representative*, chosen by :data:`REPRESENTATIVE_RULE` (the one place that
rule lives; :func:`representative_order` applies it, for the groups here
and for every selection that keeps one clip per group).

Per row it writes :data:`DEDUP_COLUMNS`:

* ``duplicate_group``: the group's number (0, 1, ... in the order of their
  representatives in the table), null for a clip that matched nothing;
* ``duplicate_of``: the representative's key, for the other members;
* ``duplicate_status``: one of :data:`STATUSES` (``unique``,
  ``representative``, ``duplicate``; ``unfingerprintable`` for a clip whose
  fingerprint holds too few distinct hashes to be paired (silence, a
  steady tone: :attr:`agl_fast.fingerprint.Fingerprint.fingerprintable`),
  which is never grouped;
  ``no_fingerprint`` for a row without one, e.g. a file that failed to
  decode; ``failed`` for fingerprint bytes that cannot be read, with the
  reason in ``dedup_error``);
* ``duplicate_match``, ``overlap_start_s``, ``overlap_match_start_s``,
  ``overlap_s``, ``match_score``: the match behind the row's membership
  (with its representative where the two matched, else its best-scoring
  match): the other clip's key, where the shared audio starts in this clip
  and in that one, how long it lasts (seconds) and the pairing's score.

:func:`dedup_output` does this for a curate output folder: the columns go
into ``curated.parquet``, the matched pairs into ``duplicate_pairs.parquet``
and the counts into ``summary.json`` under ``dedup`` (the report's section).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._internal.safe_files import check_tree, write_atomic
from ..exceptions import AglIOError, FingerprintFormatError, ParameterError
from .stages import FINGERPRINT_COLUMN, atomic_write_parquet

__all__ = [
    "DEDUP_COLUMNS",
    "ENGINES",
    "PAIRS_FILE",
    "REPRESENTATIVE_RULE",
    "STATUSES",
    "dedup_output",
    "find_duplicates",
    "has_groups",
    "one_per_group",
    "representative_order",
    "require_groups",
]

_log = logging.getLogger("agl_fast.pipeline")

#: The representative of a duplicate group, criteria in order: the longest
#: clip (``duration``), then the better quality (``passed``, the run's
#: quality filters and rules, true first; then the smaller
#: ``clipped_fraction``), then the smaller ``key``. A missing value ranks
#: last on its criterion.
REPRESENTATIVE_RULE = (
    "longest duration",
    "passed (quality filters and rules) before not passed",
    "smaller clipped_fraction",
    "smaller key",
)

#: ``duplicate_status`` values.
UNIQUE, REPRESENTATIVE, DUPLICATE = "unique", "representative", "duplicate"
UNFINGERPRINTABLE, NO_FINGERPRINT, FAILED = "unfingerprintable", "no_fingerprint", "failed"
STATUSES = (UNIQUE, REPRESENTATIVE, DUPLICATE, UNFINGERPRINTABLE, NO_FINGERPRINT, FAILED)

#: The columns :func:`find_duplicates` writes, with their types.
DEDUP_COLUMNS: dict[str, pa.DataType] = {
    "duplicate_group": pa.int64(),
    "duplicate_of": pa.string(),
    "duplicate_status": pa.string(),
    "duplicate_match": pa.string(),
    "overlap_start_s": pa.float64(),
    "overlap_match_start_s": pa.float64(),
    "overlap_s": pa.float64(),
    "match_score": pa.float64(),
    "dedup_error": pa.string(),
}

#: File of a curate output folder with every matched pair.
PAIRS_FILE = "duplicate_pairs.parquet"


def _floats(table: pa.Table, name: str) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, np.nan)
    vals = table.column(name).to_pylist()
    return np.array([np.nan if v is None else float(v) for v in vals], np.float64)


def representative_order(table: pa.Table) -> np.ndarray:
    """Rank of each row under :data:`REPRESENTATIVE_RULE` (0: the best).

    Parameters
    ----------
    table : pa.Table
        Rows with ``key`` and, where present, ``duration``, ``passed`` and
        ``clipped_fraction``.

    Returns
    -------
    np.ndarray [shape=(n,), dtype=int64]
        A permutation of ``0 .. n-1``; within any set of rows, the smallest
        rank is that set's representative.
    """
    n = table.num_rows
    duration = _floats(table, "duration")
    longest = np.where(np.isfinite(duration), -duration, np.inf)
    passed = table.column("passed").to_pylist() if "passed" in table.column_names else [None] * n
    not_passed = np.array([0 if v is True else 1 for v in passed], np.int64)
    clipped = _floats(table, "clipped_fraction")
    clipped = np.where(np.isfinite(clipped), clipped, np.inf)
    keys = np.array([str(k) for k in table.column("key").to_pylist()], dtype=object)
    key_rank = np.empty(n, np.int64)
    key_rank[np.argsort(keys, kind="stable")] = np.arange(n)
    order = np.lexsort((key_rank, clipped, not_passed, longest))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    return rank


class _UnionFind:
    """Disjoint sets over ``0 .. n-1`` (path halving, union by size)."""

    def __init__(self, n: int) -> None:
        self.parent = np.arange(n)
        self.size = np.ones(n, np.int64)

    def find(self, i: int) -> int:
        p = self.parent
        while p[i] != i:
            p[i] = p[p[i]]
            i = int(p[i])
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a == b:
            return
        if self.size[a] < self.size[b]:
            a, b = b, a
        self.parent[b] = a
        self.size[a] += self.size[b]


def _read_fingerprints(table: pa.Table) -> tuple[list[Any], list[int], list[str], list[str | None]]:
    """The fingerprints that can be paired, their rows, and each row's
    status and error (:data:`STATUSES`)."""
    from ..fingerprint import Fingerprint

    if FINGERPRINT_COLUMN not in table.column_names:
        raise ParameterError(
            f"the table has no {FINGERPRINT_COLUMN!r} column: curate with --stage fingerprint "
            "(or --dedup)"
        )
    col = table.column(FINGERPRINT_COLUMN)
    if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
        raise ParameterError(f"column {FINGERPRINT_COLUMN!r} must be binary, got {col.type}")
    fps: list[Any] = []
    rows: list[int] = []
    status: list[str] = []
    errors: list[str | None] = []
    for i, cell in enumerate(col.to_pylist()):
        err: str | None = None
        if cell is None:
            st = NO_FINGERPRINT
        else:
            try:
                fp = Fingerprint.from_bytes(bytes(cell))
            except FingerprintFormatError as exc:
                st, err = FAILED, f"unreadable fingerprint: {type(exc).__name__}: {exc}"
            else:
                if not fp.fingerprintable:
                    st = UNFINGERPRINTABLE
                else:
                    st = UNIQUE
                    fps.append(fp)
                    rows.append(i)
        status.append(st)
        errors.append(err)
    return fps, rows, status, errors


#: Where the pairing runs: one process, or Ray tasks (an index per shard).
ENGINES = ("local", "ray")


def find_duplicates(
    table: pa.Table,
    *,
    min_score: float | None = None,
    n_threads: int | None = None,
    engine: str = "local",
    shards: int | None = None,
    address: str | None = None,
) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
    """Group the clips of a curated table that share audio.

    Parameters
    ----------
    table : pa.Table
        A curated table with ``key`` and the ``fingerprint`` column
        (``curate --stage fingerprint``); ``duration``, ``passed`` and
        ``clipped_fraction`` choose the representatives.
    min_score : float or None
        The pairing's acceptance score (default: the pairing's own,
        :func:`agl_fast.fingerprint.pair`).
    n_threads : int or None
        Native threads of the pairing (of each task on Ray).
    engine : {"local", "ray"}
        In this process, or as Ray tasks block by block
        (:mod:`agl_fast.pipeline.engines.ray_dedup`); the same matches.
    shards : int or None
        Shards, an index each (default: one index locally; on Ray, enough
        blocks for the cluster's CPUs); memory is two shards' indexes.
    address : str or None
        With ``engine="ray"``: the cluster to join (default: Ray's own,
        ``RAY_ADDRESS``, or a new local cluster).

    Returns
    -------
    columns : pa.Table
        :data:`DEDUP_COLUMNS`, one row per row of ``table``.
    pairs : pa.Table
        Every match: ``key_a``, ``key_b``, ``start_a_s``, ``start_b_s``,
        ``overlap_s`` (seconds) and ``score``.
    counts : dict
        ``clips``, ``fingerprinted``, one count per status, ``pairs``,
        ``groups``, ``grouped`` (clips in a group), ``duplicates`` (members
        that are not their group's representative), ``representative_rule``.

    Raises
    ------
    ParameterError
        The table has no ``key`` or no binary ``fingerprint`` column, or
        ``engine`` is not one of :data:`ENGINES`.
    """
    if engine not in ENGINES:
        raise ParameterError(f"engine must be one of {ENGINES}, got {engine!r}")
    if address is not None and engine != "ray":
        raise ParameterError("address applies to engine='ray'")
    if "key" not in table.column_names:
        raise ParameterError(f"the table has no 'key' column; got {table.column_names}")
    n = table.num_rows
    keys = [str(k) for k in table.column("key").to_pylist()]
    fps, rows, status, errors = _read_fingerprints(table)
    how = {"engine": engine, "shards": shards, "address": address}
    m = _pair(fps, np.asarray(rows, np.int64), min_score, n_threads, how)
    a, b = m["a"], m["b"]
    rep = _groups(n, a, b, representative_order(table))
    columns = _columns(keys, m, rep, status, errors)
    pairs = pa.table(
        {
            "key_a": pa.array([keys[i] for i in a.tolist()], pa.string()),
            "key_b": pa.array([keys[j] for j in b.tolist()], pa.string()),
            **{c: pa.array(m[c], pa.float64()) for c in _MATCH_VALUES},
        }
    )
    counts: dict[str, Any] = {"clips": n, "fingerprinted": len(fps)}
    counts |= {s: status.count(s) for s in STATUSES}
    counts |= {"pairs": len(a), "groups": len(set(rep.values())), "grouped": len(rep)}
    counts |= {"duplicates": status.count(DUPLICATE), "min_score": min_score}
    counts |= {"engine": engine, "shards": shards, "representative_rule": list(REPRESENTATIVE_RULE)}
    return columns, pairs, counts


def _columns(
    keys: list[str],
    m: dict[str, np.ndarray],
    rep: dict[int, int],
    status: list[str],
    errors: list[str | None],
) -> pa.Table:
    """:data:`DEDUP_COLUMNS` of every row: its group (numbered in the
    representatives' table order), representative, status (``status`` is
    updated for the grouped rows), match and error."""
    n = len(keys)
    gid = {r: g for g, r in enumerate(sorted(set(rep.values())))}
    group: list[int | None] = [None] * n
    of: list[str | None] = [None] * n
    for i, r in rep.items():
        group[i] = gid[r]
        status[i] = REPRESENTATIVE if i == r else DUPLICATE
        of[i] = None if i == r else keys[r]
    values: dict[str, Any] = {
        "duplicate_group": group,
        "duplicate_of": of,
        "duplicate_status": status,
        **_row_matches(n, keys, m, rep),
        "dedup_error": errors,
    }
    return pa.table({c: pa.array(values[c], t) for c, t in DEDUP_COLUMNS.items()})


#: What a match says besides its two clips (seconds, and the score).
_MATCH_VALUES = ("start_a_s", "start_b_s", "overlap_s", "score")


def _pair(
    fps: list[Any],
    at: np.ndarray,
    min_score: float | None,
    n_threads: int | None,
    how: dict[str, Any],
) -> dict[str, np.ndarray]:
    """The matches of :func:`agl_fast.fingerprint.pair` over ``fps`` (run as
    ``how`` says: engine, shards, address), their clips as rows of the
    table (``at[i]`` is the row of ``fps[i]``)."""
    from ..fingerprint import pair, pair_sharded

    if len(fps) < 2:  # nothing to pair
        out = {"a": np.zeros(0, np.int64), "b": np.zeros(0, np.int64)}
        return out | {c: np.zeros(0, np.float64) for c in _MATCH_VALUES}
    shards = how["shards"]
    if how["engine"] == "ray":
        from .engines.ray_dedup import pair_on_ray

        threads = 1 if n_threads is None else n_threads
        m = pair_on_ray(
            fps, shards=shards, min_score=min_score, n_threads=threads, address=how["address"]
        )
    elif shards is not None:
        m = pair_sharded(fps, shards, min_score=min_score, n_threads=n_threads)
    else:
        m = pair(fps, min_score=min_score, n_threads=n_threads)
    out = {"a": at[np.asarray(m.a, np.int64)], "b": at[np.asarray(m.b, np.int64)]}
    return out | {c: np.asarray(getattr(m, c), np.float64) for c in _MATCH_VALUES}


def _groups(n: int, a: np.ndarray, b: np.ndarray, rank: np.ndarray) -> dict[int, int]:
    """The representative of every matched row (union-find over the
    matches ``a[k] - b[k]``; the smallest ``rank`` of each group)."""
    uf = _UnionFind(n)
    for i, j in zip(a.tolist(), b.tolist(), strict=True):
        uf.union(i, j)
    members: dict[int, list[int]] = {}
    for i in sorted(set(a.tolist()) | set(b.tolist())):
        members.setdefault(uf.find(i), []).append(i)
    rep: dict[int, int] = {}
    for rows in members.values():
        r = min(rows, key=lambda i: int(rank[i]))
        rep |= dict.fromkeys(rows, r)
    return rep


def _row_matches(
    n: int, keys: list[str], m: dict[str, np.ndarray], rep: dict[int, int]
) -> dict[str, list[Any]]:
    """Per row, the match behind its membership: with its representative
    when the two matched, else its best-scoring one (the other clip's key,
    the overlap's start in each clip, its length and the score)."""
    a, b, score = m["a"].tolist(), m["b"].tolist(), m["score"]
    best: dict[int, tuple[tuple[int, float], int]] = {}
    for k, (i, j) in enumerate(zip(a, b, strict=True)):
        for me, other in ((i, j), (j, i)):
            pref = (int(other == rep[me]), float(score[k]))
            if me not in best or pref > best[me][0]:
                best[me] = (pref, k)
    out: dict[str, list[Any]] = {
        c: [None] * n
        for c in ("duplicate_match", "overlap_start_s", "overlap_match_start_s", "overlap_s")
    }
    out["match_score"] = [None] * n
    for me, (_, k) in best.items():
        first = a[k] == me
        out["duplicate_match"][me] = keys[b[k] if first else a[k]]
        out["overlap_start_s"][me] = float(m["start_a_s" if first else "start_b_s"][k])
        out["overlap_match_start_s"][me] = float(m["start_b_s" if first else "start_a_s"][k])
        out["overlap_s"][me] = float(m["overlap_s"][k])
        out["match_score"][me] = float(score[k])
    return out


def dedup_output(
    out: str | Path,
    *,
    min_score: float | None = None,
    n_threads: int | None = None,
    engine: str = "local",
    shards: int | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    """Find the duplicates of a curate output folder (:func:`find_duplicates`)
    and write them: the columns into ``curated.parquet`` (replacing those of
    an earlier pass), the pairs into :data:`PAIRS_FILE` and the counts into
    ``summary.json`` under ``dedup``; return the counts. ``engine``,
    ``shards`` and ``address`` say where the pairing runs (as for
    :func:`find_duplicates`).

    Raises
    ------
    AglIOError
        ``out`` has no ``curated.parquet``.
    ParameterError
        The table has no fingerprint column.
    UnsafePathError
        ``out`` holds a symlink pointing outside it; nothing is written.
    """
    out = Path(out)
    path = out / "curated.parquet"
    if not path.is_file():
        raise AglIOError(f"{out}: no curated.parquet (is it a curate output directory?)")
    check_tree(out)
    table = pq.read_table(path)
    table = table.drop_columns([c for c in DEDUP_COLUMNS if c in table.column_names])
    columns, pairs, counts = find_duplicates(
        table,
        min_score=min_score,
        n_threads=n_threads,
        engine=engine,
        shards=shards,
        address=address,
    )
    for name in columns.column_names:
        table = table.append_column(name, columns.column(name))
    atomic_write_parquet(pairs, out / PAIRS_FILE, out)
    atomic_write_parquet(table, path, out)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    summary["dedup"] = counts
    write_atomic(summary_path, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    _log.info(
        "%s: %d duplicate groups, %d duplicates of %d clips (%d unfingerprintable, %d without "
        "a fingerprint, %d failed)",
        out,
        counts["groups"],
        counts["duplicates"],
        counts["clips"],
        counts[UNFINGERPRINTABLE],
        counts[NO_FINGERPRINT],
        counts[FAILED],
    )
    return counts


def has_groups(table: pa.Table) -> bool:
    """Whether ``table`` carries the groups of :func:`find_duplicates`."""
    return "duplicate_group" in table.column_names


def require_groups(table: pa.Table, why: str = "") -> None:
    """Refuse a table without the groups of :func:`find_duplicates`.

    Parameters
    ----------
    table : pa.Table
        The table to check.
    why : str
        What the groups are needed for, appended to the message.

    Raises
    ------
    ParameterError
        The table has no ``duplicate_group`` column (run ``agl-fast dedup``).
    """
    if not has_groups(table):
        raise ParameterError(
            "the table has no duplicate_group column: run 'agl-fast dedup' on its curate "
            "output (or curate with --dedup)" + (f" {why}" if why else "")
        )


def one_per_group(table: pa.Table, mask: Sequence[bool] | np.ndarray | None = None) -> np.ndarray:
    """Rows to keep so that no duplicate group has two: every row of
    ``mask`` outside a group, and per group the row of ``mask`` that
    :data:`REPRESENTATIVE_RULE` ranks first.

    Parameters
    ----------
    table : pa.Table
        Rows with ``duplicate_group`` (:func:`find_duplicates`).
    mask : sequence of bool or None
        The rows that may be kept (default: all).

    Returns
    -------
    np.ndarray [shape=(n,), dtype=bool]

    Raises
    ------
    ParameterError
        The table has no ``duplicate_group`` column (run ``agl-fast dedup``).
    """
    require_groups(table)
    n = table.num_rows
    keep = np.ones(n, bool) if mask is None else np.array(mask, bool)
    if keep.shape != (n,):
        raise ParameterError(f"mask must have {n} entries, got shape {keep.shape}")
    groups = table.column("duplicate_group").to_pylist()
    rank = representative_order(table)
    best: dict[int, int] = {}
    for i in np.flatnonzero(keep).tolist():
        g = groups[i]
        if g is not None and (g not in best or rank[i] < rank[best[g]]):
            best[g] = i
    chosen = set(best.values())
    for i in np.flatnonzero(keep).tolist():
        if groups[i] is not None and i not in chosen:
            keep[i] = False
    return keep
