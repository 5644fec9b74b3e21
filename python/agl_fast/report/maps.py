"""The report's map of where the clips were recorded: inline SVG on the
country outlines agl-fast ships, or a matplotlib scatter."""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pyarrow as pa

from ..coords import validate_coordinates
from ..worldmap import world_paths, world_rings
from .figures import OUTCOMES, axes_or_new, outcomes


def clip_coordinates(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    ax = axes_or_new(ax)
    lat, lon, valid = clip_coordinates(table)
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
    lat, lon, valid = clip_coordinates(table)
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
