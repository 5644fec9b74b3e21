"""The report's matplotlib figures: distributions by outcome with the
run's thresholds, and the failure reasons. Each function takes a table and
an optional ``ax``; none selects a matplotlib backend."""

from __future__ import annotations

import base64
import io
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from ..quality_filters import filters

#: Columns drawn as distributions when the table has them (plus every
#: ``group_*`` tag fraction), with their axis labels.
DISTRIBUTIONS: dict[str, str] = {
    "duration": "duration (s)",
    "rms_dbfs": "RMS level, all channels (dBFS)",
    "peak_dbfs": "peak level (dBFS)",
    "rms": "RMS of the channel mean, as the quality filter sees it (dBFS)",
    "flatness": "spectral flatness",
    "complexity": "acoustic complexity",
    "aci": "acoustic complexity index",
    "clipping_ratio": "share of samples at the peak",
    "full_scale_ratio": "share of samples at full scale",
    "speech_fraction": "speech fraction",
}


#: Columns stored as linear amplitudes and drawn in dB (``20 log10``).
_DB_COLUMNS = frozenset({"rms"})


class _ThresholdColumns(Mapping[str, str]):
    """Run parameter -> the column it limits: each registered quality
    filter's threshold and metric (plugins included), and the duration
    rules."""

    def _table(self) -> dict[str, str]:
        rules = {"min_duration": "duration", "max_duration": "duration"}
        return {**{f.name: f.metric for f in filters()}, **rules}

    def __getitem__(self, name: str) -> str:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


#: Run parameter (``summary.json``: ``parameters`` or
#: ``parameters.quality_thresholds``) -> the column it is a limit on.
THRESHOLD_COLUMNS: Mapping[str, str] = _ThresholdColumns()


#: A threshold further from the data than this many times the data's scale
#: (its span or its largest magnitude, whichever is larger) is named in the
#: legend instead of stretching the axis.
_OFF_SCALE = 4.0


#: Outcomes of a clip, in drawing order (the last is drawn on top), with colours.
OUTCOMES: dict[str, str] = {"failed": "#d1495b", "rejected": "#e89b2c", "passed": "#2a9d55"}


_THRESHOLD_COLOR = "#333333"


def axes_or_new(ax: Any) -> Any:
    """``ax``, or a new figure's axes when it is None."""
    if ax is not None:
        return ax
    from matplotlib.figure import Figure

    return Figure(figsize=(5.0, 3.2)).add_subplot()


def _floats(table: pa.Table, column: str) -> np.ndarray:
    col = table.column(column)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        vals = [_float_or_nan(v) for v in col.to_pylist()]
        x = np.asarray(vals, dtype=np.float64)
    else:
        x = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
    if column in _DB_COLUMNS:
        with np.errstate(divide="ignore", invalid="ignore"):
            x = 20.0 * np.log10(x)
    return x


