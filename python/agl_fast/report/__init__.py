"""The curation report: one self-contained HTML page for a ``curate`` output.

``agl-fast report OUT`` reads ``OUT/curated.parquet`` and ``OUT/summary.json``
and writes ``OUT/report.html``: the summary table, a world map of the
manifest's coordinates coloured by outcome, a sortable table of every file
that did not pass with its reason, the distributions of the levels, quality
metrics and tag fractions by outcome with the run's thresholds drawn on
them, and the failure reasons. The page opens offline and can be mailed:
histograms are inline PNG images, the map is inline SVG drawn on the
country outlines agl-fast ships (:mod:`agl_fast.worldmap`), and the table
sorts with a few lines of plain JavaScript.

Every clip has one outcome, counted as ``summary.json`` counts it:
``failed`` (an error row: it could not be decoded or processed),
``rejected`` (decoded, but a quality rule turned it down) or ``passed``.

The figure functions take a table and an optional matplotlib ``ax`` and draw
on it; they never select a matplotlib backend (figures made here are
:class:`matplotlib.figure.Figure` objects, which need none).
"""

from __future__ import annotations

import argparse
import base64
import html
import importlib
import io
import json
import logging
import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .coords import validate_coordinates
from .exceptions import AglIOError
from .worldmap import world_paths, world_rings

__all__ = [
    "DISTRIBUTIONS",
    "FAILED_ROWS_SHOWN",
    "MAP_SVG_POINTS",
    "OUTCOMES",
    "REQUIRES",
    "THRESHOLD_COLUMNS",
    "add_parser",
    "check_dependencies",
    "failed_rows",
    "failure_reasons",
    "map_svg",
    "outcomes",
    "plot_coordinates",
    "plot_distribution",
    "plot_failure_reasons",
    "report_figures",
    "run",
    "threshold_lines",
    "write_report",
]

_log = logging.getLogger("agl_fast.report")

#: Packages the report needs beyond agl-fast's own (the ``evaluate`` extra).
REQUIRES = ("matplotlib",)

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

#: Run parameter (``summary.json``: ``parameters`` or
#: ``parameters.quality_thresholds``) -> the column it is a limit on.
THRESHOLD_COLUMNS: dict[str, str] = {
    "rms_floor": "rms",
    "flatness_ceiling": "flatness",
    "clipping_ceiling": "clipping_ratio",
    "full_scale_ceiling": "full_scale_ratio",
    "complexity_floor": "complexity",
    "min_duration": "duration",
    "max_duration": "duration",
}
#: A threshold further from the data than this many times the data's scale
#: (its span or its largest magnitude, whichever is larger) is named in the
#: legend instead of stretching the axis.
_OFF_SCALE = 4.0

#: Outcomes of a clip, in drawing order (the last is drawn on top), with colours.
OUTCOMES: dict[str, str] = {"failed": "#d1495b", "rejected": "#e89b2c", "passed": "#2a9d55"}
#: Rows of the failed-files table written at most (the rest are counted).
FAILED_ROWS_SHOWN = 10_000
#: Clips on the map above which it is a PNG image (:func:`plot_coordinates`)
#: rather than inline SVG with one element per clip.
MAP_SVG_POINTS = 20_000
_THRESHOLD_COLOR = "#333333"


def check_dependencies() -> None:
    """Import every package of :data:`REQUIRES`, so that a job that ends in
    a report can stop before it starts.

    Raises
    ------
    ImportError
        A package is missing (``exc.name`` names it; the command line turns
        it into the ``pip install`` line).
    """
    for name in REQUIRES:
        importlib.import_module(name)


def _axes(ax: Any) -> Any:
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
    ax = _axes(ax)
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
    ax.legend(frameon=False, fontsize="small")
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
    ax = _axes(ax)
    counts = failure_reasons(table).most_common()
    names = [n for n, _ in counts][::-1] or ["(none)"]
    values = [c for _, c in counts][::-1] or [0]
    ax.barh(names, values, color=OUTCOMES["failed"])
    ax.set_xlabel("clips")
    return ax


