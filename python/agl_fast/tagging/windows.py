"""Sliding windows over clips and per-clip time fractions.

Window placement (``plan_windows``)
    A clip of ``n`` samples and windows of ``win`` samples, hop ``hop``:

    * ``n <= win``: one window starting at 0. The clip is padded to ``win`` by
      repeating it (``pad="repeat"``, EfficientAT's advice for short clips) or
      with zeros (``pad="zero"``). Only the clip's own ``n`` samples count in
      the time fractions.
    * ``n > win``: windows start at ``0, hop, 2 hop, ...`` while they fit; if
      the last one stops short of the end, one more window is placed flush
      with the end (start ``n - win``), so every sample is covered and no
      padding is needed.

Fraction schemes
    ``segments10`` (the default, :func:`segment_fractions`): the clip is cut
    into ten equal segments and a class's fraction is the share of segments
    in which it is present, a multiple of 0.1. Every group fraction of the
    released AGL1K CSV is a multiple of 0.1 (all 11,552 values; 99.4% are
    exactly 0 or 1), which a per-window time share of clips of 34-180 s in
    10 s windows would not give; ``time`` (:func:`time_fractions`) keeps
    exact time shares.

Time fractions (``time_fractions``)
    The clip's time line ``[0, n)`` is cut at every window edge into segments;
    each segment is covered by one or more windows. A segment's score for
    class ``i`` is the **max** (``aggregation="max"``) or **mean**
    (``aggregation="mean"``) of the covering windows' probabilities; class
    ``i`` is *present* in the segment if that score is ``>= threshold``. The
    time fraction ``t[i]`` is the summed length of the segments where ``i`` is
    present divided by ``n``. Overlapping windows are therefore counted once:
    every instant of the clip weighs the same whatever the hop. A group is
    present in a segment when any of its classes is present.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..exceptions import ParameterError

__all__ = [
    "FRACTION_SCHEMES",
    "MAX_WINDOW_SAMPLES",
    "ClipFrames",
    "check_window",
    "extract_windows",
    "plan_windows",
    "segment_fractions",
    "time_fractions",
    "window_views",
]

Aggregation = Literal["max", "mean"]
Padding = Literal["repeat", "zero"]


#: Longest tagging window, in samples (2**26: 35 min at 32 kHz, 256 MiB of
#: float32). A window is one model input; a clip shorter than it is padded
#: to it, so its length is checked before anything is allocated.
MAX_WINDOW_SAMPLES = 1 << 26


def _check_positive(name: str, value: int) -> None:
    if int(value) < 1:
        raise ParameterError(f"{name} must be >= 1 sample, got {name}={value}")


def check_window(win: int) -> None:
    """Fail with :class:`ParameterError` unless ``1 <= win <=``
    :data:`MAX_WINDOW_SAMPLES` (a window length in samples)."""
    _check_positive("win", win)
    if int(win) > MAX_WINDOW_SAMPLES:
        raise ParameterError(
            f"win must be at most {MAX_WINDOW_SAMPLES} samples (MAX_WINDOW_SAMPLES), got win={win}"
        )


def plan_windows(n: int, win: int, hop: int) -> np.ndarray:
    """Start samples of the windows covering a clip of ``n`` samples.

    Returns
    -------
    np.ndarray [shape=(n_windows,), dtype=int64]
    """
    check_window(win)
    _check_positive("hop", hop)
    if n < 1:
        raise ParameterError(f"clip must hold at least one sample, got n={n}")
    if n <= win:
        return np.zeros(1, dtype=np.int64)
    starts = np.arange(0, n - win + 1, hop, dtype=np.int64)
    if starts[-1] + win < n:
        starts = np.append(starts, np.int64(n - win))
    return starts


def window_views(
    y: np.ndarray, starts: np.ndarray, win: int, pad: Padding = "repeat"
) -> list[np.ndarray]:
    """The windows planned by :func:`plan_windows`, as 1-D arrays of ``win``
    samples: views into ``y`` (no copy) for a clip of at least ``win``
    samples, else the one padded window.

    Returns
    -------
    list of np.ndarray [shape=(win,), dtype=float32]
    """
    check_window(win)
    if pad not in ("repeat", "zero"):
        raise ParameterError(f"pad must be 'repeat' or 'zero', got pad={pad!r}")
    y = np.ascontiguousarray(y, dtype=np.float32)
    if y.ndim != 1:
        raise ParameterError(f"expected a mono 1-D clip, got shape {y.shape}")
    n = y.shape[0]
    if n < win:
        if pad == "repeat":
            return [np.resize(y, win)]  # tiles y, then cuts at win
        filled = np.zeros(win, dtype=np.float32)
        filled[:n] = y
        return [filled]
    starts = np.asarray(starts, dtype=np.int64)
    if starts.size and (starts.min() < 0 or starts.max() > n - win):
        raise ParameterError(f"window starts must lie in [0, {n - win}] for a clip of {n} samples")
    return [y[s : s + win] for s in starts.tolist()]


def extract_windows(
    y: np.ndarray, starts: np.ndarray, win: int, pad: Padding = "repeat"
) -> np.ndarray:
    """Cut the windows planned by :func:`plan_windows` out of a mono clip
    (:func:`window_views`, copied into one array).

    Returns
    -------
    np.ndarray [shape=(len(starts), win), dtype=float32]
    """
    views = window_views(y, starts, win, pad)
    out = np.empty((len(views), win), dtype=np.float32)
    for i, v in enumerate(views):  # one contiguous copy per window
        out[i] = v
    return out


@dataclass(frozen=True)
class ClipFrames:
    """Window placement and per-window probabilities of one clip.

    ``starts`` [n_windows] and ``win`` in samples at rate ``sr``; ``n`` the
    clip length in samples; ``probs`` [n_windows, n_classes].
    """

    starts: np.ndarray
    win: int
    n: int
    sr: int
    probs: np.ndarray


def _segments(starts: np.ndarray, win: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segment edges and the ``[lo, hi)`` range of windows covering each."""
    ends = starts + win
    edges = np.unique(np.concatenate([[0, n], np.clip(starts, 0, n), np.clip(ends, 0, n)]))
    left = edges[:-1]
    lo = np.searchsorted(ends, left, side="right")
    hi = np.searchsorted(starts, left, side="right")
    return edges, lo, hi


