"""Metrics of scored rows: the columns of the paper's Tables 1, 2, 5 and 6,
with bootstrap confidence intervals and a paired bootstrap test.

A *scored frame* has one row per clip with ``distance_km`` (NaN where the
row does not count), ``refused``, ``continent_ok``/``country_ok``/``city_ok``
(1, 0 or NaN where the row is left out), ``human_sounds`` and the category
fractions of :data:`~agl_fast.evaluate.readers.CATEGORY_COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from .. import geo, manifest
from .readers import CATEGORY_COLUMNS

SPEECH_THRESHOLD = manifest.SPEECH_THRESHOLD
THRESHOLDS_KM = (1.0, 10.0, 100.0, 500.0, 1000.0)
QUANTILES = (0.25, 0.5, 0.75)
#: Metrics that are row means: (name, column, transform).
HEADLINE = (
    "geoscore",
    "mean_distance_km",
    "continent_acc",
    "country_acc",
    "city_acc",
    "reject_rate",
    *(f"acc_{int(t)}km" for t in THRESHOLDS_KM),
    "q25_km",
    "q50_km",
    "q75_km",
)


def _acc(x: pd.Series) -> float:
    v = x.to_numpy(np.float64)
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")


def subset_masks(scored: pd.DataFrame) -> dict[str, npt.NDArray[np.bool_]]:
    """Row masks of the paper's subsets: all, speech, non-speech."""
    hs = scored["human_sounds"].to_numpy(np.float64)
    return {
        "all": np.ones(len(scored), dtype=bool),
        "speech": hs >= SPEECH_THRESHOLD,
        "nonspeech": hs < SPEECH_THRESHOLD,
    }


def table_metrics(scored: pd.DataFrame) -> dict[str, float]:
    """Every Table 1/2/5/6 figure of one model on one subset of rows."""
    d = scored["distance_km"].to_numpy(np.float64)
    s = geo.summarize(d, thresholds=THRESHOLDS_KM, quantiles=QUANTILES)
    out: dict[str, float] = {
        "n": float(len(scored)),
        "n_distance": float(s.n_valid),
        "geoscore": s.geoscore,
        "mean_distance_km": s.mean_km,
        "continent_acc": _acc(scored["continent_ok"]),
        "country_acc": _acc(scored["country_ok"]),
        "city_acc": _acc(scored["city_ok"]),
        "reject_rate": float(scored["refused"].mean()) if len(scored) else float("nan"),
    }
    for t, v in s.accuracy.items():
        out[f"acc_{int(t)}km"] = v
    for q, v in s.quantiles.items():
        out[f"q{round(q * 100)}_km"] = v
    subsets = _distance_subsets(scored)
    for name in ("speech_distance_km", "nonspeech_distance_km"):
        out[name] = _nanmean(d[subsets[name]])
    for label in CATEGORY_COLUMNS:
        m = subsets.get(f"distance_{label}_km")
        out[f"distance_{label}_km"] = float("nan") if m is None else _nanmean(d[m])
    return out


def _nanmean(x: npt.NDArray[np.float64]) -> float:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else float("nan")


def _resample_chunks(
    n: int, n_boot: int, seed: int, chunk: int
) -> Iterator[npt.NDArray[np.float64]]:
    """Bootstrap weights (how often each row is drawn), ``chunk`` resamples at a time."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_boot:
        b = min(chunk, n_boot - done)
        yield rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)
        done += b


def _headline_columns(scored: pd.DataFrame) -> dict[str, tuple[npt.NDArray[np.float64], ...]]:
    """Each mean-type headline metric as (values, counts-mask)."""
    d = scored["distance_km"].to_numpy(np.float64)
    valid = ~np.isnan(d)
    d0 = np.where(valid, d, 0.0)
    cols: dict[str, tuple[npt.NDArray[np.float64], ...]] = {
        "geoscore": (np.where(valid, geo.geoscore(d0), 0.0), valid.astype(float)),
        "mean_distance_km": (d0, valid.astype(float)),
        "reject_rate": (
            scored["refused"].to_numpy(np.float64),
            np.ones(len(d)),
        ),
    }
    for lvl in ("continent", "country", "city"):
        v = scored[f"{lvl}_ok"].to_numpy(np.float64)
        cols[f"{lvl}_acc"] = (np.nan_to_num(v), (~np.isnan(v)).astype(float))
    for t in THRESHOLDS_KM:
        cols[f"acc_{int(t)}km"] = ((valid & (d0 < t)).astype(float), valid.astype(float))
    for name, m in _distance_subsets(scored).items():
        cols[name] = (np.where(m, d0, 0.0), (valid & m).astype(float))
    return cols


def _distance_subsets(scored: pd.DataFrame) -> dict[str, npt.NDArray[np.bool_]]:
    """The row masks of the subset mean distances: speech, non-speech (Tables
    5, 6) and each category of non-speech clips (Table 2)."""
    hs = scored["human_sounds"].to_numpy(np.float64)
    masks = subset_masks(scored)
    out = {f"{k}_distance_km": masks[k] for k in ("speech", "nonspeech")}
    for label, col in CATEGORY_COLUMNS.items():
        if col in scored.columns:
            cat = scored[col].to_numpy(np.float64) >= SPEECH_THRESHOLD
            out[f"distance_{label}_km"] = cat & (hs < SPEECH_THRESHOLD)
    return out


def bootstrap_ci(
    scored: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap interval of every headline metric, and of the
    speech, non-speech and category mean distances.

    Rows are resampled with replacement ``n_boot`` times with a seeded
    generator; each metric is recomputed on each resample by the same
    definition as :func:`table_metrics`.
    """
    dist = _bootstrap_draws(scored, n_boot=n_boot, seed=seed)
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    return {
        k: (float(np.nanquantile(v, lo)), float(np.nanquantile(v, hi)))
        if np.isfinite(v).any()
        else (float("nan"), float("nan"))
        for k, v in dist.items()
    }


