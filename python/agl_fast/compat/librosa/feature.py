"""``librosa.feature`` subset: ``melspectrogram``, ``mfcc``, ``rms``,
``spectral_flatness``.

Audio (``y=``) goes through the Rust kernels; a precomputed spectrogram
(``S=``) is reduced with numpy, as librosa does, in the input's precision.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import numpy as np

from ... import features as _f
from ..._internal import args as _args
from ...dsp.params import CENTER as _CENTER
from ...dsp.params import N_FFT as _N_FFT
from ...dsp.params import PAD_MODE as _PAD_MODE
from ...dsp.params import WINDOW as _WINDOW
from ...exceptions import ParameterError
from . import _accept, _version
from ._chroma import chroma_stft, spectral_contrast
from ._errors import HandOver, librosa_api
from ._fallback import module_getattr
from ._spectral import (
    spectral_bandwidth,
    spectral_centroid,
    spectral_rolloff,
    zero_crossing_rate,
)
from ._utility import delta
from .filters import mel as mel_filters

__all__ = [
    "chroma_stft",
    "delta",
    "melspectrogram",
    "mfcc",
    "rms",
    "spectral_bandwidth",
    "spectral_centroid",
    "spectral_contrast",
    "spectral_flatness",
    "spectral_rolloff",
    "zero_crossing_rate",
]


def _spectrum(S: Any) -> np.ndarray:
    S = np.asarray(S)
    if S.ndim < 2:
        raise ParameterError(
            f"S must have at least 2 dimensions [..., freq, time], got shape {S.shape}"
        )
    return S


@librosa_api
def melspectrogram(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = _N_FFT,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = _WINDOW,
    center: bool = _CENTER,
    pad_mode: str = _PAD_MODE,
    power: float = 2.0,
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.feature.melspectrogram``: ``[shape=(..., n_mels, t)]``;
    ``kwargs`` are those of :func:`.filters.mel` (``n_mels``, ``fmin``,
    ``fmax``, ``htk``, ``norm``, ``dtype``), others go to librosa.

    float64 audio gives float64 (as librosa: a float64 power spectrogram
    projected on the float32 mel basis)."""
    from . import filters

    unknown = sorted(set(kwargs) - set(_MEL_DEFAULTS))
    if unknown:
        raise HandOver(f"filter keywords {unknown} that librosa.filters.mel does not name")
    mel = {**_MEL_DEFAULTS, **kwargs}
    power, center = _accept.real("power", power), _accept.flag(center)
    _args.dtype("dtype", mel["dtype"])
    if S is not None:
        S = _spectrum(S)
        basis = filters.mel(sr=sr, n_fft=2 * (S.shape[-2] - 1), **mel)
        return np.einsum("...ft,mf->...mt", S, basis, optimize=True)  # type: ignore[no-any-return]
    if y is None:
        raise ParameterError("Input signal must be provided: give y or S")

    y = _accept.valid_audio(y)
    return _f.melspectrogram(  # type: ignore[no-any-return]
        y,
        sr=sr,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=window,
        center=center,
        pad_mode=pad_mode,
        power=power,
        n_mels=_accept.count("n_mels", mel["n_mels"]),
        fmin=_accept.real("fmin", mel["fmin"]),
        fmax=_accept.opt_real("fmax", mel["fmax"]),
        htk=_accept.flag(mel["htk"]),
        norm=mel["norm"],
    )


#: librosa.filters.mel's keyword defaults, from its signature.
_MEL_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(mel_filters).parameters.items()
    if p.default is not p.empty
}


@functools.cache
def _dct2_ortho(n: int) -> np.ndarray:
    """The orthonormal DCT-II matrix ``[n, n]`` (scipy's ``dct(type=2,
    norm='ortho')`` along the first axis is ``D @ x``)."""
    k = np.arange(n)[:, None]
    m = np.arange(n)[None, :]
    D = np.cos(np.pi * k * (2 * m + 1) / (2 * n)) * np.sqrt(2.0 / n)
    D[0] /= np.sqrt(2.0)
    D.setflags(write=False)
    return D


