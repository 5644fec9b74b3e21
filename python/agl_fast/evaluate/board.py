"""The citable parts of ``leaderboard.md``: the 95% intervals of Table 1's
columns, the paper's Table 2 (quantiles and sound categories), Table 5
(speech clips) and Table 6 (non-speech clips), the paired comparison of two
models, and the provenance block.

Every cell with an interval reads ``value [low, high]``: the value on the
rows scored, then the percentile bootstrap 95% interval (blank brackets
when ``--n-boot 0``). Figures are rounded to 2 decimals as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .metrics import PairedResult
from .readers import CATEGORY_COLUMNS

__all__ = [
    "PAIRED_COLUMNS",
    "TABLE1_CI",
    "TABLE2",
    "TABLE56",
    "interval_tables",
    "paired_frame",
    "paired_markdown",
    "provenance_markdown",
]

#: Table 1's columns with intervals: (metric, header).
TABLE1_CI = (
    ("geoscore", "GeoScore"),
    ("mean_distance_km", "Dist. (km)"),
    ("continent_acc", "Cont."),
    ("country_acc", "Country"),
    ("city_acc", "City"),
    ("reject_rate", "Reject"),
    ("acc_1km", "<1km"),
    ("acc_10km", "<10km"),
    ("acc_100km", "<100km"),
    ("acc_500km", "<500km"),
    ("acc_1000km", "<1000km"),
)
#: Table 2: error quantiles, then the mean distance on non-speech clips of
#: each sound category (the paper prints Animal, Music, Nature, Things).
TABLE2 = (
    ("q25_km", "q25"),
    ("q50_km", "q50"),
    ("q75_km", "q75"),
    *((f"distance_{label}_km", label) for label in CATEGORY_COLUMNS),
)
#: Tables 5 and 6: Table 1's columns on the speech and the non-speech clips.
TABLE56 = (
    ("geoscore", "GeoScore"),
    ("mean_distance_km", "Dist. (km)"),
    ("continent_acc", "Cont."),
    ("country_acc", "Country"),
    ("city_acc", "City"),
    ("reject_rate", "Reject"),
    ("acc_1km", "<1"),
    ("acc_10km", "<10"),
    ("acc_100km", "<100"),
    ("acc_500km", "<500"),
)
PAIRED_COLUMNS = (
    "mode", "model_a", "model_b", "metric", "n_common",
    "a", "b", "diff", "ci_low", "ci_high", "p_value",
)  # fmt: skip


def _num(v: float) -> str:
    return "nan" if pd.isna(v) else f"{v:.2f}"


def _cell(v: float, lo: float, hi: float) -> str:
    if pd.isna(lo) or pd.isna(hi):
        return _num(v)
    return f"{_num(v)} [{_num(lo)}, {_num(hi)}]"


def _table(tidy: pd.DataFrame, subset: str, columns: Sequence[tuple[str, str]],
           order: Sequence[Any]) -> str:  # fmt: skip
    """One Markdown table of ``subset``: model, n, coverage, then ``columns``."""
    t = tidy[tidy["subset"] == subset].set_index(["model", "metric"])
    head = "| model | n | coverage | " + " | ".join(h for _, h in columns) + " |"
    lines = [head, "|---|---:|---:|" + "---:|" * len(columns)]
    for model in order:
        if (model, "n") not in t.index:
            continue
        n = int(t.loc[(model, "n"), "value"])
        cov = t.loc[(model, "coverage"), "value"] if (model, "coverage") in t.index else None
        cells = []
        for metric, _ in columns:
            if (model, metric) not in t.index:
                cells.append("")
                continue
            r = t.loc[(model, metric)]
            cells.append(_cell(r["value"], r["ci_low"], r["ci_high"]))
        cov_s = "" if cov is None or pd.isna(cov) else f"{cov:.1%}"
        lines.append(f"| {model} | {n} | {cov_s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def interval_tables(tidy: pd.DataFrame, mode: str) -> str:
    """The interval, Table 2, Table 5 and Table 6 sections of one mode."""
    part = tidy[tidy["mode"] == mode]
    g = part[(part["subset"] == "all") & (part["metric"] == "geoscore")]
    order = list(g.sort_values("value", ascending=False, na_position="last")["model"])
    return (
        f"### 95% bootstrap intervals ({mode}, all clips)\n\n"
        + _table(part, "all", TABLE1_CI, order)
        + f"\n### Table 2 ({mode}): error quantiles (km) and mean distance (km) on "
        "non-speech clips of each sound category (fraction >= 0.1)\n\n"
        + _table(part, "all", TABLE2, order)
        + f"\n### Table 5 ({mode}): speech clips (human_sounds >= 0.1)\n\n"
        + _table(part, "speech", TABLE56, order)
        + f"\n### Table 6 ({mode}): non-speech clips (human_sounds < 0.1)\n\n"
        + _table(part, "nonspeech", TABLE56, order)
    )


def paired_frame(mode: str, a: str, b: str, results: Sequence[PairedResult]) -> pd.DataFrame:
    """The paired comparison as a tidy table (:data:`PAIRED_COLUMNS`)."""
    rows = [
        (mode, a, b, r.metric, r.n_common, r.a_value, r.b_value, r.diff, r.ci_low, r.ci_high,
         r.p_value)
        for r in results
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def paired_markdown(frame: pd.DataFrame) -> str:
    """One section per (mode, pair) of :func:`paired_frame` rows."""
    out = []
    for (mode, a, b), g in frame.groupby(["mode", "model_a", "model_b"], sort=False):
        n = int(g["n_common"].iloc[0])
        out.append(
            f"### {a} minus {b} ({mode}): paired bootstrap on the {n} clips both answered\n\n"
            f"| metric | {a} | {b} | difference | 95% CI | p |\n|---|---:|---:|---:|---:|---:|"
        )
        for _, r in g.iterrows():
            ci = "" if pd.isna(r["ci_low"]) else f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]"
            p = "" if pd.isna(r["p_value"]) else f"{r['p_value']:.3f}"
            out.append(
                f"| {r['metric']} | {_num(r['a'])} | {_num(r['b'])} | {_num(r['diff'])} "
                f"| {ci} | {p} |"
            )
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def provenance_markdown(record: dict[str, Any]) -> str:
    """The provenance block: version, settings, each input's SHA-256 and the prompts."""
    s = record["settings"]
    lines = [
        "## Provenance\n",
        f"- agl-fast {record['agl_fast_version']}",
        "- settings: " + ", ".join(f"{k} {v}" for k, v in s.items()),
        f"- truth: {record['truth']['name']} (sha256 `{record['truth']['sha256']}`)",
    ]
    if record.get("aliases"):
        al = record["aliases"]
        found = f"sha256 `{al['sha256']}`" if al["sha256"] else "not found: no aliases applied"
        lines.append(f"- country aliases: {al['name']} ({found})")
    lines += ["", "| model | file | sha256 | prompt sha256 (rows) |", "|---|---|---|---|"]
    for model, p in record["predictions"].items():
        prompts = "; ".join(
            f"`{x['sha256']}` ({x['n_rows']}{', ' + x['template'] if x['template'] else ''})"
            for x in p["prompts"]
        )
        lines.append(f"| {model} | {p['name']} | `{p['sha256']}` | {prompts or 'not recorded'} |")
    return "\n".join(lines) + "\n"