def segment_presence(
    frames: ClipFrames, *, threshold: float, aggregation: Aggregation = "max"
) -> tuple[np.ndarray, np.ndarray]:
    """Per-segment presence: ``(lengths [n_seg], present [n_seg, n_classes])``."""
    if aggregation not in ("max", "mean"):
        raise ParameterError(f"aggregation must be 'max' or 'mean', got {aggregation!r}")
    probs = np.asarray(frames.probs, dtype=np.float32)
    starts = np.asarray(frames.starts, dtype=np.int64)
    if probs.ndim != 2 or probs.shape[0] != starts.shape[0]:
        raise ParameterError(
            f"probs must be [n_windows={starts.shape[0]}, n_classes], got shape {probs.shape}"
        )
    edges, lo, hi = _segments(starts, frames.win, frames.n)
    lengths = np.diff(edges)
    count = hi - lo
    if np.any(count < 1):
        raise ParameterError("the windows leave part of the clip uncovered")
    if aggregation == "max":
        score = probs[lo].copy()
        for k in range(1, int(count.max())):
            score = np.maximum(score, probs[np.minimum(lo + k, hi - 1)])
    else:
        csum = np.concatenate(
            [np.zeros((1, probs.shape[1])), np.cumsum(probs, axis=0, dtype=np.float64)]
        )
        score = (csum[hi] - csum[lo]) / count[:, None]
    return lengths, score >= threshold


