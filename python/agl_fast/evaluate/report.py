"""Tidy metric tables, the Markdown leaderboard and the coverage check.

Every figure carries its ``n`` (rows scored) and ``coverage`` (the share of
the scorable truth those rows are): a run that answered a fifth of the
clips is not ranked silently beside a complete one. Runs that cover
different clips are also compared on the clips all of them answered (the
``common`` subset, :func:`coverage_note`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pandas as pd

from .metrics import HEADLINE, bootstrap_ci, subset_masks, table_metrics

TIDY_COLUMNS = ("model", "mode", "subset", "metric", "value", "ci_low", "ci_high")
#: The subset of the clips every compared run answered.
COMMON = "common"


def tidy_metrics(
    model: str,
    scored: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    truth_sizes: Mapping[str, int] | None = None,
    common: Collection[str] | None = None,
) -> pd.DataFrame:
    """One row per (model, mode, subset, metric) with bootstrap 95% CIs.

    Parameters
    ----------
    model : str
        The model's name (``model`` column).
    scored : pandas.DataFrame
        From :func:`~agl_fast.evaluate.score`.
    n_boot, seed : int
        Bootstrap resamples (0: no intervals) and their seed.
    truth_sizes : mapping of str to int, optional
        Scorable truth clips of each subset (:func:`truth_subset_sizes`);
        adds the ``coverage`` metric, ``n / truth_sizes[subset]``.
    common : collection of str, optional
        Clip keys every compared run answered: adds the subset ``common``,
        this model's figures on those clips only (its coverage relative to
        ``truth_sizes["all"]``).

    Every subset carries ``n`` (rows scored) among its metrics.
    """
    mode = str(scored["mode"].iloc[0]) if len(scored) and "mode" in scored else ""
    masks = subset_masks(scored)
    if common is not None:
        masks[COMMON] = scored["question_id"].isin(set(common)).to_numpy()
    sizes = dict(truth_sizes or {})
    rows = []
    for subset, mask in masks.items():
        part = scored[mask]
        values = table_metrics(part)
        size = sizes.get("all" if subset == COMMON else subset)
        if size:
            values["coverage"] = len(part) / size
        cis = bootstrap_ci(part, n_boot=n_boot, seed=seed) if n_boot > 0 else {}
        for metric, value in values.items():
            lo, hi = cis.get(metric, (float("nan"), float("nan")))
            rows.append((model, mode, subset, metric, value, lo, hi))
    return pd.DataFrame(rows, columns=list(TIDY_COLUMNS))


def truth_subset_sizes(truth: pd.DataFrame) -> dict[str, int]:
    """Clips of the truth in each subset of :func:`subset_masks` (``all``
    only when the truth has no ``human_sounds`` column): the denominators of
    the ``coverage`` metric."""
    if "human_sounds" not in truth.columns:
        return {"all": len(truth)}
    return {k: int(m.sum()) for k, m in subset_masks(truth).items()}


def coverage_note(answered: Mapping[str, Collection[str]], n_truth: int) -> tuple[set[str], str]:
    """Compare the clip sets runs answered.

    Parameters
    ----------
    answered : mapping of str to collection of str
        Model -> the truth keys it was scored on.
    n_truth : int
        Scorable truth clips.

    Returns
    -------
    common : set of str
        Keys every run answered.
    warning : str
        ``""`` when every run covers the same clips; else one line naming
        each run's n and coverage and the size of the common subset.
    """
    sets = {m: set(k) for m, k in answered.items()}
    common = set.intersection(*sets.values()) if sets else set()
    if len({frozenset(s) for s in sets.values()}) <= 1:
        return common, ""
    each = ", ".join(
        f"{m} {len(s)} ({len(s) / n_truth:.1%})" if n_truth else f"{m} {len(s)}"
        for m, s in sets.items()
    )
    tail = (
        f"compared on the {len(common)} clips every run answered (the 'common subset' tables)"
        if common
        else "no clip was answered by every run, so there is no common-subset comparison"
    )
    return common, f"the runs cover different clips: {each} of {n_truth}; {tail}"


_LEADERBOARD = (
    ("geoscore", "GeoScore", 2),
    ("mean_distance_km", "Dist. (km)", 2),
    ("continent_acc", "Cont.", 2),
    ("country_acc", "Country", 2),
    ("city_acc", "City", 2),
    ("reject_rate", "Reject", 2),
    ("acc_1km", "<1km", 2),
    ("acc_10km", "<10km", 2),
    ("acc_500km", "<500km", 2),
    ("speech_distance_km", "Speech (km)", 2),
    ("nonspeech_distance_km", "Non-speech (km)", 2),
    ("q25_km", "q25", 2),
    ("q50_km", "q50", 2),
    ("q75_km", "q75", 2),
)


def leaderboard(tidy: pd.DataFrame, subset: str = "all") -> str:
    """Markdown table like the paper's Table 1/2, one row per model, best
    GeoScore first, each with its ``n`` and ``coverage`` (share of the truth
    answered; blank when the tidy table has none)."""
    t = tidy[tidy["subset"] == subset]
    wide = t.pivot_table(index=["model", "mode"], columns="metric", values="value", dropna=False)
    wide = wide.reindex(columns=["n", "coverage", *(k for k, _, _ in _LEADERBOARD)])
    wide = wide.sort_values("geoscore", ascending=False, na_position="last")
    head = "| model | mode | n | coverage | " + " | ".join(h for _, h, _ in _LEADERBOARD) + " |"
    sep = "|---|---|---:|---:|" + "---:|" * len(_LEADERBOARD)
    lines = [head, sep]
    for (model, mode), r in wide.iterrows():
        n = "" if pd.isna(r["n"]) else f"{int(r['n'])}"
        cov = "" if pd.isna(r["coverage"]) else f"{r['coverage']:.1%}"
        cells = [f"{r[k]:.{p}f}" for k, _, p in _LEADERBOARD]
        lines.append(f"| {model} | {mode} | {n} | {cov} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = [
    "COMMON",
    "HEADLINE",
    "REGIONAL",
    "TIDY_COLUMNS",
    "coverage_note",
    "leaderboard",
    "regional_table",
    "tidy_metrics",
    "truth_subset_sizes",
]


#: Metrics of the regional tables (per continent, per country).
REGIONAL = ("geoscore", "mean_distance_km", "continent_acc", "country_acc", "city_acc")


def regional_table(
    scored: pd.DataFrame, by: str, *, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Regional bias: one row per group of ``by`` (``true_continent`` or
    ``true_country``; missing as ``(none)``) with ``n`` and each metric of
    :data:`REGIONAL` with its percentile bootstrap 95% interval
    (``<metric>_lo``, ``<metric>_hi``; NaN when ``n_boot`` is 0), largest
    groups first."""
    rows = []
    for key, g in scored.groupby(scored[by].fillna("(none)")):
        values = table_metrics(g)
        cis = bootstrap_ci(g, n_boot=n_boot, seed=seed) if n_boot > 0 else {}
        row: dict[str, object] = {by: key, "n": len(g)}
        for m in REGIONAL:
            lo, hi = cis.get(m, (float("nan"), float("nan")))
            row.update({m: values[m], f"{m}_lo": lo, f"{m}_hi": hi})
        rows.append(row)
    cols = [by, "n", *(c for m in REGIONAL for c in (m, f"{m}_lo", f"{m}_hi"))]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["n", by], ascending=[False, True]).reset_index(drop=True)
