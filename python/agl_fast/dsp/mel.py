"""Mel filterbanks and mel spectrograms, as librosa's and Kaldi's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _native
from .._internal.args import array, flag, opt_real, real
from .._internal.batch import Output, prepare_mono, run
from .._internal.config import resolve_threads
from ..exceptions import ParameterError, ShapeError
from .db import _db_ref
from .stft import Window, is_double, pad_outside, resolve_window, spectrogram, window_length

__all__ = ["kaldi_mel_filterbank", "logmel", "mel_filterbank", "melspectrogram"]


def mel_filterbank(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = "slaney",
) -> np.ndarray:
    """Mel filterbank, as ``librosa.filters.mel``.

    Parameters
    ----------
    sr : float > 0
        Sample rate in Hz.
    n_fft : int > 0
        FFT length.
    n_mels : int > 0
        Number of bands.
    fmin, fmax : float
        Band edges in Hz; ``fmax=None`` means ``sr / 2``.
    htk : bool
        HTK mel scale instead of Slaney's.
    norm : {'slaney', None} or float
        ``'slaney'`` divides each triangle by its width (area
        normalisation); a number p scales each row to unit Lp norm.

    Returns
    -------
    np.ndarray [shape=(n_mels, 1 + n_fft // 2), dtype=float32]
    """
    return _native.mel_filterbank(
        real("sr", sr),
        n_fft,
        n_mels,
        real("fmin", fmin),
        opt_real("fmax", fmax),
        flag("htk", htk),
        norm,
    )


def kaldi_mel_filterbank(
    *, sr: float, n_fft: int, n_mels: int = 128, fmin: float = 0.0, fmax: float = 0.0
) -> np.ndarray:
    """Kaldi triangular mel banks, as ``torchaudio.compliance.kaldi.get_mel_banks``
    (no VTLN), with the zero column EfficientAT appends for the Nyquist bin.

    Parameters
    ----------
    sr : float
        Sample rate in Hz.
    n_fft : int
        FFT length (Kaldi's padded window size).
    n_mels : int
        Number of bands.
    fmin : float
        Low edge in Hz.
    fmax : float
        High edge in Hz; ``<= 0`` counts back from Nyquist as in Kaldi.

    Returns
    -------
    np.ndarray [shape=(n_mels, 1 + n_fft // 2), dtype=float32]
        Mel scale ``1127 ln(1 + f / 700)``, unnormalised triangles.
    """
    return _native.kaldi_mel_filterbank(
        real("sr", sr), n_fft, n_mels, real("fmin", fmin), real("fmax", fmax)
    )


def _mel_native(y: Any, allow_copy: bool, output: Output, n_threads: int | None, **kw: Any) -> Any:
    """One native mel-spectrogram call (optionally in dB) shared by
    :func:`melspectrogram` and :func:`logmel`."""
    y, center, pad_mode = pad_outside(y, kw["n_fft"], kw["center"], kw["pad_mode"])
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    fmax = kw["fmax"]
    kw.update(
        center=center,
        pad_mode=pad_mode,
        sr=real("sr", kw["sr"]),
        window=resolve_window(kw["window"], window_length(kw["n_fft"], kw["win_length"])),
        power=real("power", kw["power"]),
        fmin=real("fmin", kw["fmin"]),
        fmax=opt_real("fmax", fmax),
        htk=flag("htk", kw["htk"]),
    )
    n_mels = kw["n_mels"]
    if n_mels is None:
        raise ParameterError("n_mels must be a positive integer, got None")
    return run(
        _native.melspectrogram,
        prep,
        lambda t: (n_mels, t),
        output,
        n_threads=resolve_threads(n_threads),
        **kw,
    )


def melspectrogram(
    y: Any = None,
    *,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = "slaney",
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Mel spectrogram, as ``librosa.feature.melspectrogram``.

    Parameters
    ----------
    y : audio (see :func:`stft`) or None
        Audio at ``sr`` Hz.
    S : np.ndarray [shape=(..., 1 + n_fft // 2, t)] or None
        A precomputed spectrogram used instead of ``y``.
    sr : float
        Sample rate in Hz.
    n_fft, hop_length, win_length, window, center, pad_mode
        As in :func:`stft`.
    power : float > 0
        Exponent of the magnitude (2 = power).
    n_mels, fmin, fmax, htk, norm
        As in :func:`mel_filterbank`.

    Returns
    -------
    np.ndarray [shape=(..., n_mels, t), dtype=float32 or float64]
        float64 for a float64 numpy array (librosa: float64 spectrogram, float32 basis).
    """
    mel: dict[str, Any] = {"n_mels": n_mels, "fmin": fmin, "fmax": fmax, "htk": htk, "norm": norm}
    frame: dict[str, Any] = {
        "n_fft": n_fft,
        "hop_length": hop_length,
        "win_length": win_length,
        "window": window,
        "center": center,
        "pad_mode": pad_mode,
    }
    if S is not None:
        S = array("S", S)
        if S.ndim < 2:
            raise ShapeError(f"S must be a spectrogram [..., freq, t], got shape {S.shape}")
        basis = mel_filterbank(sr=sr, n_fft=2 * (S.shape[-2] - 1), **mel)
        return np.einsum("...ft,mf->...mt", S, basis, optimize=True)
    if y is None:
        raise ParameterError("melspectrogram needs audio y or a spectrogram S")
    if is_double(y) and isinstance(output, str) and output in ("auto", "numpy"):
        # librosa's float64 path: a float64 power spectrogram projected on
        # the float32 mel basis.
        P = spectrogram(y, **frame, power=power, n_threads=n_threads, allow_copy=allow_copy)
        basis = mel_filterbank(sr=sr, n_fft=n_fft, **mel)
        return np.einsum("...ft,mf->...mt", P, basis, optimize=True)
    return _mel_native(y, allow_copy, output, n_threads, sr=sr, power=power, **frame, **mel)


def logmel(
    y: Any,
    *,
    sr: float = 22050,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = "slaney",
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Log-mel spectrogram in one pass: ``power_to_db(melspectrogram(y))``
    with ``ref`` (a number or ``np.max``) and ``top_db`` applied **per clip**.

    Parameters are those of :func:`melspectrogram` and :func:`power_to_db`.

    Returns
    -------
    np.ndarray [shape=(..., n_mels, t), dtype=float32]
        Decibels.
    """
    return _mel_native(
        y,
        allow_copy,
        output,
        n_threads,
        sr=sr,
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
        to_db=True,
        db_ref=_db_ref(ref),
        amin=real("amin", amin),
        top_db=opt_real("top_db", top_db),
    )
