"""``librosa.feature`` spectral-shape features on agl-fast's magnitude
spectrogram (``spectral_centroid``, ``spectral_bandwidth``,
``spectral_rolloff``) and ``zero_crossing_rate`` with one pass over the
signal.

From audio, the magnitude spectrogram is agl-fast's (one Rust pass, no
complex intermediate); from ``S=``, the input itself. The reductions over
frequency follow librosa's formulas and dtypes, so the results agree with
librosa's to float rounding.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ... import features as _f
from ..._internal import args as _args
from ...dsp.params import CENTER, N_FFT, PAD_MODE, WINDOW
from ...exceptions import ParameterError
from . import _accept
from ._errors import librosa_api

__all__ = [
    "spectral_bandwidth",
    "spectral_centroid",
    "spectral_rolloff",
    "zero_crossing_rate",
]


def magnitude(
    y: Any,
    S: Any,
    n_fft: int | None,
    hop_length: int | None,
    win_length: int | None,
    window: Any,
    center: bool,
    pad_mode: str,
) -> tuple[np.ndarray, int]:
    """librosa's magnitude spectrogram of ``y`` (``[..., 1 + n_fft // 2, t]``),
    or ``S`` itself with ``n_fft`` inferred from its frequency axis."""
    if S is not None:
        S = np.asarray(S)
        if S.ndim < 2:
            raise ParameterError(f"S must be [..., freq, time], got shape {S.shape}")
        if n_fft is None or n_fft // 2 + 1 != S.shape[-2]:
            n_fft = 2 * (S.shape[-2] - 1)
        return S, int(n_fft)
    if n_fft is None:
        raise ParameterError(f"Unable to compute spectrogram with n_fft={n_fft}")
    if y is None:
        raise ParameterError("Input signal must be provided to compute a spectrogram")

    y = _accept.valid_audio(y)
    S = _f.spectrogram(
        y, n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
        center=center, pad_mode=pad_mode, power=1.0,
    )  # fmt: skip
    return S, n_fft


def _check(S: np.ndarray, what: str) -> None:
    if not np.isrealobj(S):
        raise ParameterError(f"Spectral {what} is only defined with real-valued input")
    if np.any(S < 0):
        raise ParameterError(f"Spectral {what} is only defined with non-negative energies")


def _rate(sr: Any) -> float:
    sr = _accept.real("sr", sr)
    if not (np.isfinite(sr) and sr > 0):
        raise ParameterError(f"sr={sr!r} must be a positive, finite sample rate")
    return float(sr)


def _bins(freq: Any, sr: float, n_fft: int, S: np.ndarray) -> np.ndarray:
    """The bin frequencies in Hz: ``np.fft.rfftfreq`` (librosa's
    ``fft_frequencies``) or ``freq``, checked against ``S``'s shape."""
    if freq is None:
        return np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    f = _args.array("freq", freq)
    if f.ndim == 1 and f.shape[0] != S.shape[-2]:
        raise ParameterError(f"freq has {f.shape[0]} entries for {S.shape[-2]} frequency bins")
    if f.ndim > 1:
        try:
            np.broadcast_shapes(f.shape, S.shape)
        except ValueError:
            raise ParameterError(
                f"freq of shape {f.shape} does not broadcast with S of shape {S.shape}"
            ) from None
    return f


def _frequencies(freq: Any, sr: float, n_fft: int, S: np.ndarray) -> np.ndarray:
    """Bin frequencies shaped ``[..., freq, 1]`` to broadcast with ``S``
    (``freq`` as given when it is not 1-D)."""
    f = _bins(freq, sr, n_fft, S)
    return f.reshape((1,) * (S.ndim - 2) + (-1, 1)) if f.ndim == 1 else f


def _normalize_l1(S: np.ndarray) -> np.ndarray:
    """``librosa.util.normalize(S, norm=1, axis=-2)``: columns summing to one
    (sums in float64, the result in ``S``'s dtype); a column whose sum is
    below the dtype's ``tiny`` is left as it is."""
    if not np.all(np.isfinite(S)):
        raise ParameterError("Input must be finite")
    kind = S.dtype if np.issubdtype(S.dtype, np.inexact) else np.dtype(np.float32)
    length = np.sum(np.abs(S).astype(float), axis=-2, keepdims=True)
    length[length < np.finfo(kind).tiny] = 1.0
    out = np.empty_like(S)
    out[:] = S / length
    return out


