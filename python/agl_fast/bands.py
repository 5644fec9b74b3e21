"""Octave and third-octave band filtering of impulse responses, for per-band
room parameters (:func:`band_room_parameters`).

Filter design (documented so per-band values can be compared):

* Centre frequencies follow IEC 61260-1 with the base-ten octave ratio
  ``G = 10**(3/10)``: ``f_m = 1000 * G**(x / b)`` for integer ``x``, with
  ``b = 1`` (octave) or ``b = 3`` (third octave). Nominal labels (125, 250,
  ..., or 100, 125, 160, ...) are the usual rounded values.
* Band edges ``f_m * G**(-1/(2b))`` and ``f_m * G**(1/(2b))``.
* Each band is a Butterworth band-pass of order 3 per edge (6 poles), in
  second-order sections, applied forward and backward (``sosfiltfilt``):
  zero phase, so the onset and the direct sound stay where they are, and an
  effective 36 dB/octave skirt. Bands whose upper edge is at or above 0.45
  times the sample rate are left out.

The filtering uses scipy (imported when called); the decay analysis is the
Rust :func:`agl_fast.room_parameters` on all bands at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _native
from ._internal.args import array, real
from .exceptions import NonFiniteError, ParameterError, ShapeError
from .room import PARAMETERS, room_parameters

__all__ = ["band_centres", "band_filter", "band_room_parameters"]

_G = 10.0 ** (3.0 / 10.0)
_NOMINAL_THIRD = (
    25, 31.5, 40, 50, 63, 80, 100, 125, 160, 200, 250, 315, 400, 500, 630, 800,
    1000, 1250, 1600, 2000, 2500, 3150, 4000, 5000, 6300, 8000, 10000, 12500, 16000, 20000,
)  # fmt: skip


def band_centres(
    bands: str = "octave", fmin: float = 125.0, fmax: float = 8000.0
) -> tuple[np.ndarray, np.ndarray]:
    """Exact and nominal centre frequencies in Hz of the bands within
    ``[fmin, fmax]`` (nominal values compared).

    Parameters
    ----------
    bands : {'octave', 'third'}
    fmin, fmax : float
        Nominal range in Hz, inclusive.

    Returns
    -------
    exact, nominal : np.ndarray [shape=(n_bands,)]
    """
    if not isinstance(bands, str) or bands not in ("octave", "third"):
        raise ParameterError(f"bands must be 'octave' or 'third', got bands={bands!r}")
    fmin, fmax = real("fmin", fmin), real("fmax", fmax)
    if not (np.isfinite(fmin) and np.isfinite(fmax) and fmin <= fmax):
        raise ParameterError(
            f"fmin and fmax must be finite with fmin <= fmax, got fmin={fmin}, fmax={fmax}"
        )
    b = 1 if bands == "octave" else 3
    x = np.arange(-30, 14) if b == 3 else np.arange(-10, 5) * 3
    exact = 1000.0 * _G ** (x / 3.0)
    nominal = np.array([min(_NOMINAL_THIRD, key=lambda n: abs(np.log(n / f))) for f in exact])
    keep = (nominal >= fmin) & (nominal <= fmax) & (exact <= 20000 * 1.01)
    return exact[keep], nominal[keep].astype(np.float64)


def band_filter(
    ir: Any, sr: float, bands: str = "octave", fmin: float = 125.0, fmax: float = 8000.0
) -> tuple[np.ndarray, np.ndarray]:
    """Split impulse responses into bands (see the module notes).

    Parameters
    ----------
    ir : np.ndarray [shape=(..., L)]
        Impulse responses, float.
    sr : float > 0
        Sample rate in Hz.

    Returns
    -------
    nominal : np.ndarray [shape=(n_bands,)]
        Nominal centre frequencies in Hz of the bands kept.
    filtered : np.ndarray [shape=(n_bands, ..., L), dtype=float32]
    """
    from scipy import signal

    sr = real("sr", sr)
    lo, hi = _native.SR_RANGE
    if not (lo <= sr <= hi):
        raise ParameterError(f"sr must be a sample rate in Hz between {lo} and {hi}, got sr={sr}")
    x = array("ir", ir, np.float64)
    if x.ndim == 0 or x.shape[-1] < 16:
        raise ShapeError(f"ir needs at least 16 samples per response, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise NonFiniteError("ir holds NaN or infinite samples")
    exact, nominal = band_centres(bands, fmin, fmax)
    b = 1 if bands == "octave" else 3
    half = _G ** (1.0 / (2 * b))
    keep = exact * half < 0.45 * sr
    if not keep.any():
        raise ParameterError(
            f"no band between fmin={fmin} and fmax={fmax} Hz fits below 0.45 * sr={sr}"
        )
    out = np.empty((int(keep.sum()), *x.shape), np.float32)
    for i, fm in enumerate(exact[keep]):
        sos = signal.butter(3, [fm / half, fm * half], btype="bandpass", fs=sr, output="sos")
        out[i] = signal.sosfiltfilt(sos, x, axis=-1)
    return nominal[keep], out


def band_room_parameters(
    ir: Any,
    sr: float,
    *,
    bands: str = "octave",
    fmin: float = 125.0,
    fmax: float = 8000.0,
    method: str = "lundeby_chu",
    direct_ms: float = 2.5,
    n_threads: int | None = None,
) -> dict[str, Any]:
    """:func:`agl_fast.room_parameters` per octave or third-octave band.

    Parameters
    ----------
    ir : np.ndarray [shape=(L,), (channels, L) or (batch, channels, L)]
        Impulse responses.
    sr : float > 0
        Sample rate in Hz.
    bands, fmin, fmax
        As in :func:`band_filter`.
    method, direct_ms, n_threads
        As in :func:`agl_fast.room_parameters`.

    Returns
    -------
    dict
        ``'band_hz'``: nominal centres ``[n_bands]``; for each parameter an
        array ``[n_bands, *ir.shape[:-1]]`` and its ``'status_'`` twin.
    """
    x = array("ir", ir)
    if x.ndim not in (1, 2, 3):
        raise ShapeError(
            f"ir must be [L], [channels, L] or [batch, channels, L], got shape {x.shape}"
        )
    nominal, filtered = band_filter(x, sr, bands, fmin, fmax)
    lead = filtered.shape[:-1]  # (n_bands, *ir.shape[:-1])
    flat = np.ascontiguousarray(filtered.reshape(-1, 1, filtered.shape[-1]))
    res = room_parameters(flat, sr, method=method, direct_ms=direct_ms, n_threads=n_threads)
    out: dict[str, Any] = {"band_hz": nominal}
    for name in PARAMETERS:
        out[name] = np.asarray(res[name]).reshape(lead)
        out["status_" + name] = np.asarray(res["status_" + name]).reshape(lead)
    return out
