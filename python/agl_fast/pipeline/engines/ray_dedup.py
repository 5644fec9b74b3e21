"""Duplicate pairing on a Ray cluster (``agl-fast dedup --engine ray``,
``curate --engine ray --dedup``).

The fingerprints are cut into contiguous shards
(:func:`agl_fast.fingerprint.shard_bounds`) and each shard is put into the
object store once, as fingerprint bytes. Then, as Ray tasks:

1. each shard counts its hashes (:func:`agl_fast.fingerprint.hash_counts`);
   the driver sums the counts (the merge: which hashes are common in the
   whole corpus);
2. each block (:func:`agl_fast.fingerprint.blocks`) builds the index of one
   shard and probes it with the clips of that shard or of an earlier one
   (a block join), with the summed counts.

The driver merges the blocks' matches
(:func:`agl_fast.fingerprint.merge_blocks`): they are exactly those of one
index over the whole corpus. A task holds two shards, never the corpus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import fingerprint as fpm
from ...exceptions import AglError
from . import RAY_MISSING

try:
    import ray
except ImportError as exc:  # pragma: no cover - exercised without ray
    raise ImportError(RAY_MISSING) from exc

__all__ = ["default_shards", "pair_on_ray"]


def _decode(shard: Sequence[bytes]) -> list[fpm.Fingerprint]:
    return [fpm.Fingerprint.from_bytes(b) for b in shard]


def _shard_counts(shard: Sequence[bytes], n_threads: int | None) -> np.ndarray:
    return fpm.hash_counts(_decode(shard), n_threads)


def _pair_block(
    queries: Sequence[bytes],
    others: Sequence[bytes] | None,
    counts: np.ndarray,
    min_score: float | None,
    n_threads: int | None,
) -> fpm.Matches:
    return fpm.pair(
        _decode(queries),
        others=None if others is None else _decode(others),
        counts=counts,
        min_score=min_score,
        n_threads=n_threads,
    )


def default_shards(n_clips: int) -> int:
    """Shards for a cluster of ``C`` CPUs: the fewest ``k`` whose
    ``k (k + 1) / 2`` blocks keep every CPU busy, at least 2, and no more
    than there are clips."""
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    k = max(2, math.ceil((math.sqrt(8 * cpus + 1) - 1) / 2))
    return max(1, min(k, n_clips))


def pair_on_ray(
    fps: Sequence[fpm.Fingerprint],
    *,
    shards: int | None = None,
    min_score: float | None = None,
    n_threads: int | None = 1,
    address: str | None = None,
) -> fpm.Matches:
    """:func:`agl_fast.fingerprint.pair` over ``fps`` as Ray tasks, an index
    per shard (see the module notes).

    Parameters
    ----------
    fps : sequence of Fingerprint
        The corpus's fingerprints.
    shards : int or None
        Number of shards (default: :func:`default_shards`).
    min_score : float or None
        As for :func:`agl_fast.fingerprint.pair`.
    n_threads : int or None
        Native threads of each task (one CPU each by default).
    address : str or None
        The cluster to join (``"auto"``, ``"ray://host:10001"``) unless Ray
        is initialised already; with neither, a new local cluster.

    Returns
    -------
    Matches
        The same matches as one index over the whole corpus.

    Raises
    ------
    AglError
        A task failed (its error, when it is one of agl-fast's, keeps its
        type) or the cluster lost it after Ray's retries.
    """
    try:
        return _pair_on_ray(fps, shards, min_score, n_threads, address)
    except ray.exceptions.RayError as exc:
        if isinstance(exc, AglError):
            raise
        raise AglError(f"pairing on Ray failed: {exc}") from exc


def _pair_on_ray(
    fps: Sequence[fpm.Fingerprint],
    shards: int | None,
    min_score: float | None,
    n_threads: int | None,
    address: str | None,
) -> fpm.Matches:
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    k = default_shards(len(fps)) if shards is None else shards
    bounds = fpm.shard_bounds(len(fps), k)
    refs = [ray.put([f.to_bytes() for f in fps[lo:hi]]) for lo, hi in bounds]
    cpus = {"num_cpus": n_threads or 1}
    count_task: Any = ray.remote(_shard_counts).options(**cpus)
    counts = np.zeros(1 << fpm.HASH_BITS, np.uint32)
    pending = [count_task.remote(r, n_threads) for r in refs]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        counts += ray.get(done[0])
    counts_ref = ray.put(counts)
    pair_task: Any = ray.remote(_pair_block).options(**cpus)
    todo = fpm.blocks(len(refs))
    futures = [
        pair_task.remote(refs[i], None if i == j else refs[j], counts_ref, min_score, n_threads)
        for i, j in todo
    ]
    parts = [(i, j, m) for (i, j), m in zip(todo, ray.get(futures), strict=True)]
    return fpm.merge_blocks(parts, bounds)