@librosa_api
def spectral_centroid(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = N_FFT,
    hop_length: int = 512,
    freq: np.ndarray | None = None,
    win_length: int | None = None,
    window: Any = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
) -> np.ndarray:
    """``librosa.feature.spectral_centroid``: ``[shape=(..., 1, t)]`` in Hz."""
    sr = _rate(sr)
    S, n_fft = magnitude(y, S, n_fft, hop_length, win_length, window, center, pad_mode)
    _check(S, "centroid")
    f = _frequencies(freq, sr, n_fft, S)
    return np.sum(f * _normalize_l1(S), axis=-2, keepdims=True)  # type: ignore[no-any-return]


@librosa_api
def spectral_bandwidth(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = N_FFT,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    freq: np.ndarray | None = None,
    centroid: np.ndarray | None = None,
    norm: bool = True,
    p: float = 2,
) -> np.ndarray:
    """``librosa.feature.spectral_bandwidth``: ``[shape=(..., 1, t)]`` in Hz."""
    sr, p, norm = _rate(sr), _accept.real("p", p), _accept.flag(norm)
    if not (np.isfinite(p) and p > 0):
        raise ParameterError(f"p={p!r} must be a positive, finite exponent")
    S, n_fft = magnitude(y, S, n_fft, hop_length, win_length, window, center, pad_mode)
    _check(S, "bandwidth")
    f = _bins(freq, sr, n_fft, S)
    normalized = None
    if centroid is None:
        # librosa's spectral_centroid of S, its normalized S kept for below
        normalized = _normalize_l1(S)
        centroid = np.sum(_frequencies(freq, sr, n_fft, S) * normalized, axis=-2, keepdims=True)
    centroid = _args.array("centroid", centroid)
    if centroid.ndim != S.ndim or centroid.shape[-2] != 1 or centroid.shape[-1] != S.shape[-1]:
        raise ParameterError(
            f"centroid must have shape [..., 1, {S.shape[-1]}] (one per frame), "
            f"got {centroid.shape}"
        )
    # |centroid - f| laid out as S ([..., freq, t], C order), in place after
    deviation = np.abs(f.reshape(-1, 1) - centroid if f.ndim == 1 else f - centroid)
    if p == 2:
        np.square(deviation, out=deviation)
    else:
        deviation **= p
    if norm:
        S = _normalize_l1(S) if normalized is None else normalized
    weighted = np.multiply(S, deviation, out=deviation if deviation.shape == S.shape else None)
    return np.sum(weighted, axis=-2, keepdims=True) ** (1.0 / p)  # type: ignore[no-any-return]


@librosa_api
def spectral_rolloff(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = N_FFT,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    freq: np.ndarray | None = None,
    roll_percent: float = 0.85,
) -> np.ndarray:
    """``librosa.feature.spectral_rolloff``: ``[shape=(..., 1, t)]`` in Hz."""
    roll_percent, sr = _accept.real("roll_percent", roll_percent), _rate(sr)
    if not 0.0 < roll_percent < 1.0:
        raise ParameterError("roll_percent must lie in the range (0, 1)")
    S, n_fft = magnitude(y, S, n_fft, hop_length, win_length, window, center, pad_mode)
    _check(S, "rolloff")
    f = _frequencies(freq, sr, n_fft, S)
    total = np.cumsum(S, axis=-2)
    threshold = np.expand_dims(roll_percent * total[..., -1, :], axis=-2)
    bins = f.reshape(-1)
    if f.ndim == S.ndim and f.shape[-1] == 1 and bins.size == S.shape[-2]:
        if bins.size < 2 or bool(np.all(bins[1:] >= bins[:-1])):
            # librosa's test is `total < threshold` (a NaN compares False
            # there, and so counts as reached).
            return _first_rolloff(~(total < threshold), bins)
    ind = np.where(total < threshold, np.nan, 1)
    return np.nanmin(ind * f, axis=-2, keepdims=True)  # type: ignore[no-any-return]