def time_fractions(
    frames: ClipFrames,
    *,
    threshold: float = 0.3,
    aggregation: Aggregation = "max",
    group_matrix: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Fraction of the clip's time in which each class (and group) is present.

    Parameters
    ----------
    frames : ClipFrames
    threshold : float
        Presence threshold on the aggregated probability.
    aggregation : {'max', 'mean'}
        How the windows covering one instant are combined.
    group_matrix : np.ndarray [shape=(n_groups, n_classes), dtype=bool] or None

    Returns
    -------
    classes : np.ndarray [shape=(n_classes,), dtype=float32], in [0, 1]
    groups : np.ndarray [shape=(n_groups,), dtype=float32] or None
    """
    lengths, present = segment_presence(frames, threshold=threshold, aggregation=aggregation)
    w = lengths.astype(np.float64) / float(frames.n)
    cls = (w @ present.astype(np.float64)).astype(np.float32)
    grp = None
    if group_matrix is not None:
        gm = np.asarray(group_matrix, dtype=bool)
        gpresent = (present.astype(np.uint8) @ gm.T.astype(np.uint8)) > 0
        grp = (w @ gpresent.astype(np.float64)).astype(np.float32)
    return cls, grp


#: Fraction schemes: ``segments10`` (ten equal segments per clip, the layout
#: of the released AGL1K fractions) and ``time`` (exact time shares).
FRACTION_SCHEMES = ("segments10", "time")
FractionScheme = Literal["segments10", "time"]
#: The scheme taggers, ``BatchConfig`` and ``agl-fast curate`` use by default.
DEFAULT_FRACTION_SCHEME: FractionScheme = "segments10"
N_SEGMENTS = 10


def segment_fractions(
    frames: ClipFrames,
    *,
    threshold: float = 0.3,
    aggregation: Aggregation = "max",
    group_matrix: np.ndarray | None = None,
    n_segments: int = N_SEGMENTS,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Share of ``n_segments`` equal segments of the clip in which each class
    (and group) is present: multiples of ``1 / n_segments``.

    Segment ``s`` covers samples ``[s n / S, (s + 1) n / S)`` (integer
    bounds, floor); its score for a class is the max (``aggregation="max"``)
    or the length-weighted mean (``"mean"``) of the instants' aggregated
    window scores (see :func:`time_fractions`) over the segment; the class is
    present if that score is ``>= threshold``. A group is present in a
    segment when any of its classes is. Segments shorter than a sample (clips
    of fewer than ``n_segments`` samples) take the score at their start.
    """
    if n_segments < 1:
        raise ParameterError(f"n_segments must be >= 1, got n_segments={n_segments}")
    if aggregation not in ("max", "mean"):
        raise ParameterError(f"aggregation must be 'max' or 'mean', got {aggregation!r}")
    probs = np.asarray(frames.probs, dtype=np.float64)
    starts = np.asarray(frames.starts, dtype=np.int64)
    if probs.ndim != 2 or probs.shape[0] != starts.shape[0]:
        raise ParameterError(
            f"probs must be [n_windows={starts.shape[0]}, n_classes], got shape {probs.shape}"
        )
    # instant scores on the clip's elementary segments (as time_fractions)
    edges, lo, hi = _segments(starts, frames.win, frames.n)
    count = hi - lo
    if np.any(count < 1):
        raise ParameterError("the windows leave part of the clip uncovered")
    if aggregation == "max":
        inst = probs[lo].copy()
        for k in range(1, int(count.max())):
            inst = np.maximum(inst, probs[np.minimum(lo + k, hi - 1)])
    else:
        csum = np.concatenate([np.zeros((1, probs.shape[1])), np.cumsum(probs, axis=0)])
        inst = (csum[hi] - csum[lo]) / count[:, None]
    n = frames.n
    bounds = (np.arange(n_segments + 1, dtype=np.int64) * n) // n_segments
    present = np.zeros((n_segments, probs.shape[1]), dtype=bool)
    for s in range(n_segments):
        a, b = int(bounds[s]), max(int(bounds[s + 1]), int(bounds[s]) + 1)
        left = np.maximum(edges[:-1], a)
        right = np.minimum(edges[1:], b)
        w = np.clip(right - left, 0, None).astype(np.float64)
        use = w > 0
        if aggregation == "max":
            score = inst[use].max(axis=0)
        else:
            score = (w[use] @ inst[use]) / w[use].sum()
        present[s] = score >= threshold
    cls = present.mean(axis=0).astype(np.float32)
    grp = None
    if group_matrix is not None:
        gm = np.asarray(group_matrix, dtype=bool)
        gpresent = (present.astype(np.uint8) @ gm.T.astype(np.uint8)) > 0
        grp = gpresent.mean(axis=0).astype(np.float32)
    return cls, grp
