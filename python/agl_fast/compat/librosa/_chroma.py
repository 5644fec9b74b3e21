"""``librosa.feature.chroma_stft`` and ``librosa.feature.spectral_contrast``
on agl-fast's spectrogram.

From audio, the (power or magnitude) spectrogram is agl-fast's. The tuning
estimate of ``chroma_stft`` (librosa's ``piptrack`` peak picking and
``pitch_tuning`` histogram) only looks at the bins between ``fmin`` and
``fmax`` of the peak tracker (150 Hz to 4 kHz): it is computed on those bins
and their two neighbours instead of the whole spectrogram. The octave-band
quantiles of ``spectral_contrast`` are librosa's sorted band slices (the
bands of one value per side are read as minimum and maximum, without a
sort).
"""

from __future__ import annotations

import functools
import itertools
import warnings
from typing import Any

import numpy as np

from ... import features as _f
from ..._internal import args as _args
from ...dsp.params import CENTER, N_FFT, PAD_MODE, WINDOW
from ...exceptions import ParameterError
from . import _accept
from ._errors import librosa_api
from ._spectral import magnitude

__all__ = ["chroma_stft", "estimate_tuning", "spectral_contrast"]

#: librosa.piptrack's defaults, as estimate_tuning calls it.
_PIP_FMIN, _PIP_FMAX, _PIP_THRESHOLD = 150.0, 4000.0, 0.1


def _shifts(x: np.ndarray) -> np.ndarray:
    """librosa's parabolic-interpolation shift for the inner rows of ``x``
    (``[..., f, t]`` -> ``[..., f - 2, t]``), with its stencil's arithmetic
    (neighbour sums in ``x``'s dtype, the rest in float64)."""
    up, mid, down = x[..., 2:, :], x[..., 1:-1, :], x[..., :-2, :]
    a = (up + down).astype(np.float64) - 2.0 * mid.astype(np.float64)
    b = (up - down).astype(np.float64) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(np.abs(b) >= np.abs(a), 0.0, -b / a)
    return s.astype(x.dtype)


def _peaks(S: np.ndarray, sr: float, n_fft: int) -> tuple[np.ndarray, np.ndarray]:
    """librosa.piptrack's ``(pitches, mags)`` at its peaks, for the bins in
    ``[fmin, fmax)`` only (the others are zero in librosa's output)."""
    freqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    band = np.flatnonzero((_PIP_FMIN <= freqs) & (freqs < min(_PIP_FMAX, sr / 2.0)))
    n_bins = S.shape[-2]
    if band.size == 0:
        return np.zeros(0, dtype=S.dtype), np.zeros(0, dtype=S.dtype)
    lo, hi = int(band[0]), int(band[-1])
    if lo == 0 or hi == n_bins - 1:
        raise _EdgeBand
    slab = S[..., lo - 1 : hi + 2, :]
    ref = _PIP_THRESHOLD * np.max(S, axis=-2, keepdims=True)
    masked = slab * (slab > ref)
    mid = masked[..., 1:-1, :]
    peak = (mid > masked[..., :-2, :]) & (mid >= masked[..., 2:, :])
    shift = _shifts(slab)
    avg = (slab[..., 2:, :] - slab[..., :-2, :]) / 2.0
    where = np.nonzero(peak)
    bins = where[-2] + lo
    pitches = (bins + shift[where]) * float(sr) / n_fft
    mags = slab[..., 1:-1, :][where] + (0.5 * avg * shift)[where]
    return pitches.astype(S.dtype), mags.astype(S.dtype)


class _EdgeBand(Exception):
    """The tracker's band reaches the first or last bin (handed to librosa)."""


def _pitch_tuning(frequencies: np.ndarray, resolution: float, bins_per_octave: int) -> float:
    """librosa.pitch_tuning: the histogram peak of the deviations from the
    equal-tempered grid, in fractions of a bin."""
    frequencies = frequencies[frequencies > 0]
    if not np.any(frequencies):
        warnings.warn("Trying to estimate tuning from empty frequency set.", stacklevel=4)
        return 0.0
    octs = np.log2(frequencies / (440.0 / 16))
    residual = np.mod(bins_per_octave * octs, 1.0)
    residual[residual >= 0.5] -= 1.0
    bins = np.linspace(-0.5, 0.5, int(np.ceil(1.0 / resolution)) + 1)
    counts, tuning = np.histogram(residual, bins)
    return float(tuning[np.argmax(counts)])


def estimate_tuning(S: np.ndarray, sr: float, bins_per_octave: int) -> float:
    """librosa.estimate_tuning(S=S, sr=sr, bins_per_octave=...) with its
    default peak tracker; raises ``_EdgeBand`` where the band touches an
    edge bin."""
    pitches, mags = _peaks(np.abs(S), sr, 2 * (S.shape[-2] - 1))
    voiced = pitches > 0
    threshold = np.median(mags[voiced]) if voiced.any() else 0.0
    return _pitch_tuning(pitches[(mags >= threshold) & voiced], 0.01, bins_per_octave)


@functools.lru_cache(maxsize=16)
def _chroma_basis(sr: float, n_fft: int, tuning: float, n_chroma: int, extra: Any) -> np.ndarray:
    from ._fallback import librosa_object

    fb = librosa_object("filters", "chroma", count=False)(
        sr=sr, n_fft=n_fft, tuning=tuning, n_chroma=n_chroma, **dict(extra)
    )
    fb.flags.writeable = False
    return fb  # type: ignore[no-any-return]


