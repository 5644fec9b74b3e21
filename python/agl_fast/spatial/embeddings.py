"""OWL's Type I scores from text embeddings.

OWL scores event detection (Type I) by embedding similarity
(``seld_cot/owl/scripts/calculate_map.py`` in its repository): each answer
(newlines made spaces) is embedded, its cosine similarity with the
embedding of every class name of the vocabulary (SpatialSoundQA's 355
AudioSet classes, ``class_labels_indices_subset.csv``) is the answer's score
for that class, the targets are the multi-hot vectors of the reference
event names (matched in lower case), and the figure is the mean over
classes of the per-class average precision.

The embeddings come from :func:`agl_fast.alm.embeddings.fetch_embeddings`;
:func:`embedding_scores` gives the score matrix;
:func:`agl_fast.spatial.answers.score_qa` uses it with ``type1='embedding'``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..exceptions import ParameterError, ShapeError

__all__ = ["embedding_scores", "read_class_labels"]


def embedding_scores(answers: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Cosine similarity ``[n, C]`` of answer embeddings ``[n, D]`` with class
    embeddings ``[C, D]`` (a zero vector scores 0)."""
    a, c = np.asarray(answers, dtype=np.float64), np.asarray(classes, dtype=np.float64)
    if a.ndim != 2 or c.ndim != 2 or a.shape[1] != c.shape[1]:
        raise ShapeError(f"embeddings must be [n, D] and [C, D], got {a.shape} and {c.shape}")
    na = np.linalg.norm(a, axis=1, keepdims=True)
    nc = np.linalg.norm(c, axis=1, keepdims=True)
    return np.asarray((a / np.where(na > 0, na, 1.0)) @ (c / np.where(nc > 0, nc, 1.0)).T)


def read_class_labels(path: str | Path) -> list[str]:
    """Class names of an AudioSet ``class_labels_indices`` CSV (``index,mid,display_name``),
    in index order (SpatialSoundQA's ``class_labels_indices_subset.csv``: 355)."""
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "display_name" not in rows[0]:
        raise ParameterError(f"{path}: a CSV with a display_name column is required")
    return [str(r["display_name"]) for r in rows]
