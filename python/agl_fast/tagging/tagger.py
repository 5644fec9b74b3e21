"""The ``Tagger`` interface and the EfficientAT ONNX tagger.

A tagger turns windows of audio into per-window class probabilities
(:meth:`Tagger.predict_windows`), places windows over whole clips
(:meth:`Tagger.clip_frames`) and reduces them to per-clip time fractions per
class and per AudioSet top-level group (:meth:`Tagger.tag`), following the
rules of :mod:`agl_fast.tagging.windows`.
"""

from __future__ import annotations

import math
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import ParameterError
from .onnx_backend import DEFAULT_BUCKETS, Device, OnnxModel
from .ontology import ontology
from .windows import (
    DEFAULT_FRACTION_SCHEME,
    FRACTION_SCHEMES,
    Aggregation,
    ClipFrames,
    FractionScheme,
    Padding,
    check_window,
    plan_windows,
    segment_fractions,
    time_fractions,
    window_views,
)

__all__ = ["ClipTags", "EfficientATTagger", "Tagger"]


@dataclass(frozen=True)
class ClipTags:
    """Tagging result of one clip.

    Attributes
    ----------
    fractions : np.ndarray [shape=(n_classes,), dtype=float32]
        Time fraction per class, in [0, 1].
    groups : np.ndarray [shape=(n_groups,), dtype=float32]
        Time fraction per top-level group.
    max_prob : np.ndarray [shape=(n_classes,), dtype=float32]
        Highest window probability per class.
    n_windows : int
    duration_s : float
    """

    fractions: np.ndarray
    groups: np.ndarray
    max_prob: np.ndarray
    n_windows: int
    duration_s: float


class Tagger(ABC):
    """Base class of the taggers.

    Subclasses set ``name``, ``sr``, ``class_names``, ``group_matrix``
    ``[n_groups, n_classes]`` and ``provider``, and implement
    :meth:`predict_windows` and :meth:`clip_frames`.

    Parameters
    ----------
    threshold : float
        Presence threshold on the aggregated probability of an instant.
    aggregation : {'max', 'mean'}
        How overlapping windows are combined at one instant.
    """

    name: str = "tagger"
    sr: int = 32000
    class_names: tuple[str, ...] = ()
    group_keys: tuple[str, ...] = ()
    group_matrix: np.ndarray
    provider: str = "none"

    #: Whether the tagger's AudioSet group fractions mean anything (a
    #: one-class tagger such as the speech tagger reports ``speech_fraction``
    #: only, not the *Human sounds* group).
    reports_groups: bool = True

    def __init__(
        self,
        *,
        threshold: float = 0.3,
        aggregation: Aggregation = "max",
        fraction_scheme: FractionScheme = DEFAULT_FRACTION_SCHEME,
    ) -> None:
        if fraction_scheme not in FRACTION_SCHEMES:
            raise ParameterError(
                f"fraction_scheme must be one of {FRACTION_SCHEMES}, got {fraction_scheme!r}"
            )
        self.fraction_scheme: FractionScheme = fraction_scheme
        if not 0.0 <= float(threshold) <= 1.0:
            raise ParameterError(f"threshold must be in [0, 1], got threshold={threshold}")
        if aggregation not in ("max", "mean"):
            raise ParameterError(f"aggregation must be 'max' or 'mean', got {aggregation!r}")
        self.threshold = float(threshold)
        self.aggregation: Aggregation = aggregation

    @abstractmethod
    def predict_windows(self, windows: np.ndarray) -> np.ndarray:
        """``[n, window_samples]`` audio at ``sr`` to ``[n, n_classes]``
        probabilities."""

    @abstractmethod
    def clip_frames(self, clips: Sequence[np.ndarray]) -> Iterator[ClipFrames]:
        """Window placement and per-window probabilities of each clip, in order."""

    def tag(self, clips: Sequence[np.ndarray]) -> list[ClipTags]:
        """Per-clip time fractions (classes and groups) of mono clips at ``sr``."""
        out = []
        reduce = segment_fractions if self.fraction_scheme == "segments10" else time_fractions
        for fr in self.clip_frames(clips):
            cls, grp = reduce(
                fr,
                threshold=self.threshold,
                aggregation=self.aggregation,
                group_matrix=self.group_matrix,
            )
            assert grp is not None
            out.append(
                ClipTags(
                    fractions=cls,
                    groups=grp,
                    max_prob=fr.probs.max(axis=0).astype(np.float32),
                    n_windows=int(fr.starts.shape[0]),
                    duration_s=fr.n / fr.sr,
                )
            )
        return out


def check_clip(y: np.ndarray) -> np.ndarray:
    """A clip as a non-empty mono float32 array; else a :class:`ParameterError`."""
    y = np.asarray(y, dtype=np.float32)
    if y.ndim != 1 or y.shape[0] == 0:
        raise ParameterError(f"expected a non-empty mono 1-D clip, got shape {y.shape}")
    return y


