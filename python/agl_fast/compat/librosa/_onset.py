"""``librosa.onset.onset_strength`` and ``onset_strength_multi`` on
agl-fast's mel spectrogram and dB conversion.

The spectral flux after them is librosa's own arithmetic (the same numpy
operations in the same order), so the envelope equals librosa's given the
same mel spectrogram; the mel spectrogram itself agrees with librosa's to
float32 STFT rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._internal import args as _args
from ...dsp.params import CENTER, N_FFT
from ...exceptions import ParameterError
from . import _accept
from ._errors import librosa_api

__all__ = ["onset_strength", "onset_strength_multi"]


#: Largest maximum-filter size accepted (scipy's filters take a C int).
_MAX_FILTER = 2**31 - 1


def _check_channels(channels: Any) -> None:
    """Sub-band boundaries: a sequence of frequency-bin indices or slices."""
    if isinstance(channels, np.ndarray):
        if channels.ndim != 1 or channels.dtype.kind not in "iu":
            raise ParameterError(f"channels must be 1-D integer indices, got {channels.dtype}")
        channels = channels.tolist()
    if isinstance(channels, (str, bytes)) or not isinstance(channels, Sequence):
        raise ParameterError(f"channels must be a sequence, got {type(channels).__name__}")
    for c in channels:
        ok = isinstance(c, slice) or (
            isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) and c >= 0
        )
        if not ok:
            raise ParameterError(f"channels must hold bin indices >= 0 or slices, got {c!r}")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name}={value} must be a positive integer")
    return int(value)


@librosa_api
def onset_strength_multi(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = N_FFT,
    hop_length: int = 512,
    lag: int = 1,
    max_size: int = 1,
    ref: np.ndarray | None = None,
    detrend: bool = False,
    center: bool = CENTER,
    feature: Callable[..., Any] | None = None,
    aggregate: Callable[..., Any] | bool | None = None,
    channels: Sequence[int] | Sequence[slice] | np.ndarray | None = None,
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.onset.onset_strength_multi``: ``[shape=(..., channels, t)]``.

    Sub-band ``channels`` are handed to librosa (its frame-index
    aggregation); everything else runs here.
    """
    from . import feature as _feature
    from . import power_to_db
    from ._fallback import handed_over

    if feature is not None and not callable(feature):
        raise ParameterError(f"feature must be a function or None, got {type(feature).__name__}")
    n_fft, hop_length = _args.count("n_fft", n_fft), _args.count("hop_length", hop_length)
    if channels is not None:
        _check_channels(channels)
        return handed_over(  # type: ignore[no-any-return]
            "onset.onset_strength_multi", "sub-band channels"
        )(y=y, sr=sr, S=S, n_fft=n_fft, hop_length=hop_length, lag=lag, max_size=max_size,
          ref=ref, detrend=detrend, center=center, feature=feature, aggregate=aggregate,
          channels=channels, **kwargs)  # fmt: skip
    sr = _accept.real("sr", sr)
    lag = _positive_int("lag", lag)
    max_size = _positive_int("max_size", max_size)
    detrend, center = _accept.flag(detrend), _accept.flag(center)
    if feature is None:
        feature = _feature.melspectrogram
        kwargs.setdefault("fmax", 0.5 * sr)
    if aggregate is None:
        aggregate = np.mean
    if S is None:
        S = power_to_db(np.abs(feature(y=y, sr=sr, n_fft=n_fft, hop_length=hop_length, **kwargs)))
    S = np.atleast_2d(_args.array("S", S, complex_ok=True))
    if lag >= S.shape[-1]:
        raise ParameterError(f"lag={lag} must be below the number of frames ({S.shape[-1]})")
    if max_size > _MAX_FILTER:
        raise ParameterError(f"max_size={max_size} exceeds {_MAX_FILTER}")
    if ref is None:
        if max_size == 1:
            ref = S
        else:
            from scipy.ndimage import maximum_filter1d

            ref = maximum_filter1d(S, max_size, axis=-2)
    elif np.shape(ref) != S.shape:
        raise ParameterError(
            f"Reference spectrum shape {np.shape(ref)} must match input spectrum {S.shape}"
        )
    onset_env = np.maximum(0.0, S[..., lag:] - np.asarray(ref)[..., :-lag])
    if callable(aggregate):
        # librosa's util.sync over one slice of all bins, padded: the
        # aggregate over frequency, in the envelope's dtype
        out = np.empty((*onset_env.shape[:-2], 1, onset_env.shape[-1]), dtype=onset_env.dtype)
        out[..., 0, :] = aggregate(onset_env, axis=-2)
        onset_env = out
    pad_width = lag + (n_fft // (2 * hop_length) if center else 0)
    onset_env = np.pad(onset_env, [(0, 0)] * (onset_env.ndim - 1) + [(int(pad_width), 0)])
    if detrend:
        from scipy.signal import lfilter

        onset_env = lfilter([1.0, -1.0], [1.0, -0.99], onset_env, axis=-1)
    if center:
        onset_env = onset_env[..., : S.shape[-1]]
    return onset_env  # type: ignore[no-any-return]


@librosa_api
def onset_strength(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    lag: int = 1,
    max_size: int = 1,
    ref: np.ndarray | None = None,
    detrend: bool = False,
    center: bool = CENTER,
    feature: Callable[..., Any] | None = None,
    aggregate: Callable[..., Any] | bool | None = None,
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.onset.onset_strength``: ``[shape=(..., t)]`` spectral flux
    of the dB mel spectrogram."""
    if aggregate is False:
        raise ParameterError(
            "aggregate parameter cannot be False when computing full-spectrum onset strength."
        )
    env = onset_strength_multi(
        y=y, sr=sr, S=S, lag=lag, max_size=max_size, ref=ref, detrend=detrend, center=center,
        feature=feature, aggregate=aggregate, channels=None, **kwargs,
    )  # fmt: skip
    return env[..., 0, :]
