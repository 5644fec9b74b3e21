"""PNG figures (matplotlib, Agg): continent confusion heatmaps, error CDFs,
and world maps of the ground truth coloured by each model's error.

The map is drawn offline from the Natural Earth 1:110m country outlines that
agl-fast ships (:mod:`agl_fast.worldmap`, public domain): no tile server,
no download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..exceptions import ParameterError
from ..worldmap import world_rings


def _pyplot():  # type: ignore[no-untyped-def]
    # The backend is the caller's (the CLI selects Agg): a library call never
    # switches a notebook's backend.
    import matplotlib.pyplot as plt

    return plt


def confusion_heatmap(confusion: pd.DataFrame, title: str, path: str | Path) -> Path:
    """Row-normalised continent confusion matrix as a heatmap (paper Figure 6)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.0 + 0.8 * confusion.shape[1], 1.0 + 0.6 * confusion.shape[0]))
    im = ax.imshow(confusion.to_numpy(np.float64), vmin=0, vmax=1, cmap="Blues")
    ax.set_xticks(range(confusion.shape[1]), [str(c) for c in confusion.columns], rotation=45)
    ax.set_yticks(range(confusion.shape[0]), [str(r) for r in confusion.index])
    for i in range(confusion.shape[0]):
        for j in range(confusion.shape[1]):
            v = float(confusion.iat[i, j])
            ax.text(
                j,
                i,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if v > 0.5 else "black",
            )
    ax.set_xlabel("predicted continent")
    ax.set_ylabel("true continent")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def error_cdfs(distances: dict[str, np.ndarray], title: str, path: str | Path) -> Path:
    """Empirical CDF of the distance error of each model (log-scaled km axis)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for model, d in distances.items():
        x = np.sort(np.asarray(d, dtype=np.float64)[~np.isnan(d)])
        if len(x) == 0:
            continue
        y = np.arange(1, len(x) + 1) / len(x)
        ax.step(np.maximum(x, 0.1), y, where="post", label=f"{model} (n={len(x)})")
    ax.set_xscale("log")
    ax.set_xlabel("distance error (km)")
    ax.set_ylabel("share of answers")
    ax.set_ylim(0, 1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def world_outlines() -> list[np.ndarray]:
    """Country outline rings as ``[n, 2]`` arrays of (longitude, latitude) in
    degrees, from the shipped Natural Earth 1:110m countries
    (:func:`agl_fast.worldmap.world_rings`)."""
    return world_rings()


def error_map(
    lat: np.ndarray, lon: np.ndarray, distance_km: np.ndarray, title: str, path: str | Path
) -> Path:
    """World map of ground-truth locations coloured by distance error (km,
    log colour scale); clips without a usable answer are drawn as grey
    crosses.

    Parameters
    ----------
    lat, lon : np.ndarray [shape=(n,)]
        Ground-truth coordinates in degrees.
    distance_km : np.ndarray [shape=(n,)]
        Error of the model on each clip in km (NaN where it gave none).
    """
    plt = _pyplot()
    from matplotlib.colors import LogNorm

    fig, ax = plt.subplots(figsize=(10, 5.2))
    for ring in world_outlines():
        ax.fill(ring[:, 0], ring[:, 1], color="#e8e8e8", edgecolor="#9a9a9a", linewidth=0.3)
    d = np.asarray(distance_km, dtype=np.float64)
    ok = np.isfinite(d)
    ax.scatter(
        lon[~ok],
        lat[~ok],
        marker="x",
        s=10,
        color="#888888",
        linewidths=0.6,
        label="no usable answer",
    )
    sc = ax.scatter(
        lon[ok],
        lat[ok],
        c=np.maximum(d[ok], 1.0),
        s=9,
        cmap="viridis_r",
        norm=LogNorm(vmin=1.0, vmax=20000.0),
        edgecolors="none",
    )
    fig.colorbar(sc, ax=ax, fraction=0.025, pad=0.01, label="distance error (km)")
    ax.set_xlim(-180, 180)
    ax.set_ylim(-90, 90)
    ax.set_aspect("equal")
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    ax.set_title(title)
    if (~ok).any():
        ax.legend(loc="lower left", fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def save_axes(ax: Any, path: str | Path) -> Path:
    """Write the figure that ``ax`` belongs to (PNG, 120 dpi, tight layout)."""
    from matplotlib.figure import Figure

    fig = ax.get_figure()
    if not isinstance(fig, Figure):
        raise ParameterError("the axes belong to no figure")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    return out
