"""The report's HTML pieces: the summary rows, the sortable table of the
files that did not pass, the style sheet and the sorting script."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from .figures import outcomes


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


def failed_table_html(table: pa.Table, limit: int) -> str:
    """The HTML table of the first ``limit`` files that did not pass."""
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
SORT_JS = """
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


def summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of a run summary, as the report shows them."""
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


CSS = (
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