@librosa_api
def mfcc(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_mfcc: int = 20,
    dct_type: int = 2,
    norm: str | None = "ortho",
    lifter: float = 0,
    mel_norm: Any = "slaney",
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.feature.mfcc``: ``[shape=(..., n_mfcc, t)]``.

    Without ``S``, the log-power mel spectrogram is
    ``power_to_db(melspectrogram(y=y, sr=sr, norm=mel_norm, **kwargs))``.
    The DCT of librosa's default (type 2, ``norm='ortho'``) is a cached
    matrix product; other types and norms use ``scipy.fft.dct``.
    """
    from . import power_to_db

    lifter = _accept.real("lifter", lifter)
    if mel_norm is not None and not (isinstance(mel_norm, str) and mel_norm == "slaney"):
        p = _accept.real("mel_norm", mel_norm)
        if not p > 0:
            raise ParameterError(f"mel_norm must be 'slaney', None or a p > 0, got mel_norm={p}")
    if S is None:
        S = power_to_db(melspectrogram(y=y, sr=sr, norm=mel_norm, **kwargs))
    S = _spectrum(S)
    if (
        isinstance(n_mfcc, (bool, np.bool_))
        or not isinstance(n_mfcc, (int, np.integer))
        or n_mfcc < 1
    ):
        raise ParameterError(f"n_mfcc={n_mfcc!r} must be a positive integer")
    if (
        isinstance(dct_type, (bool, np.bool_))
        or not isinstance(dct_type, (int, np.integer))
        or dct_type not in (1, 2, 3, 4)
    ):
        raise ParameterError(f"dct_type={dct_type!r} must be 1, 2, 3 or 4")
    norm = _args.opt_text("norm", norm)
    if dct_type == 2 and norm == "ortho":
        D = _dct2_ortho(S.shape[-2])[:n_mfcc].astype(
            np.result_type(S.dtype, np.float32), copy=False
        )
        M = np.einsum("cf,...ft->...ct", D, S, optimize=True)
    else:
        try:
            from scipy.fft import dct
        except ImportError as exc:  # pragma: no cover - scipy comes with the tests
            raise ParameterError(
                f"mfcc with dct_type={dct_type}, norm={norm!r} needs scipy"
            ) from exc
        try:
            M = dct(S, axis=-2, type=dct_type, norm=norm)[..., :n_mfcc, :]
        except (ValueError, TypeError, NotImplementedError) as exc:
            raise ParameterError(f"dct_type={dct_type!r}, norm={norm!r}: {exc}") from exc
    if lifter > 0:
        shape = [1] * M.ndim
        shape[-2] = n_mfcc
        LI = np.sin(np.pi * np.arange(1, 1 + n_mfcc, dtype=M.dtype) / lifter).reshape(shape)
        return M * (1 + (lifter / 2) * LI)  # type: ignore[no-any-return]
    if lifter != 0:
        raise ParameterError(f"MFCC lifter={lifter} must be a non-negative number")
    return M  # type: ignore[no-any-return]


@librosa_api
def rms(
    *,
    y: np.ndarray | None = None,
    S: np.ndarray | None = None,
    frame_length: int = _N_FFT,
    hop_length: int = 512,
    center: bool = _CENTER,
    pad_mode: str = _PAD_MODE,
    dtype: Any = np.float32,
) -> np.ndarray:
    """``librosa.feature.rms``: ``[shape=(..., 1, t)]``.

    With ``S`` (a magnitude spectrogram of ``frame_length``-sample frames)
    the energy is Parseval's sum with the DC and Nyquist bins halved."""
    from ... import quality

    _args.dtype("dtype", dtype)
    if y is not None:
        y = _accept.valid_audio(y)
        out = quality.rms(
            y, frame_length=frame_length, hop_length=hop_length, center=center, pad_mode=pad_mode
        )
        return np.asarray(out, dtype=dtype)
    if S is None:
        raise ParameterError("Either `y` or `S` must be input.")
    S = _spectrum(S)
    if S.shape[-2] != frame_length // 2 + 1:
        raise ParameterError(
            f"Since S.shape[-2] is {S.shape[-2]}, frame_length is expected to be "
            f"{S.shape[-2] * 2 - 2} or {S.shape[-2] * 2 - 1}; found {frame_length}"
        )
    x = np.abs(S) ** 2
    x[..., 0, :] *= 0.5
    if frame_length % 2 == 0:
        x[..., -1, :] *= 0.5
    power = 2 * np.sum(x, axis=-2, keepdims=True) / frame_length**2
    return np.sqrt(power)  # type: ignore[no-any-return]


@librosa_api
def spectral_flatness(
    *,
    y: np.ndarray | None = None,
    S: np.ndarray | None = None,
    n_fft: int = _N_FFT,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = _WINDOW,
    center: bool = _CENTER,
    pad_mode: str = _PAD_MODE,
    amin: float = 1e-10,
    power: float = 2.0,
) -> np.ndarray:
    """``librosa.feature.spectral_flatness``: ``[shape=(..., 1, t)]``;
    ``S`` is a magnitude spectrogram."""
    from ... import quality

    amin = _accept.real("amin", amin)
    power = _accept.real("power", power)
    if not (np.isfinite(amin) and amin > 0):
        raise ParameterError(f"amin={amin} must be strictly positive")
    if S is None:
        if y is None:
            raise ParameterError("Input signal must be provided: give y or S")

        y = _accept.valid_audio(y)
        return quality.spectral_flatness(  # type: ignore[no-any-return]
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
    S = _spectrum(S)
    if not np.isrealobj(S):
        raise ParameterError("Spectral flatness is only defined with real-valued input")
    if np.any(S < 0):
        raise ParameterError("Spectral flatness is only defined with non-negative energies")
    S_thresh = np.maximum(amin, S**power)
    gmean = np.exp(np.mean(np.log(S_thresh), axis=-2, keepdims=True))
    amean = np.mean(S_thresh, axis=-2, keepdims=True)
    return gmean / amean  # type: ignore[no-any-return]


__getattr__ = module_getattr("feature", {})

#: The 0.11 form of ``mfcc`` (with ``mel_norm``), whatever the series.
mfcc_with_mel_norm = mfcc

# librosa 0.10's form of the names whose signature differs (``mfcc`` has no
# ``mel_norm``, which 0.11 added: the mel spectrogram always has librosa's
# default ``"slaney"`` normalisation); served when 0.10 is installed.
if not _version.at_least(0, 11):

    @librosa_api
    def mfcc(  # type: ignore[no-redef]
        *,
        y: np.ndarray | None = None,
        sr: float = 22050,
        S: np.ndarray | None = None,
        n_mfcc: int = 20,
        dct_type: int = 2,
        norm: str | None = "ortho",
        lifter: float = 0,
        **kwargs: Any,
    ) -> np.ndarray:
        """``librosa.feature.mfcc`` of librosa 0.10: ``[shape=(..., n_mfcc, t)]``
        (see :func:`mfcc_with_mel_norm`)."""
        if "mel_norm" in kwargs:
            raise HandOver("mel_norm= is a filter keyword in librosa 0.10")
        # the 0.11 form, unwrapped so that the call is counted once
        later = mfcc_with_mel_norm.__wrapped__  # type: ignore[attr-defined]
        return later(  # type: ignore[no-any-return]
            y=y, sr=sr, S=S, n_mfcc=n_mfcc, dct_type=dct_type, norm=norm, lifter=lifter, **kwargs
        )