def _coordinates(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latitude, longitude, valid) of every row; rows without the columns,
    with missing or invalid values are not valid."""
    n = table.num_rows
    if not {"latitude", "longitude"} <= set(table.column_names):
        nan = np.full(n, np.nan)
        return nan, nan, np.zeros(n, dtype=bool)
    lat, lon, _ = validate_coordinates(
        table.column("latitude").to_pylist(), table.column("longitude").to_pylist()
    )
    lat, lon = np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64)
    return lat, lon, np.isfinite(lat) & np.isfinite(lon)


def _map_legend(kind: np.ndarray, valid: np.ndarray) -> list[tuple[str, int, int]]:
    """``(outcome, clips, clips on the map)`` in legend order (passed first)."""
    return [(k, int((kind == k).sum()), int(((kind == k) & valid).sum())) for k in OUTCOMES][::-1]


def plot_coordinates(table: pa.Table, *, ax: Any = None) -> Any:
    """Longitude/latitude of each clip (degrees) on the shipped coastlines,
    coloured by outcome; passed clips are drawn above rejected and failed
    ones. Legend counts are all clips of each outcome (as ``summary.json``)
    and those of them with valid coordinates."""
    ax = _axes(ax)
    lat, lon, valid = _coordinates(table)
    kind = outcomes(table)
    for ring in world_rings():
        ax.fill(ring[:, 0], ring[:, 1], facecolor="#e6e6e6", edgecolor="#8c8c8c",
                linewidth=0.3, zorder=1)  # fmt: skip
    legend = {k: (total, drawn) for k, total, drawn in _map_legend(kind, valid)}
    for z, (k, color) in enumerate(OUTCOMES.items()):
        m = valid & (kind == k)
        total, drawn = legend[k]
        ax.scatter(lon[m], lat[m], s=14, color=color, edgecolors="white", linewidths=0.4,
                   zorder=2 + z, label=f"{k}: {total} ({drawn} on the map)")  # fmt: skip
    ax.set_xlim(-180, 180)
    ax.set_ylim(-90, 90)
    ax.set_aspect("equal")
    ax.set_xlabel("longitude (deg)")
    ax.set_ylabel("latitude (deg)")
    missing = int((~valid).sum())
    ax.set_title(f"{missing} of {table.num_rows} clips without valid coordinates", fontsize="small")
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], frameon=False, fontsize="small", loc="lower left")
    return ax


def map_svg(table: pa.Table) -> str:
    """The map of the page: inline SVG (plate carree, ``viewBox`` in
    degrees) of the shipped country outlines under one circle per clip with
    valid coordinates, in groups ``failed``, ``rejected``, ``passed`` (drawn
    in that order, so passed clips are on top), and its HTML legend.

    Every circle carries ``data-key`` and a ``<title>`` (key and outcome).
    """
    esc = html.escape
    lat, lon, valid = _coordinates(table)
    kind = outcomes(table)
    keys = [str(k) for k in table.column("key").to_pylist()]
    land = "".join(
        f'<path d="{esc(d)}"><title>{esc(name)}</title></path>' for name, d in world_paths()
    )
    grid = "".join(f'<line x1="-180" x2="180" y1="{y}" y2="{y}"/>' for y in range(-60, 90, 30))
    grid += "".join(f'<line y1="-90" y2="90" x1="{x}" x2="{x}"/>' for x in range(-150, 180, 30))
    groups = []
    for k, color in OUTCOMES.items():
        dots = "".join(
            f'<circle cx="{lon[i]:.4f}" cy="{-lat[i]:.4f}" r="1.6" data-key="{esc(keys[i])}">'
            f"<title>{esc(keys[i])}: {k}</title></circle>"
            for i in np.flatnonzero(valid & (kind == k))
        )
        groups.append(f'<g class="points {k}" fill="{color}">{dots}</g>')
    svg = (
        '<svg id="map-svg" viewBox="-180 -90 360 180" role="img" '
        'aria-label="where the clips were recorded" preserveAspectRatio="xMidYMid meet">'
        '<rect x="-180" y="-90" width="360" height="180" fill="#eef4f8"/>'
        f'<g class="graticule" stroke="#d3dde4" stroke-width="0.2">{grid}</g>'
        f'<g class="land" fill="#dcdcdc" stroke="#7d7d7d" stroke-width="0.25">{land}</g>'
        f'<g stroke="#ffffff" stroke-width="0.35">{"".join(groups)}</g></svg>'
    )
    items = "".join(
        f'<li data-outcome="{k}" data-count="{total}" data-drawn="{drawn}">'
        f'<span class="swatch" style="background:{OUTCOMES[k]}"></span>'
        f"{k}: {total} ({drawn} on the map)</li>"
        for k, total, drawn in _map_legend(kind, valid)
    )
    missing = int((~valid).sum())
    items += (
        f'<li data-outcome="none" data-count="{missing}">'
        f"without valid coordinates: {missing} of {table.num_rows} (not drawn)</li>"
    )
    return f'{svg}<ul class="legend">{items}</ul>'


def _map(table: pa.Table) -> str:
    """The page's map: inline SVG, or a PNG for more than :data:`MAP_SVG_POINTS` clips."""
    if int(_coordinates(table)[2].sum()) <= MAP_SVG_POINTS:
        return map_svg(table)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 6.0), layout="constrained")
    plot_coordinates(table, ax=fig.add_subplot())
    return (
        f'<img alt="where the clips were recorded" src="data:image/png;base64,{_png(fig)}">'
        f"<figcaption>more than {MAP_SVG_POINTS} clips: drawn as an image</figcaption>"
    )


