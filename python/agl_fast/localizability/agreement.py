"""Agreement between contribution judges (AGL1K appendix B.2).

Each judge gives a matrix ``c_j[k, i]`` (clip ``k``, category ``i``; NaN or 0
where the category was not named). For every pair of judges:

* ``cosine`` — mean over the clips both judged (a finite value somewhere in
  the row, and a non-zero vector on both sides) of the cosine similarity of
  the two per-clip contribution vectors (missing entries count as 0);
* ``pearson`` — Pearson correlation of the per-category aggregates (the mean
  contribution of category ``i`` over the clips, missing as 0);
* ``top_overlap`` — size of the intersection of the two judges' top-``top``
  categories by aggregate, divided by ``top``.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np
import pyarrow as pa

from ..exceptions import ParameterError, ShapeError

__all__ = ["judge_agreement"]


def _cosine_mean(x: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    judged = np.isfinite(x).any(axis=1) & np.isfinite(y).any(axis=1)
    a = np.nan_to_num(x[judged])
    b = np.nan_to_num(y[judged])
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    ok = (na > 0) & (nb > 0)
    if not ok.any():
        return float("nan"), 0
    cos = (a[ok] * b[ok]).sum(axis=1) / (na[ok] * nb[ok])
    return float(cos.mean()), int(ok.sum())


def _aggregate(x: np.ndarray) -> np.ndarray:
    return np.nan_to_num(x).mean(axis=0)


def judge_agreement(judges: Mapping[str, np.ndarray], *, top: int = 10) -> pa.Table:
    """Pairwise agreement of judges.

    Parameters
    ----------
    judges : mapping judge name -> np.ndarray [shape=(n_clips, n_categories)]
        Aligned contribution matrices (same clips, same categories).
    top : int
        Length of the top-category lists compared.

    Returns
    -------
    pa.Table
        ``judge_a, judge_b, n_clips, cosine, pearson, top_overlap``.
    """
    if len(judges) < 2:
        raise ParameterError(f"need at least two judges, got {len(judges)}")
    if top < 1:
        raise ParameterError(f"top must be >= 1, got top={top}")
    mats = {str(k): np.asarray(v, dtype=np.float64) for k, v in judges.items()}
    shapes = {m.shape for m in mats.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ShapeError(f"judge matrices must share one 2-D shape, got {sorted(shapes)}")
    rows = []
    for ja, jb in combinations(sorted(mats), 2):
        x, y = mats[ja], mats[jb]
        cos, n = _cosine_mean(x, y)
        ga, gb = _aggregate(x), _aggregate(y)
        if np.std(ga) > 0 and np.std(gb) > 0:
            pearson = float(np.corrcoef(ga, gb)[0, 1])
        else:
            pearson = float("nan")
        k = min(top, ga.shape[0])
        ta = set(np.argsort(-ga, kind="stable")[:k].tolist())
        tb = set(np.argsort(-gb, kind="stable")[:k].tolist())
        rows.append(
            {
                "judge_a": ja,
                "judge_b": jb,
                "n_clips": n,
                "cosine": cos,
                "pearson": pearson,
                "top_overlap": len(ta & tb) / k,
            }
        )
    schema = pa.schema(
        [
            ("judge_a", pa.string()),
            ("judge_b", pa.string()),
            ("n_clips", pa.int64()),
            ("cosine", pa.float64()),
            ("pearson", pa.float64()),
            ("top_overlap", pa.float64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)