class EfficientATTagger(Tagger):
    """AudioSet tagger running an exported EfficientAT model with ONNX Runtime.

    Features come from :func:`agl_fast.presets.efficientat` (Rust) in a
    producer thread that fills a bounded queue while the consumer runs the
    model, so feature extraction overlaps inference.

    Parameters
    ----------
    model : path or bytes
        ONNX file from ``agl-fast tagger export`` (input ``[batch, 1, 128,
        frames]``, output 527 probabilities).
    window_s, hop_s : float
        Window length and hop in seconds (default 10 s, hop = window).
    pad : {'repeat', 'zero'}
        Padding of clips shorter than a window.
    batch_size : int
        Windows per inference batch (the largest bucket).
    device, allow_cpu_fallback, providers, device_id, n_threads, io_binding
        Runtime settings (``device="auto"``: CUDA when it starts, else the
        CPU with a logged warning), see :class:`~agl_fast.tagging.onnx_backend.OnnxModel`.
    feature_threads : int or None
        Threads of the Rust feature extraction.
    prefetch : int
        Batches of features queued ahead of inference.
    """

    name = "efficientat"

    def __init__(
        self,
        model: str | Path | bytes,
        *,
        window_s: float = 10.0,
        hop_s: float | None = None,
        pad: Padding = "repeat",
        threshold: float = 0.3,
        aggregation: Aggregation = "max",
        fraction_scheme: FractionScheme = DEFAULT_FRACTION_SCHEME,
        batch_size: int = 32,
        device: Device = "auto",
        allow_cpu_fallback: bool = False,
        providers: Sequence[Any] | None = None,
        device_id: int = 0,
        n_threads: int | None = None,
        feature_threads: int | None = None,
        io_binding: bool = True,
        prefetch: int = 2,
        warmup: bool = True,
    ) -> None:
        super().__init__(
            threshold=threshold, aggregation=aggregation, fraction_scheme=fraction_scheme
        )
        if not (
            math.isfinite(window_s)
            and window_s > 0
            and (hop_s is None or (math.isfinite(hop_s) and hop_s > 0))
        ):
            raise ParameterError(
                f"window_s and hop_s must be finite and > 0, got {window_s}, {hop_s}"
            )
        if pad not in ("repeat", "zero"):
            raise ParameterError(f"pad must be 'repeat' or 'zero', got pad={pad!r}")
        if batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got batch_size={batch_size}")
        self.win = round(window_s * self.sr)
        self.hop = round((hop_s if hop_s is not None else window_s) * self.sr)
        check_window(self.win)
        self.pad: Padding = pad
        self.frames = 1 + (self.win - 1) // 320
        buckets = sorted({b for b in DEFAULT_BUCKETS if b < batch_size} | {batch_size})
        self.model = OnnxModel(
            model,
            (1, 128, self.frames),
            device=device,
            allow_cpu_fallback=allow_cpu_fallback,
            providers=providers,
            device_id=device_id,
            n_threads=n_threads,
            buckets=buckets,
            io_binding=io_binding,
            warmup=warmup,
        )
        self.provider = self.model.provider
        self.batch_size = int(batch_size)
        self.feature_threads = feature_threads
        self.prefetch = max(1, int(prefetch))
        onto = ontology()
        self.class_names = onto.names
        self.group_keys = onto.group_keys
        self.group_matrix = onto.group_matrix()

    def features(self, windows: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """``[n, win]`` audio, or ``n`` windows of ``win`` samples each (1-D
        float32 arrays, such as views into a clip), to the model input
        ``[n, 1, 128, frames]``."""
        from ..presets import efficientat

        if isinstance(windows, np.ndarray):
            mel = efficientat(np.ascontiguousarray(windows), n_threads=self.feature_threads)
        else:  # read where they lie; one output array (equal lengths: no padding)
            mel = efficientat(list(windows), n_threads=self.feature_threads, output="numpy")
        return np.asarray(mel)[:, None]

    def predict_windows(self, windows: np.ndarray) -> np.ndarray:
        w = np.asarray(windows, dtype=np.float32)
        if w.ndim != 2 or w.shape[1] != self.win:
            raise ParameterError(f"expected windows of shape [n, {self.win}], got {w.shape}")
        return self.model(self.features(w))

    def _batches(self, clips: Sequence[np.ndarray], plans: list[np.ndarray]) -> Iterator[Any]:
        """(owners, rows, windows) batches of at most ``batch_size`` windows;
        ``windows`` are views into the clips (no copy) where they lie inside."""
        owners: list[int] = []
        rows: list[int] = []
        parts: list[np.ndarray] = []
        for k, (y, starts) in enumerate(zip(clips, plans, strict=True)):
            for j, w in enumerate(window_views(y, starts, self.win, self.pad)):
                parts.append(w)
                owners.append(k)
                rows.append(j)
                if len(owners) == self.batch_size:
                    yield owners, rows, parts
                    owners, rows, parts = [], [], []
        if owners:
            yield owners, rows, parts

    def clip_frames(self, clips: Sequence[np.ndarray]) -> Iterator[ClipFrames]:
        clips = [check_clip(c) for c in clips]
        plans = [plan_windows(c.shape[0], self.win, self.hop) for c in clips]
        probs = [np.zeros((p.shape[0], len(self.class_names)), np.float32) for p in plans]
        remaining = [p.shape[0] for p in plans]
        q: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def put(item: Any) -> bool:
            """Queue an item unless the consumer has stopped; False if it has."""
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for owners, rows, w in self._batches(clips, plans):
                    if not put((owners, rows, self.features(w))):
                        return
                put(None)
            except BaseException as exc:  # handed to the consumer
                put(exc)

        worker = threading.Thread(target=produce, name="agl-fast-features", daemon=True)
        worker.start()
        next_clip = 0
        try:
            while True:
                item = q.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                owners, rows, x = item
                p = self.model(x)
                for r, (k, j) in enumerate(zip(owners, rows, strict=True)):
                    probs[k][j] = p[r]
                    remaining[k] -= 1
                while next_clip < len(clips) and remaining[next_clip] == 0:
                    yield ClipFrames(
                        plans[next_clip],
                        self.win,
                        clips[next_clip].shape[0],
                        self.sr,
                        probs[next_clip],
                    )
                    next_clip += 1
        finally:
            stop.set()
            worker.join()
