"""Drop-in accelerated subset of librosa.

``import agl_fast.compat.librosa as librosa`` gives the functions below with
librosa's own signatures and defaults, computed by agl-fast. Anything else
raises :class:`agl_fast.exceptions.NotAcceleratedError` naming the function,
so a missing piece is never silently served by something different.

Provided: ``load``, ``stft``, ``power_to_db``, ``amplitude_to_db``,
``feature.melspectrogram``, ``feature.rms``, ``feature.spectral_flatness``,
``filters.mel``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import features as _f
from . import feature, filters
from ._missing import missing

__all__ = ["amplitude_to_db", "feature", "filters", "load", "power_to_db", "stft"]


def stft(
    y: np.ndarray,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    dtype: Any = None,
    pad_mode: str = "constant",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``librosa.stft``: complex STFT ``[shape=(..., 1 + n_fft // 2, t)]``."""
    if out is not None:
        raise _unsupported("stft", "out")
    S = _f.stft(
        y,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=window,
        center=center,
        pad_mode=pad_mode,
    )
    return S if dtype is None else S.astype(dtype)


def power_to_db(
    S: np.ndarray,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
) -> np.ndarray:
    """``librosa.power_to_db`` over the whole array."""
    return _f.power_to_db(S, ref=ref, amin=amin, top_db=top_db)


def amplitude_to_db(
    S: np.ndarray,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
) -> np.ndarray:
    """``librosa.amplitude_to_db`` over the whole array."""
    return _f.amplitude_to_db(S, ref=ref, amin=amin, top_db=top_db)


def load(
    path: Any,
    *,
    sr: float | None = 22050,
    mono: bool = True,
    offset: float = 0.0,
    duration: float | None = None,
    dtype: Any = np.float32,
    res_type: str = "soxr_hq",
) -> tuple[np.ndarray, int]:
    """``librosa.load`` decoded and resampled in Rust: ``(y, sr)`` with ``y``
    ``[shape=(n,)]`` (mono) or ``[shape=(channels, n)]``. ``res_type`` maps
    onto agl-fast's resampler presets (``soxr_vhq`` -> ``vhq``, ``soxr_lq``
    / ``fft`` / ``kaiser_fast`` -> ``fast``, anything else -> ``hq``)."""
    from ... import audio

    preset = {"soxr_vhq": "vhq", "soxr_lq": "fast", "kaiser_fast": "fast", "fft": "fast"}
    rate = None if sr is None else int(sr)
    if sr is not None and rate != sr:
        raise _unsupported("load", f"sr={sr} (a non-integer rate)")
    y, out_sr = audio.load(
        path,
        sr=rate,
        mono=mono,
        offset=offset,
        duration=duration,
        res_type=preset.get(res_type, "hq"),
    )
    return y.astype(dtype, copy=False), out_sr


def _unsupported(fn: str, arg: str) -> Exception:
    from ...exceptions import ParameterError

    return ParameterError(f"agl_fast.compat.librosa.{fn} does not support the {arg!r} argument")


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