def failed_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Every clip that did not pass: ``key``, ``outcome`` (``failed`` or
    ``rejected``), ``reason`` (the error type, or the quality reasons joined
    by ``", "``), ``detail`` (the error message, the file's key in place of
    its path) and ``duration`` (s or None), in table order."""
    cols = table.column_names
    kind = outcomes(table)

    def col(name: str) -> list[Any]:
        return table.column(name).to_pylist() if name in cols else [None] * table.num_rows

    keys, errors, messages = col("key"), col("error_type"), col("error_message")
    reasons, durations, paths = col("reasons"), col("duration"), col("path")
    out = []
    for i in np.flatnonzero(kind != "passed"):
        why = errors[i] if errors[i] else ", ".join(str(r) for r in reasons[i] or [])
        d = durations[i]
        detail = str(messages[i] or "")
        if paths[i]:
            # the file column names it already: its key in place of the full path
            detail = detail.replace(str(paths[i]), str(keys[i]))
        out.append(
            {
                "key": str(keys[i]),
                "outcome": str(kind[i]),
                "reason": why or "(none given)",
                "detail": detail,
                "duration": d if d is not None and math.isfinite(d) else None,
            }
        )
    return out


#: Columns of the failed-files table: (heading, sort type).
_FAILED_COLUMNS = (
    ("file", "text"),
    ("outcome", "text"),
    ("reason", "text"),
    ("detail", "text"),
    ("duration (s)", "number"),
)


def _failed_table(table: pa.Table, limit: int) -> str:
    esc = html.escape
    rows = failed_rows(table)
    if not rows:
        return "<p id='no-failed'>Every clip passed.</p>"
    head = "".join(
        f'<th data-type="{t}"><button type="button">{esc(name)}</button></th>'
        for name, t in _FAILED_COLUMNS
    )
    body = []
    for r in rows[:limit]:
        d = r["duration"]
        dur = f'<td data-v="{d!r}">{d:.2f}</td>' if d is not None else '<td data-v=""></td>'
        detail = r["detail"] if len(r["detail"]) <= 300 else r["detail"][:300] + "..."
        body.append(
            f"<tr class='{r['outcome']}'><td>{esc(r['key'])}</td><td>{r['outcome']}</td>"
            f"<td>{esc(r['reason'])}</td><td>{esc(detail)}</td>{dur}</tr>"
        )
    more = len(rows) - limit
    note = (
        f"<p class='note'>{more} more not shown: read curated.parquet where passed is false.</p>"
        if more > 0
        else ""
    )
    return (
        f"<table id='failed-files' class='sortable' data-rows='{len(rows)}'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"
    )


#: Click a column head to sort by it; again to reverse. Empty cells stay last.
_SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function (t) {
  var heads = t.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, i) {
    th.querySelector('button').addEventListener('click', function () {
      var asc = th.getAttribute('aria-sort') !== 'ascending';
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
      var num = th.dataset.type === 'number', body = t.tBodies[0];
      var val = function (r) {
        var c = r.cells[i];
        return c.dataset.v !== undefined ? c.dataset.v : c.textContent;
      };
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = val(a), y = val(b);
        if (x === '' || y === '') { return (x === '') - (y === ''); }
        var c = num ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


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


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = []
    counts = summary.get("counts", {})
    for key in ("inputs", "rows", "decoded", "passed", "failed", "truncated"):
        if key in counts:
            rows.append((key, str(counts[key])))
    if "decoded" in counts and "passed" in counts:
        rows.append(("rejected", str(counts["decoded"] - counts["passed"])))
    run = summary.get("this_run", {})
    for key in ("wall_seconds", "files_per_second", "x_real_time"):
        if key in run:
            rows.append((key.replace("_", " "), f"{run[key]:.3g}"))
    if "audio_hours" in summary:
        rows.append(("audio hours", f"{summary['audio_hours']:.3g}"))
    src = summary.get("input", {})
    if src:
        rows.append(("input", f"{src.get('kind', '')} {src.get('spec', '')}".strip()))
    return rows


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;max-width:1200px}"
    "table{border-collapse:collapse;margin-bottom:1.5rem}"
    "th,td{padding:.2rem .8rem;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
    "#failed-files td{font-size:.9rem}#failed-files tr.failed td:nth-child(2){color:#a3283a}"
    "#failed-files tr.rejected td:nth-child(2){color:#9a5b00}"
    "th button{font:inherit;font-weight:600;border:0;background:none;cursor:pointer;padding:0}"
    "th[aria-sort=ascending] button::after{content:' \\25B2'}"
    "th[aria-sort=descending] button::after{content:' \\25BC'}"
    "#map-svg{width:100%;height:auto;border:1px solid #ccc}"
    ".legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:1.2rem;font-size:.9rem}"
    ".swatch{display:inline-block;width:.8rem;height:.8rem;border-radius:50%;"
    "margin-right:.35rem;vertical-align:-1px}"
    ".figures{display:flex;flex-wrap:wrap;gap:1rem}"
    "figure{margin:0}img{max-width:100%;height:auto}"
    "figcaption,.note{font-size:.9rem;color:#555}"
)


def write_report(
    out: str | Path, path: str | Path | None = None, *, max_rows: int = FAILED_ROWS_SHOWN
) -> Path:
    """Write the HTML report of the curation output directory ``out``.

    Parameters
    ----------
    out : str or Path
        A ``curate`` output directory (``curated.parquet``; ``summary.json``
        is used when present: its counts and the thresholds it records).
    path : str, Path or None
        Where to write (default ``out/report.html``).
    max_rows : int
        Rows of the failed-files table written at most; the page says how
        many more there are.

    Returns
    -------
    Path
        The page written.

    Raises
    ------
    AglIOError
        ``out`` has no ``curated.parquet``.
    ImportError
        matplotlib is missing (see :func:`check_dependencies`).
    """
    out = Path(out)
    table_path = out / "curated.parquet"
    if not table_path.is_file():
        raise AglIOError(f"{out}: no curated.parquet (is it a curate output directory?)")
    table = pq.read_table(table_path)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    figures = report_figures(table, summary)
    esc = html.escape
    table_rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in _rows(summary))
    figs = "".join(
        f'<figure id="{fid}"><img alt="{esc(title)}" src="data:image/png;base64,{_png(fig)}">'
        f"<figcaption>{esc(title)}</figcaption></figure>"
        for fid, title, fig in figures
    )
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>agl-fast curation report: {esc(out.name)}</title><style>{_CSS}</style></head>"
        f"<body><h1>Curation report</h1><p>{table.num_rows} clips.</p>"
        f"<table id='summary'>{table_rows}</table>"
        f"<h2>Where the clips were recorded</h2><figure id='map'>{_map(table)}</figure>"
        f"<h2>Files that did not pass</h2>{_failed_table(table, max_rows)}"
        f"<h2>Distributions</h2><p class='note'>Dashed lines: the limits this run applied."
        f"</p><div class='figures' data-count='{len(figures)}'>{figs}</div>"
        f"<script>{_SORT_JS}</script></body></html>"
    )
    dest = Path(path) if path is not None else out / "report.html"
    dest.write_text(page, encoding="utf-8")
    _log.info("wrote %s (%d figures)", dest, len(figures))
    return dest


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="write the HTML report of a curate output directory",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("out", type=Path, help="curate output directory")
    p.add_argument("--html", type=Path, default=None, help="page to write (None: OUT/report.html)")
    p.add_argument(
        "--max-rows",
        type=int,
        default=FAILED_ROWS_SHOWN,
        help="rows of the failed-files table written at most (the rest are counted)",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    check_dependencies()
    print(write_report(args.out, args.html, max_rows=args.max_rows))
    return 0
