"""PNG figures: continent confusion heatmaps and error CDFs (matplotlib, Agg).

A world map needs coastline or country shapes from an installed package;
none is required by agl-fast, so the map is not drawn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
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
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
