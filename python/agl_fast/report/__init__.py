"""The curation report: one self-contained HTML page for a ``curate`` output.

``agl-fast report OUT`` reads ``OUT/curated.parquet`` and ``OUT/summary.json``
and writes ``OUT/report.html``: the summary table, a world map of the
manifest's coordinates coloured by outcome, a sortable table of every file
that did not pass with its reason, the distributions of the levels, quality
metrics and tag fractions by outcome with the run's thresholds drawn on
them, the failure reasons and, for a deduplicated output (``agl-fast dedup``),
the duplicate groups. The page opens offline and can be mailed:
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

import html
import importlib
import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._internal.safe_files import check_tree, write_atomic
from ..exceptions import AglIOError
from .duplicates import duplicates_section
from .figures import (
    DISTRIBUTIONS,
    OUTCOMES,
    THRESHOLD_COLUMNS,
    failure_reasons,
    outcomes,
    plot_distribution,
    plot_failure_reasons,
    png_base64,
    report_figures,
    threshold_lines,
)
from .maps import clip_coordinates, map_svg, plot_coordinates
from .tables import CSS, SORT_JS, failed_rows, failed_table_html, summary_rows

__all__ = [
    "DISTRIBUTIONS",
    "FAILED_ROWS_SHOWN",
    "MAP_SVG_POINTS",
    "OUTCOMES",
    "REQUIRES",
    "THRESHOLD_COLUMNS",
    "check_dependencies",
    "duplicates_section",
    "failed_rows",
    "failure_reasons",
    "map_svg",
    "outcomes",
    "plot_coordinates",
    "plot_distribution",
    "plot_failure_reasons",
    "report_figures",
    "threshold_lines",
    "write_report",
]

_log = logging.getLogger("agl_fast.report")

#: Packages the report needs beyond agl-fast's own (the ``evaluate`` extra).
REQUIRES = ("matplotlib",)


#: Rows of the failed-files table written at most (the rest are counted).
FAILED_ROWS_SHOWN = 10_000
#: Clips on the map above which it is a PNG image (:func:`plot_coordinates`)
#: rather than inline SVG with one element per clip.
MAP_SVG_POINTS = 20_000


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


def _map(table: pa.Table) -> str:
    """The page's map: inline SVG, or a PNG for more than :data:`MAP_SVG_POINTS` clips."""
    if int(clip_coordinates(table)[2].sum()) <= MAP_SVG_POINTS:
        return map_svg(table)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 6.0), layout="constrained")
    plot_coordinates(table, ax=fig.add_subplot())
    return (
        f'<img alt="where the clips were recorded" src="data:image/png;base64,{png_base64(fig)}">'
        f"<figcaption>more than {MAP_SVG_POINTS} clips: drawn as an image</figcaption>"
    )


def _duplicates(table: pa.Table, summary: dict[str, Any]) -> str:
    """The duplicate recordings' section, when the output was deduplicated."""
    section = duplicates_section(table, summary)
    return f"<h2 id='duplicates'>Duplicate recordings</h2>{section}" if section else ""


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
    UnsafePathError
        The page would be written through a symlink pointing outside its
        folder, or (written into ``out``) ``out`` holds a symlink pointing
        outside it; nothing is written.
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
    table_rows = "".join(
        f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in summary_rows(summary)
    )
    figs = "".join(
        f'<figure id="{fid}"><img alt="{esc(title)}" src="data:image/png;base64,{png_base64(fig)}">'
        f"<figcaption>{esc(title)}</figcaption></figure>"
        for fid, title, fig in figures
    )
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>agl-fast curation report: {esc(out.name)}</title><style>{CSS}</style></head>"
        f"<body><h1>Curation report</h1><p>{table.num_rows} clips.</p>"
        f"<table id='summary'>{table_rows}</table>"
        f"<h2>Where the clips were recorded</h2><figure id='map'>{_map(table)}</figure>"
        f"<h2>Files that did not pass</h2>{failed_table_html(table, max_rows)}"
        f"{_duplicates(table, summary)}"
        f"<h2>Distributions</h2><p class='note'>Dashed lines: the limits this run applied."
        f"</p><div class='figures' data-count='{len(figures)}'>{figs}</div>"
        f"<script>{SORT_JS}</script></body></html>"
    )
    dest = Path(path) if path is not None else out / "report.html"
    if dest.parent.resolve() == out.resolve():
        check_tree(out)
    write_atomic(dest, page)
    _log.info("wrote %s (%d figures)", dest, len(figures))
    return dest
