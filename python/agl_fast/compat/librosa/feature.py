"""``librosa.feature`` subset: ``melspectrogram``, ``rms``, ``spectral_flatness``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import features as _f
from ...exceptions import ParameterError
from ._missing import missing

__all__ = ["melspectrogram", "rms", "spectral_flatness"]


def melspectrogram(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Any = "slaney",
    dtype: Any = np.float32,
) -> np.ndarray:
    """``librosa.feature.melspectrogram``: ``[shape=(..., n_mels, t)]``."""
    M = _f.melspectrogram(
        y,
        sr=sr,
        S=S,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=window,
        center=center,
        pad_mode=pad_mode,
        power=power,
        n_mels=n_mels,
        fmin=fmin,
        fmax=fmax,
        htk=htk,
        norm=norm,
    )
    return np.asarray(M, dtype=dtype)


def rms(
    *,
    y: np.ndarray | None = None,
    S: np.ndarray | None = None,
    frame_length: int = 2048,
    hop_length: int = 512,
    center: bool = True,
    pad_mode: str = "constant",
    dtype: Any = np.float32,
) -> np.ndarray:
    """``librosa.feature.rms`` of audio: ``[shape=(..., 1, t)]``."""
    from ... import quality

    if S is not None or y is None:
        raise ParameterError(
            "agl_fast.compat.librosa.feature.rms accelerates the audio path only: give y, not S"
        )
    out = quality.rms(
        y, frame_length=frame_length, hop_length=hop_length, center=center, pad_mode=pad_mode
    )
    return np.asarray(out, dtype=dtype)


def spectral_flatness(
    *,
    y: np.ndarray | None = None,
    S: np.ndarray | None = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    amin: float = 1e-10,
    power: float = 2.0,
) -> np.ndarray:
    """``librosa.feature.spectral_flatness`` of audio: ``[shape=(..., 1, t)]``."""
    from ... import quality

    if S is not None or y is None:
        raise ParameterError(
            "agl_fast.compat.librosa.feature.spectral_flatness accelerates the audio path "
            "only: give y, not S"
        )
    return quality.spectral_flatness(
        y,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=window,
        center=center,
        pad_mode=pad_mode,
        amin=amin,
        power=power,
    )


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
