"""Spectral and binaural features with librosa's names, defaults and shapes.

Every function takes one clip or a batch (see :mod:`agl_fast._batch` for the
accepted inputs and the output that each gives) and runs in parallel in the
Rust core with the GIL released. Results are identical for any thread count
and identical to calling the function on one clip at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import _native
from ._batch import Output, prepare_mono, prepare_stereo, run, to_float32
from ._config import resolve_threads
from .exceptions import ParameterError, ShapeError

__all__ = [
    "amplitude_to_db",
    "ipd_features",
    "kaldi_mel_filterbank",
    "logmel",
    "mel_filterbank",
    "melspectrogram",
    "n_frames",
    "power_to_db",
    "spectrogram",
    "stft",
]

Window = str | np.ndarray


def _window(window: Window) -> Any:
    if isinstance(window, str):
        return window
    if isinstance(window, tuple):
        raise ParameterError(f"window tuples are not supported, got window={window!r}")
    w = np.ascontiguousarray(np.asarray(window, dtype=np.float32))
    if w.ndim != 1:
        raise ParameterError(f"window array must be 1-D, got shape {w.shape}")
    return w


def n_frames(
    n_samples: int, *, n_fft: int = 2048, hop_length: int | None = None, center: bool = True
) -> int:
    """Number of STFT frames librosa produces for ``n_samples`` samples.

    Parameters
    ----------
    n_samples : int
        Signal length in samples.
    n_fft, hop_length, center
        As in :func:`stft`.

    Returns
    -------
    int
        ``1 + (n_samples + 2 * (n_fft // 2) * center - n_fft) // hop_length``.
    """
    hop = hop_length if hop_length is not None else n_fft // 4
    if hop < 1 or n_fft < 1:
        raise ParameterError(f"n_fft and hop_length must be >= 1, got {n_fft}, {hop}")
    padded = n_samples + (2 * (n_fft // 2) if center else 0)
    if n_samples < 1 or padded < n_fft:
        raise ShapeError(f"n_fft={n_fft} is too large for an input signal of length={n_samples}")
    return 1 + (padded - n_fft) // hop


def stft(
    y: Any,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Short-time Fourier transform, as ``librosa.stft``.

    Parameters
    ----------
    y : np.ndarray [shape=(..., n)], list of arrays, or Arrow list<float32>
        Audio. Leading axes of an array are batch axes.
    n_fft : int > 0
        FFT length in samples.
    hop_length : int > 0 or None
        Samples between frames; default ``win_length // 4``.
    win_length : int <= n_fft or None
        Window length; default ``n_fft``. The window is zero-padded to
        ``n_fft``, centred.
    window : str or np.ndarray
        ``'hann'`` (periodic, librosa's default), ``'hann_symmetric'``,
        ``'hamming'``, ``'hamming_symmetric'``, ``'rectangular'``, or an array
        of ``win_length`` coefficients.
    center : bool
        Pad ``n_fft // 2`` samples on both sides so frame ``t`` is centred at
        ``t * hop_length``.
    pad_mode : {'constant', 'reflect'}
        Padding when ``center`` (librosa's default is ``'constant'``).
    n_threads : int or None
        Worker threads; default from :func:`agl_fast.set_num_threads`,
        ``AGL_FAST_NUM_THREADS`` or the CPU count.
    output : {'auto', 'numpy', 'list', 'padded'}
        Result container (see :mod:`agl_fast._batch`); complex results have
        no Arrow form.
    allow_copy : bool
        Allow copying a non-float32 or non-contiguous input.

    Returns
    -------
    np.ndarray [shape=(..., 1 + n_fft // 2, t), dtype=complex64]
        ``t = 1 + (n + 2 * (n_fft // 2) * center - n_fft) // hop_length``.

    Examples
    --------
    >>> import numpy as np, agl_fast
    >>> y = np.sin(2 * np.pi * 440 * np.arange(22050) / 22050).astype(np.float32)
    >>> agl_fast.stft(y, n_fft=1024).shape
    (513, 87)
    """
    if output == "arrow":
        raise ParameterError(
            "stft returns complex values, which have no Arrow output; use output='list' or 'padded'"
        )
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    nf = n_fft // 2 + 1
    return run(
        _native.stft,
        prep,
        lambda t: (nf, t),
        output,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=_window(window),
        center=center,
        pad_mode=pad_mode,
        n_threads=resolve_threads(n_threads),
    )


def spectrogram(
    y: Any,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """``|stft(y)| ** power``: magnitude (``power=1``) or power (``power=2``).

    Parameters are those of :func:`stft` plus ``power`` (> 0).

    Returns
    -------
    np.ndarray [shape=(..., 1 + n_fft // 2, t), dtype=float32]
    """
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    nf = n_fft // 2 + 1
    return run(
        _native.spectrogram,
        prep,
        lambda t: (nf, t),
        output,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=_window(window),
        center=center,
        pad_mode=pad_mode,
        power=float(power),
        n_threads=resolve_threads(n_threads),
    )


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
        float(sr),
        int(n_fft),
        int(n_mels),
        float(fmin),
        None if fmax is None else float(fmax),
        bool(htk),
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
        float(sr), int(n_fft), int(n_mels), float(fmin), float(fmax)
    )


def _db_ref(ref: float | Callable[..., Any]) -> float | None:
    """``None`` for a per-item maximum (``np.max``/``np.amax``)."""
    if callable(ref):
        if ref in (np.max, np.amax, max):
            return None
        raise ParameterError(
            "ref must be a number or np.max for the native path, got a callable "
            f"{getattr(ref, '__name__', ref)!r}"
        )
    return float(ref)


def _mel_native(y: Any, allow_copy: bool, output: Output, n_threads: int | None, **kw: Any) -> Any:
    """One native mel-spectrogram call (optionally in dB) shared by
    :func:`melspectrogram` and :func:`logmel`."""
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    fmax = kw["fmax"]
    kw.update(
        sr=float(kw["sr"]),
        window=_window(kw["window"]),
        power=float(kw["power"]),
        fmin=float(kw["fmin"]),
        fmax=None if fmax is None else float(fmax),
    )
    n_mels = kw["n_mels"]
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
    np.ndarray [shape=(..., n_mels, t), dtype=float32]
    """
    if S is not None:
        basis = mel_filterbank(
            sr=sr,
            n_fft=2 * (np.shape(S)[-2] - 1),
            n_mels=n_mels,
            fmin=fmin,
            fmax=fmax,
            htk=htk,
            norm=norm,
        )
        return np.einsum("...ft,mf->...mt", S, basis, optimize=True)
    if y is None:
        raise ParameterError("melspectrogram needs audio y or a spectrogram S")
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
    )


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
        amin=float(amin),
        top_db=None if top_db is None else float(top_db),
    )


def _to_db(
    S: Any,
    ref: float | Callable[..., Any],
    amin: float,
    top_db: float | None,
    per_item: bool,
    amplitude: bool,
    n_threads: int | None,
) -> np.ndarray:
    if np.iscomplexobj(S):
        S = np.abs(S)
    a = to_float32(S, what="S")
    if a.ndim == 0:
        raise ShapeError("S must be an array, got a scalar")
    if a.size == 0:
        raise ShapeError(f"S is empty (shape {a.shape})")
    if callable(ref) and ref not in (np.max, np.amax, max):
        r: float | None = float(ref(np.abs(a)))
    else:
        r = _db_ref(ref)
    if amin <= 0:
        raise ParameterError(f"amin must be strictly positive, got amin={amin}")
    rows = a.reshape(a.shape[0], -1) if (per_item and a.ndim > 1) else a.reshape(1, -1)
    out = _native.to_db(
        rows,
        r,
        float(amin),
        None if top_db is None else float(top_db),
        amplitude,
        resolve_threads(n_threads),
    )
    return out.reshape(a.shape)


def power_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
    per_item: bool = False,
    n_threads: int | None = None,
) -> np.ndarray:
    """Power to decibels, as ``librosa.power_to_db``.

    ``10 * log10(max(amin, S)) - 10 * log10(max(amin, ref))``, then clipped
    to ``max - top_db``.

    Parameters
    ----------
    S : np.ndarray
        Power values.
    ref : float or callable
        Reference power; ``np.max`` uses the maximum.
    amin : float > 0
        Floor.
    top_db : float >= 0 or None
        Dynamic range kept below the maximum.
    per_item : bool
        Treat axis 0 as a batch: ``ref=np.max`` and ``top_db`` use each item's
        own maximum instead of the whole array's (librosa's behaviour).

    Returns
    -------
    np.ndarray [shape=S.shape, dtype=float32]
    """
    return _to_db(S, ref, amin, top_db, per_item, False, n_threads)


def amplitude_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
    per_item: bool = False,
    n_threads: int | None = None,
) -> np.ndarray:
    """Amplitude to decibels, as ``librosa.amplitude_to_db``:
    ``power_to_db(|S|**2, ref=ref**2, amin=amin**2, top_db=top_db)``.

    Parameters are those of :func:`power_to_db` (``amin`` default ``1e-5``).

    Returns
    -------
    np.ndarray [shape=S.shape, dtype=float32]
    """
    return _to_db(S, ref, amin, top_db, per_item, True, n_threads)


def ipd_features(
    y: Any,
    *,
    sr: float = 32000,
    n_fft: int = 1024,
    hop_length: int = 320,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "reflect",
    n_mels: int = 128,
    fmin: float = 50.0,
    fmax: float | None = 14000.0,
    htk: bool = False,
    norm: str | float | None = "slaney",
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Mel-projected interaural phase difference features.

    With ``L`` and ``R`` the STFTs of the two channels and
    ``IPD = angle(R) - angle(L)``, returns ``mel @ cos(IPD)`` and
    ``mel @ sin(IPD)``, computed from the normalised cross-spectrum
    ``R conj(L) / (|R| |L|)`` (no trigonometric call per bin). A bin that is
    exactly zero has phase 0, as ``atan2(0, 0)`` gives.

    Parameters
    ----------
    y : np.ndarray [shape=(2, n) or (batch, 2, n)], list of such, or Arrow
        Stereo audio, channel 0 = left.
    Other parameters are those of :func:`stft` and :func:`mel_filterbank`.

    Returns
    -------
    np.ndarray [shape=(..., 2, n_mels, t), dtype=float32]
        Channel 0 is cos, channel 1 is sin.
    """
    prep = prepare_stereo(y, allow_copy=allow_copy)
    return run(
        _native.ipd,
        prep,
        lambda t: (2, n_mels, t),
        output,
        sr=float(sr),
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=_window(window),
        center=center,
        pad_mode=pad_mode,
        n_mels=n_mels,
        fmin=float(fmin),
        fmax=None if fmax is None else float(fmax),
        htk=htk,
        norm=norm,
        n_threads=resolve_threads(n_threads),
    )
