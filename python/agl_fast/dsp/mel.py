"""Mel filterbanks and mel spectrograms, as librosa's and Kaldi's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _native
from .._internal.args import array, opt_real, real
from .._internal.batch import Output, prepare_mono, run
from .._internal.config import resolve_threads
from ..exceptions import ParameterError, ShapeError
from .db import resolve_db_ref
from .params import CENTER, MEL_NORM, N_FFT, N_MELS, PAD_MODE, WINDOW, MelParams, StftParams
from .stft import Window, is_double, pad_signal, spectrogram_double

__all__ = ["kaldi_mel_filterbank", "logmel", "mel_filterbank", "melspectrogram"]


def mel_filterbank(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = N_MELS,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = MEL_NORM,
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
    mel = MelParams(sr=sr, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm)
    return _native.mel_filterbank(n_fft, mel)


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


def _mel_native(
    y: Any,
    allow_copy: bool,
    output: Output,
    n_threads: int | None,
    frame: _native.Framing,
    mel: MelParams,
    power: float,
    db: dict[str, Any] | None = None,
) -> Any:
    """One native mel-spectrogram call (in dB when ``db`` is given) shared
    by :func:`melspectrogram` and :func:`logmel`."""
    y, frame = pad_signal(y, frame)
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    return run(
        _native.melspectrogram,
        prep,
        lambda t: (mel.n_mels, t),
        output,
        framing=frame,
        mel=mel,
        power=real("power", power),
        db=db,
        n_threads=resolve_threads(n_threads),
    )


def melspectrogram(
    y: Any = None,
    *,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = N_FFT,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Window = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    power: float = 2.0,
    n_mels: int = N_MELS,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = MEL_NORM,
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
    if S is not None:
        S = array("S", S)
        if S.ndim < 2:
            raise ShapeError(f"S must be a spectrogram [..., freq, t], got shape {S.shape}")
        basis = mel_filterbank(sr=sr, n_fft=2 * (S.shape[-2] - 1), **mel)
        return np.einsum("...ft,mf->...mt", S, basis, optimize=True)
    if y is None:
        raise ParameterError("melspectrogram needs audio y or a spectrogram S")
    frame: _native.Framing = StftParams(n_fft, hop_length, win_length, window, center, pad_mode)
    if is_double(y) and isinstance(output, str) and output in ("auto", "numpy"):
        # librosa's float64 path: a float64 power spectrogram projected on
        # the float32 mel basis, here in one double-precision pass.
        y, frame = pad_signal(y, frame)
        return spectrogram_double(
            y, frame, power, n_threads, allow_copy, mel=MelParams(sr=sr, **mel)
        )
    return _mel_native(
        y, allow_copy, output, n_threads, frame, MelParams(sr=sr, **mel), power=power
    )


def logmel(
    y: Any,
    *,
    sr: float = 22050,
    n_fft: int = N_FFT,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Window = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    power: float = 2.0,
    n_mels: int = N_MELS,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = MEL_NORM,
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
    frame = StftParams(n_fft, hop_length, win_length, window, center, pad_mode)
    mel = MelParams(sr=sr, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm)
    db = {
        "db_ref": resolve_db_ref(ref),
        "amin": real("amin", amin),
        "top_db": opt_real("top_db", top_db),
    }
    return _mel_native(y, allow_copy, output, n_threads, frame, mel, power=power, db=db)