@librosa_api
def chroma_stft(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    norm: float | None = np.inf,
    n_fft: int = N_FFT,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    tuning: float | None = None,
    n_chroma: int = 12,
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.feature.chroma_stft``: ``[shape=(..., n_chroma, t)]``.

    The chroma filter bank is librosa's own (``librosa.filters.chroma``,
    cached per arguments); a call whose tuning estimate would need the
    first or last frequency bin, or whose keywords are not hashable, is
    handed to librosa.
    """
    n_chroma = _args.count("n_chroma", n_chroma)
    from ._fallback import handed_over
    from ._utility import normalize

    kw = dict(n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
              center=center, pad_mode=pad_mode, tuning=tuning, n_chroma=n_chroma)  # fmt: skip
    try:
        extra = tuple(sorted(kwargs.items()))
        hash(extra)
    except TypeError:
        return handed_over("feature.chroma_stft", "unhashable filter-bank keywords")(  # type: ignore[no-any-return]
            y=y, sr=sr, S=S, norm=norm, **kw, **kwargs
        )
    if S is None and y is not None:
        _accept.valid_audio(y)
        S = _f.spectrogram(y, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                           window=window, center=center, pad_mode=pad_mode, power=2.0)  # fmt: skip
    else:
        S, n_fft = magnitude(y, S, n_fft, hop_length, win_length, window, center, pad_mode)
    n_fft = 2 * (S.shape[-2] - 1) if S.shape[-2] != n_fft // 2 + 1 else n_fft
    if tuning is None:
        try:
            tuning = estimate_tuning(S, float(sr), n_chroma)
        except _EdgeBand:
            return handed_over(  # type: ignore[no-any-return]
                "feature.chroma_stft", "a tuning band at the edge of the spectrum"
            )(y=y, sr=sr, S=S, norm=norm, **kw, **kwargs)
    fb = _chroma_basis(float(sr), n_fft, float(tuning), n_chroma, extra)
    raw = np.einsum("cf,...ft->...ct", fb, S, optimize=True)
    return normalize(raw, norm=norm, axis=-2)  # type: ignore[no-any-return]


def _octave_edges(sr: float, fmin: float, n_bands: int) -> np.ndarray:
    if fmin <= 0:
        raise ParameterError("fmin must be a positive number")
    octa = np.zeros(n_bands + 2)
    octa[1:] = fmin * (2.0 ** np.arange(0, n_bands + 1))
    if np.any(octa[:-1] >= 0.5 * sr):
        raise ParameterError("Frequency band exceeds Nyquist. Reduce either fmin or n_bands.")
    return octa


def _band_means(sub: np.ndarray, idx: int) -> tuple[np.ndarray, np.ndarray]:
    """Means of the ``idx`` smallest and ``idx`` largest values along the
    frequency axis (``-2``), as librosa's sorted slices; a single value is
    the band's minimum and maximum, without a sort."""
    if idx == 1 and sub.shape[-2] > 0:
        return np.min(sub, axis=-2), np.max(sub, axis=-2)
    ordered = np.sort(sub, axis=-2)
    return np.mean(ordered[..., :idx, :], axis=-2), np.mean(ordered[..., -idx:, :], axis=-2)


@librosa_api
def spectral_contrast(
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
    fmin: float = 200.0,
    n_bands: int = 6,
    quantile: float = 0.02,
    linear: bool = False,
) -> np.ndarray:
    """``librosa.feature.spectral_contrast``: ``[shape=(..., n_bands + 1, t)]``
    float64 (dB differences, or linear with ``linear=True``)."""
    from . import power_to_db

    S, n_fft = magnitude(y, S, n_fft, hop_length, win_length, window, center, pad_mode)
    f = np.atleast_1d(np.fft.rfftfreq(n=n_fft, d=1.0 / sr) if freq is None else freq)
    if f.ndim != 1 or len(f) != S.shape[-2]:
        raise ParameterError(f"freq.shape mismatch: expected ({S.shape[-2]:d},)")
    if n_bands < 1 or not isinstance(n_bands, (int, np.integer)):
        raise ParameterError("n_bands must be a positive integer")
    if not 0.0 < quantile < 1.0:
        raise ParameterError("quantile must lie in the range (0, 1)")
    octa = _octave_edges(sr, fmin, n_bands)
    shape = list(S.shape)
    shape[-2] = n_bands + 1
    valley, peak = np.zeros(shape), np.zeros(shape)
    for k, (f_low, f_high) in enumerate(itertools.pairwise(octa)):
        current = np.logical_and(f >= f_low, f <= f_high)
        where = np.flatnonzero(current)
        if k > 0:
            current[where[0] - 1] = True
        if k == n_bands:
            current[where[-1] + 1 :] = True
        rows = np.flatnonzero(current)
        if k < n_bands:
            rows = rows[:-1]
        idx = int(np.maximum(np.rint(quantile * np.sum(current)), 1))
        contiguous = rows.size > 0 and rows[-1] - rows[0] + 1 == rows.size
        sub = S[..., rows[0] : rows[-1] + 1, :] if contiguous else S[..., rows, :]
        valley[..., k, :], peak[..., k, :] = _band_means(sub, idx)
    if _accept.flag(linear):
        return peak - valley  # type: ignore[no-any-return]
    return power_to_db(peak) - power_to_db(valley)  # type: ignore[no-any-return]