def _first_rolloff(hit: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """librosa's ``nanmin`` of the frequencies where the cumulative energy
    reaches the threshold, for frequencies that never decrease along the
    bins: the frequency of the first such bin (``hit`` ``[..., freq, t]``),
    NaN (with numpy's all-NaN warning) for a frame with none. Float64, as
    librosa's."""
    first = np.argmax(hit, axis=-2)
    out = np.asarray(bins, dtype=np.float64)[first]
    none = ~hit.any(axis=-2)
    if none.any():
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
        out[none] = np.nan
    return np.expand_dims(out, axis=-2)


#: Longest frame accepted (the centring pads by half of it on both sides).
_MAX_FRAME = 2**31


def _sign_key(y: np.ndarray, threshold: float, zero_pos: bool) -> np.ndarray:
    """What librosa's crossing stencil compares between neighbours: the sign
    bit (or the sign) of each sample, samples within ``threshold`` of zero
    counting as +0."""
    small = np.abs(y) <= threshold
    if zero_pos:
        key = np.signbit(y)
        key[small] = False
        return key
    key = np.sign(y)
    key[small] = 0
    return key


@librosa_api
def zero_crossing_rate(
    y: np.ndarray,
    *,
    frame_length: int = N_FFT,
    hop_length: int = 512,
    center: bool = CENTER,
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.feature.zero_crossing_rate``: ``[shape=(..., 1, t)]``.

    The crossings are found once over the signal and summed per frame with a
    running sum (librosa tests every frame's samples again, about
    ``frame_length / hop_length`` times each); the counts are exact
    integers, so the rates are librosa's to the last bit. A callable
    ``ref_magnitude`` other than ``np.max`` is handed to librosa.
    """
    from ._fallback import handed_over

    y = _accept.valid_audio(y)
    frame_length = _args.count("frame_length", frame_length)
    hop_length = _args.count("hop_length", hop_length)
    center = _accept.flag(center)
    if frame_length > _MAX_FRAME:
        raise ParameterError(f"frame_length={frame_length} exceeds {_MAX_FRAME} samples")
    unknown = set(kwargs) - {"threshold", "ref_magnitude", "pad", "zero_pos"}
    if unknown:
        raise ParameterError(f"zero_crossing_rate got unexpected keyword(s) {sorted(unknown)}")
    ref = kwargs.get("ref_magnitude")
    if callable(ref) and ref not in (np.max, np.amax, max):
        return handed_over(  # type: ignore[no-any-return]
            "feature.zero_crossing_rate", "a ref_magnitude function other than np.max"
        )(y, frame_length=frame_length, hop_length=hop_length, center=center, **kwargs)
    threshold = _accept.real("threshold", kwargs.get("threshold", 1e-10))
    pad = _accept.flag(kwargs.get("pad", False))
    zero_pos = _accept.flag(kwargs.get("zero_pos", True))
    if center:
        half = frame_length // 2
        y = np.pad(y, [(0, 0)] * (y.ndim - 1) + [(half, half)], mode="edge")
    n = y.shape[-1]
    if n < frame_length:
        raise ParameterError(f"Input is too short (n={n}) for frame_length={frame_length}")
    frames = 1 + (n - frame_length) // hop_length
    covered = y[..., : (frames - 1) * hop_length + frame_length]
    if ref is not None:
        scale = (
            float(np.max(np.abs(covered))) if callable(ref) else _accept.real("ref_magnitude", ref)
        )
        threshold = threshold * scale
    key = _sign_key(covered, threshold, zero_pos)
    cross = np.zeros(covered.shape, dtype=np.int64)
    cross[..., 1:] = key[..., 1:] != key[..., :-1]
    total = np.cumsum(cross, axis=-1)
    start = np.arange(frames) * hop_length
    counts = total[..., start + frame_length - 1] - total[..., start] + int(pad)
    return (counts / frame_length)[..., None, :]  # type: ignore[no-any-return]