def _bootstrap_draws(
    scored: pd.DataFrame, *, n_boot: int, seed: int
) -> dict[str, npt.NDArray[np.float64]]:
    n = len(scored)
    if n == 0:
        return {k: np.full(n_boot, np.nan) for k in HEADLINE}
    cols = _headline_columns(scored)
    d = scored["distance_km"].to_numpy(np.float64)
    out: dict[str, list[npt.NDArray[np.float64]]] = {k: [] for k in (*HEADLINE, *cols)}
    chunk = max(1, min(n_boot, int(2e7 // max(n, 1))))
    order = np.argsort(d)  # NaN last
    order = order[~np.isnan(d[order])]
    d_sorted = d[order]
    for w in _resample_chunks(n, n_boot, seed, chunk):
        for k, (x, m) in cols.items():
            with np.errstate(invalid="ignore", divide="ignore"):
                out[k].append((w @ x) / (w @ m))
        # Quantiles from the weighted sorted sample, linear interpolation.
        for q, v in zip(
            QUANTILES, _weighted_quantiles(d_sorted, w[:, order], QUANTILES), strict=True
        ):
            out[f"q{round(q * 100)}_km"].append(v)
    return {k: np.concatenate(v) for k, v in out.items()}


def _weighted_quantiles(
    x_sorted: npt.NDArray[np.float64], w: npt.NDArray[np.float64], qs: tuple[float, ...]
) -> list[npt.NDArray[np.float64]]:
    """numpy-style linear quantiles of each resample (row of counts ``w``) of ``x_sorted``."""
    b = w.shape[0]
    if x_sorted.size == 0:
        return [np.full(b, np.nan) for _ in qs]
    cw = np.cumsum(w, axis=1)
    total = cw[:, -1]
    out = []
    for q in qs:
        pos = q * (total - 1)
        lo = np.floor(pos)
        frac = pos - lo
        i_lo = np.minimum((cw <= lo[:, None]).sum(axis=1), x_sorted.size - 1)
        i_hi = np.minimum((cw <= lo[:, None] + 1).sum(axis=1), x_sorted.size - 1)
        v = x_sorted[i_lo] + frac * (x_sorted[i_hi] - x_sorted[i_lo])
        out.append(np.where(total > 0, v, np.nan))
    return out


@dataclass(frozen=True)
class PairedResult:
    """Paired bootstrap comparison of model A minus model B on common clips."""

    metric: str
    n_common: int
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    #: The metric of A and of B on the common clips (``diff`` is their difference).
    a_value: float = float("nan")
    b_value: float = float("nan")


def paired_bootstrap(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[PairedResult]:
    """Paired bootstrap test of every headline metric, A minus B.

    Both frames are restricted to their common ``question_id`` values and the
    same resampled clips are used for both models. The two-sided p-value is
    ``min(1, 2 * min(k_le + 1, k_ge + 1) / (B + 1))`` where ``k_le`` and
    ``k_ge`` count the ``B`` resampled differences ``<= 0`` and ``>= 0``, so the
    smallest reportable value is ``2 / (B + 1)``.
    """
    common = sorted(set(a["question_id"]) & set(b["question_id"]))
    aa = a.set_index("question_id").loc[common].reset_index()
    bb = b.set_index("question_id").loc[common].reset_index()
    ma, mb = table_metrics(aa), table_metrics(bb)
    da = _bootstrap_draws(aa, n_boot=n_boot, seed=seed)
    db = _bootstrap_draws(bb, n_boot=n_boot, seed=seed)
    res = []
    for k in HEADLINE:
        diff = da[k] - db[k]
        diff = diff[np.isfinite(diff)]
        if len(diff) == 0:
            res.append(PairedResult(k, len(common), np.nan, np.nan, np.nan, np.nan, ma[k], mb[k]))
            continue
        b = len(diff)
        lo_tail = (np.count_nonzero(diff <= 0) + 1) / (b + 1)
        hi_tail = (np.count_nonzero(diff >= 0) + 1) / (b + 1)
        p = min(1.0, 2 * min(lo_tail, hi_tail))
        res.append(
            PairedResult(
                metric=k,
                n_common=len(common),
                diff=ma[k] - mb[k],
                ci_low=float(np.quantile(diff, 0.025)),
                ci_high=float(np.quantile(diff, 0.975)),
                p_value=p,
                a_value=ma[k],
                b_value=mb[k],
            )
        )
    return res


def continent_confusion(scored: pd.DataFrame) -> pd.DataFrame:
    """Row-normalised confusion matrix, true continent (rows) x predicted."""
    t = scored["true_continent"].fillna("(none)")
    p = scored["pred_continent"].fillna("(none)")
    m = pd.crosstab(t, p)
    return m.div(m.sum(axis=1), axis=0)


def breakdown(scored: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per-group headline figures (``by`` = ``true_continent`` or ``true_country``)."""
    rows = []
    for key, g in scored.groupby(scored[by].fillna("(none)")):
        m = table_metrics(g)
        rows.append({by: key, **{k: m[k] for k in ("n", *HEADLINE[:6])}})
    return pd.DataFrame(rows)
