"""``librosa.effects.trim`` and ``librosa.effects.split`` on agl-fast's
frame RMS and dB conversion (librosa's silence rule, frame for frame)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...dsp.params import N_FFT
from ...exceptions import ParameterError
from . import _accept
from ._errors import librosa_api

__all__ = ["split", "trim"]


def _nonsilent(
    y: Any,
    frame_length: int,
    hop_length: int,
    top_db: float,
    ref: float | Callable[..., Any],
    aggregate: Callable[..., Any],
) -> np.ndarray:
    """Per frame: is its RMS within ``top_db`` of ``ref`` (librosa's
    ``_signal_to_frame_nonsilent``)? Channels are combined by ``aggregate``."""
    from . import amplitude_to_db
    from .feature import rms

    top_db = _accept.real("top_db", top_db)
    if not callable(aggregate):
        raise ParameterError(f"aggregate must be a function, got {type(aggregate).__name__}")
    mse = rms(y=y, frame_length=frame_length, hop_length=hop_length)
    db: np.ndarray = amplitude_to_db(mse[..., 0, :], ref=ref, top_db=None)
    if db.ndim > 1:
        db = np.apply_over_axes(aggregate, db, range(db.ndim - 1))
        db = np.squeeze(db, axis=tuple(range(db.ndim - 1)))
    return db > -top_db  # type: ignore[no-any-return]


@librosa_api
def trim(
    y: np.ndarray,
    *,
    top_db: float = 60,
    ref: float | Callable[..., Any] = np.max,
    frame_length: int = N_FFT,
    hop_length: int = 512,
    aggregate: Callable[..., Any] = np.max,
) -> tuple[np.ndarray, np.ndarray]:
    """``librosa.effects.trim``: the signal without its leading and trailing
    silence, and the ``[start, end]`` sample interval kept."""
    non_silent = _nonsilent(y, frame_length, hop_length, top_db, ref, aggregate)
    nonzero = np.flatnonzero(non_silent)
    if nonzero.size > 0:
        start = int(nonzero[0]) * hop_length
        end = min(y.shape[-1], (int(nonzero[-1]) + 1) * hop_length)
    else:
        start, end = 0, 0
    return y[..., start:end], np.asarray([start, end])


@librosa_api
def split(
    y: np.ndarray,
    *,
    top_db: float = 60,
    ref: float | Callable[..., Any] = np.max,
    frame_length: int = N_FFT,
    hop_length: int = 512,
    aggregate: Callable[..., Any] = np.max,
) -> np.ndarray:
    """``librosa.effects.split``: ``[shape=(m, 2)]`` sample intervals of the
    non-silent stretches."""
    non_silent = _nonsilent(y, frame_length, hop_length, top_db, ref, aggregate)
    edges = [np.flatnonzero(np.diff(non_silent.astype(int))) + 1]
    if non_silent[0]:
        edges.insert(0, np.array([0]))
    if non_silent[-1]:
        edges.append(np.array([len(non_silent)]))
    samples = (np.concatenate(edges) * hop_length).astype(int)
    return np.minimum(samples, y.shape[-1]).reshape((-1, 2))  # type: ignore[no-any-return]