def _float_or_nan(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def outcomes(table: pa.Table) -> np.ndarray:
    """The outcome of every row: ``"failed"`` (``error_type`` set),
    ``"passed"`` or ``"rejected"``, as ``summary.json`` counts them.

    Returns
    -------
    np.ndarray [shape=(rows,), dtype=object]
    """
    errors = table.column("error_type").to_pylist()
    passed = table.column("passed").to_pylist()
    out = [
        "failed" if e is not None else "passed" if p else "rejected"
        for e, p in zip(errors, passed, strict=True)
    ]
    return np.asarray(out, dtype=object)


def threshold_lines(summary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The limits a run applied, by the column they are drawn on.

    Parameters
    ----------
    summary : mapping
        A run's ``summary.json``; its ``parameters`` and
        ``parameters.quality_thresholds`` are searched for the names of
        :data:`THRESHOLD_COLUMNS` (None values, i.e. rules turned off, are
        left out).

    Returns
    -------
    dict of str to dict of str to float
        ``{column: {parameter: value in the column's drawn unit}}``; the
        RMS floor is converted to dBFS like its column.
    """
    params = summary.get("parameters", {}) or {}
    found = {**params, **(params.get("quality_thresholds") or {})}
    out: dict[str, dict[str, float]] = {}
    for name, column in THRESHOLD_COLUMNS.items():
        value = _float_or_nan(found.get(name))
        if not math.isfinite(value):
            continue
        if column in _DB_COLUMNS:
            value = 20.0 * math.log10(value) if value > 0 else -math.inf
        out.setdefault(column, {})[name] = value
    return out


def plot_distribution(
    table: pa.Table,
    column: str,
    *,
    thresholds: Mapping[str, float] | None = None,
    ax: Any = None,
) -> Any:
    """Histogram of ``column``, stacked by outcome, with the run's limits.

    Parameters
    ----------
    table : pyarrow.Table
        A curated table (``passed``, ``error_type`` and ``column`` columns).
    column : str
        A numeric column; nulls and NaN are left out, and so are infinite
        values (counted in the title). Columns of linear amplitude (``rms``)
        are drawn in dBFS.
    thresholds : mapping of str to float, optional
        ``{name: value}`` in the drawn unit (see :func:`threshold_lines`),
        each drawn as a dashed vertical line labelled ``name = value``. A
        value far outside the data (more than four times the data's scale
        away: its span, or its largest magnitude if larger) is named in the
        legend with "off scale" instead.
    ax : matplotlib.axes.Axes or None
        Where to draw (a new figure's axes when None).

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes_or_new(ax)
    x, kind = _floats(table, column), outcomes(table)
    finite = np.isfinite(x)
    lo, hi = (float(x[finite].min()), float(x[finite].max())) if finite.any() else (0.0, 1.0)
    # the scale of the data: its span, or its magnitude when that is larger
    # (levels in dBFS sit far from 0 with a small spread)
    span = max(hi - lo, abs(lo), abs(hi))
    shown: dict[str, float] = {}
    off: dict[str, float] = {}
    for name, value in (thresholds or {}).items():
        inside = math.isfinite(value) and (
            span == 0 or lo - _OFF_SCALE * span <= value <= hi + _OFF_SCALE * span
        )
        (shown if inside else off)[name] = value
    edges_lo, edges_hi = min([lo, *shown.values()]), max([hi, *shown.values()])
    if edges_hi == edges_lo:
        edges_lo, edges_hi = edges_lo - 0.5, edges_hi + 0.5
    bins = np.linspace(edges_lo, edges_hi, 21)
    parts = [(x[finite & (kind == k)], k, c) for k, c in OUTCOMES.items()]
    ax.hist([p[0] for p in parts], bins=bins, stacked=True, color=[p[2] for p in parts],
            label=[f"{p[1]} ({len(p[0])})" for p in parts])  # fmt: skip
    for name, value in shown.items():
        ax.axvline(value, color=_THRESHOLD_COLOR, linestyle="--", linewidth=1.2,
                   label=f"{name} = {value:.4g}", gid=f"threshold-{name}")  # fmt: skip
    for name, value in off.items():
        ax.plot([], [], color=_THRESHOLD_COLOR, linestyle=":",
                label=f"{name} = {value:.4g} (off scale)")  # fmt: skip
    ax.set_xlabel(DISTRIBUTIONS.get(column, column))
    ax.set_ylabel("clips")
    # "best" named explicitly: matplotlib warns (an error under -W error) when
    # the default placement search takes more than a second on a busy machine
    ax.legend(frameon=False, fontsize="small", loc="best")
    infinite = int(np.isinf(x).sum())
    if infinite:
        # e.g. the -inf dBFS of a digitally silent clip
        ax.set_title(f"{infinite} infinite value(s) not shown", fontsize="small")
    return ax


def failure_reasons(table: pa.Table) -> Counter[str]:
    """Clips per failure reason: the error type of those that could not be
    processed, each quality rejection reason of those that were."""
    counts: Counter[str] = Counter()
    errors = table.column("error_type").to_pylist()
    reasons = table.column("reasons").to_pylist() if "reasons" in table.column_names else []
    for i, err in enumerate(errors):
        if err:
            counts[str(err)] += 1
        elif reasons and reasons[i]:
            counts.update(str(r) for r in reasons[i])
    return counts


def plot_failure_reasons(table: pa.Table, *, ax: Any = None) -> Any:
    """Horizontal bars: clips per failure reason (:func:`failure_reasons`)."""
    ax = axes_or_new(ax)
    counts = failure_reasons(table).most_common()
    names = [n for n, _ in counts][::-1] or ["(none)"]
    values = [c for _, c in counts][::-1] or [0]
    ax.barh(names, values, color=OUTCOMES["failed"])
    ax.set_xlabel("clips")
    return ax


def _has_values(table: pa.Table, column: str) -> bool:
    return column in table.column_names and bool(np.isfinite(_floats(table, column)).any())


def report_figures(
    table: pa.Table, summary: Mapping[str, Any] | None = None
) -> list[tuple[str, str, Any]]:
    """``(id, title, Figure)`` of every figure the table allows, in page order:
    the distributions (with the limits of ``summary``, see
    :func:`threshold_lines`), then the failure reasons."""
    from matplotlib.figure import Figure

    limits = threshold_lines(summary or {})
    out = []
    groups = sorted(c for c in table.column_names if c.startswith("group_"))
    for column in [*DISTRIBUTIONS, *groups]:
        if _has_values(table, column):
            fig = Figure(figsize=(5.0, 3.2), layout="constrained")
            plot_distribution(table, column, thresholds=limits.get(column), ax=fig.add_subplot())
            out.append((f"dist-{column}", DISTRIBUTIONS.get(column, column), fig))
    fig = Figure(figsize=(5.0, 3.2), layout="constrained")
    plot_failure_reasons(table, ax=fig.add_subplot())
    out.append(("failures", "failure reasons", fig))
    return out


def png_base64(fig: Any) -> str:
    """A matplotlib figure as a base64-encoded PNG (96 dpi), for a data URL."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    return base64.b64encode(buf.getvalue()).decode("ascii")
