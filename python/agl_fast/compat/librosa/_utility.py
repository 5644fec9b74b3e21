"""``librosa.util.normalize``, ``librosa.to_mono``, ``librosa.feature.delta``
and ``librosa.pcen`` with fewer passes over the data than librosa's.

* ``normalize`` (max norm): the finiteness check is read off the norms
  (a NaN or infinity reaches the maximum), the magnitudes are not copied to
  float64 first; the result is librosa's bit for bit.
* ``to_mono``: the channel mean, with the finiteness check on the (smaller)
  mean, and on the input only when the mean is not finite.
* ``delta``: librosa's Savitzky-Golay filter with the filter taps and the
  edge fits (a fixed linear map of the first and last ``width`` samples)
  computed once per ``(width, order)``.
* ``pcen``: librosa's smoother (``scipy.signal.lfilter``'s recursion, the
  same operations) fused with the gain and compression in one native pass
  per row, in closed forms with fewer transcendental calls.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import numpy as np

from ...exceptions import ParameterError
from . import _accept
from ._errors import librosa_api

__all__ = ["delta", "normalize", "pcen", "to_mono"]


def _length(mag: np.ndarray, norm: Any, axis: Any, fill: Any) -> tuple[np.ndarray, float]:
    """librosa's per-slice norm of ``mag`` (float64) and its fill value."""
    if norm == -np.inf:
        return np.min(mag, axis=axis, keepdims=True), 1.0
    if norm == 0:
        if fill is True:
            raise ParameterError("Cannot normalize with norm=0 and fill=True")
        return np.sum(mag > 0, axis=axis, keepdims=True, dtype=mag.dtype), 1.0
    if np.issubdtype(type(norm), np.number) and norm > 0:
        length = np.sum(mag**norm, axis=axis, keepdims=True) ** (1.0 / norm)
        count = mag.size if axis is None else mag.shape[axis]
        return length, count ** (-1.0 / norm)
    raise ParameterError(f"Unsupported norm: {norm!r}")


@librosa_api
def normalize(
    S: np.ndarray,
    *,
    norm: float | None = np.inf,
    axis: int | None = 0,
    threshold: float | None = None,
    fill: bool | None = None,
) -> np.ndarray:
    """``librosa.util.normalize``: ``S`` scaled so that each slice along
    ``axis`` has unit ``norm`` (slices under ``threshold`` left, filled or
    zeroed as ``fill`` says). Arrays that are not floating-point or complex
    are handed to librosa."""
    from ._fallback import handed_over

    if not isinstance(S, np.ndarray) or S.dtype.kind not in "fc":
        return handed_over("util.normalize", "an input that is not a float or complex array")(  # type: ignore[no-any-return]
            S, norm=norm, axis=axis, threshold=threshold, fill=fill
        )
    if threshold is None:
        threshold = np.finfo(S.dtype).tiny
    elif threshold <= 0:
        raise ParameterError(f"threshold={threshold} must be strictly positive")
    if fill not in [None, False, True]:
        raise ParameterError(f"fill={fill} must be None or boolean")
    if norm is not None and norm == np.inf:
        if S.dtype.kind == "f":
            top = np.maximum(
                np.max(S, axis=axis, keepdims=True), -np.min(S, axis=axis, keepdims=True)
            )
        else:
            top = np.max(np.abs(S), axis=axis, keepdims=True)
        length, fill_norm = np.asarray(top, dtype=np.float64), 1.0
        if not np.all(np.isfinite(length)):
            raise ParameterError("Input must be finite")
    else:
        if not np.all(np.isfinite(S)):
            raise ParameterError("Input must be finite")
        if norm is None:
            return S
        length, fill_norm = _length(np.abs(S).astype(float), norm, axis, fill)
    small = length < threshold
    out = np.empty_like(S)
    if fill is None:
        length[small] = 1.0
        np.divide(S, length, out=out, casting="unsafe")
    elif fill:
        length[small] = np.nan
        np.divide(S, length, out=out, casting="unsafe")
        out[np.isnan(out)] = fill_norm
    else:
        length[small] = np.inf
        np.divide(S, length, out=out, casting="unsafe")
    return out


@librosa_api
def to_mono(y: np.ndarray) -> np.ndarray:
    """``librosa.to_mono``: the mean over every axis but the last
    (``[shape=(n,)]``); a 1-D signal is returned as it is."""

    if not isinstance(y, np.ndarray) or not np.issubdtype(y.dtype, np.floating) or y.ndim < 2:
        return _accept.valid_audio(y)
    axes = tuple(range(y.ndim - 1))
    mono = np.add.reduce(y, axis=axes)  # np.mean's sum and division, in y's dtype
    np.true_divide(mono, math.prod(y.shape[:-1]), out=mono, casting="unsafe")
    # non-finite input gives a non-finite mean (NaN and infinity reach the
    # extremes); a non-finite mean of finite input overflowed: check y itself
    if mono.size and not (np.isfinite(np.max(mono)) and np.isfinite(np.min(mono))):
        _accept.valid_audio(y)
    return mono  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=32)
def _savgol(width: int, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Filter taps of the ``order``-th derivative Savitzky-Golay filter of
    polynomial order ``order`` (scipy's, for ``convolve1d``), and the
    ``[width // 2, width]`` map from the first ``width`` samples to the
    derivative at the first ``width // 2`` samples (scipy's edge fit)."""
    import scipy.signal

    taps = scipy.signal.savgol_coeffs(width, order, deriv=order)
    pos = np.arange(width, dtype=np.float64)
    fit = np.linalg.pinv(np.vander(pos, order + 1))  # [order + 1, width]
    # the order-th derivative of a degree-order polynomial is order! * c[0]
    edge = np.repeat(math.factorial(order) * fit[:1], width // 2, axis=0)
    taps.flags.writeable = False
    edge.flags.writeable = False
    return taps, edge


@librosa_api
def delta(
    data: np.ndarray,
    *,
    width: int = 9,
    order: int = 1,
    axis: int = -1,
    mode: str = "interp",
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.feature.delta``: the ``order``-th local derivative of
    ``data`` along ``axis`` (same shape). Modes other than ``"interp"`` and
    extra filter keywords are handed to librosa."""
    import scipy.ndimage

    from ._fallback import handed_over

    data = np.atleast_1d(data)
    if mode == "interp" and width > data.shape[axis]:
        raise ParameterError(
            f"when mode='interp', width={width} cannot exceed data.shape[axis]={data.shape[axis]}"
        )
    if width < 3 or np.mod(width, 2) != 1:
        raise ParameterError("width must be an odd integer >= 3")
    if order <= 0 or not isinstance(order, (int, np.integer)):
        raise ParameterError("order must be a positive integer")
    extra = {k: v for k, v in kwargs.items() if k != "deriv"}
    if mode != "interp" or extra or not isinstance(width, (int, np.integer)):
        return handed_over("feature.delta", "a mode other than interp or extra filter keywords")(  # type: ignore[no-any-return]
            data, width=width, order=order, axis=axis, mode=mode, **kwargs
        )
    if data.dtype not in (np.float32, np.float64):
        data = data.astype(np.float64)
    taps, edge = _savgol(int(width), int(order))
    out = scipy.ndimage.convolve1d(data, taps, axis=axis, mode="constant")
    x, y = np.moveaxis(data, axis, 0), np.moveaxis(out, axis, 0)
    half = int(width) // 2
    y[:half] = np.tensordot(edge, x[:width], axes=1)
    y[-half:] = np.tensordot(edge, x[-width:], axes=1)
    return out  # type: ignore[no-any-return]


#: Largest PCEN exponent accepted (a larger one overflows every value).
MAX_PCEN_POWER = 1e3
#: Largest max-filter length accepted (scipy's filter indexes with 32 bits).
MAX_FILTER_SIZE = 2**31 - 1


def _pcen_checks(
    power: float, gain: float, bias: float, eps: float, time_constant: float, max_size: Any
) -> None:
    if not 0 <= power <= MAX_PCEN_POWER:
        raise ParameterError(f"power={power} must be nonnegative and at most {MAX_PCEN_POWER}")
    if gain < 0:
        raise ParameterError(f"gain={gain} must be non-negative")
    if bias < 0:
        raise ParameterError(f"bias={bias} must be non-negative")
    if eps <= 0:
        raise ParameterError(f"eps={eps} must be strictly positive")
    if time_constant <= 0:
        raise ParameterError(f"time_constant={time_constant} must be strictly positive")
    if not isinstance(max_size, (int, np.integer)) or not 0 < max_size <= MAX_FILTER_SIZE:
        raise ParameterError(
            f"max_size={max_size} must be a positive integer of at most {MAX_FILTER_SIZE}"
        )


def _gain(smoothed: np.ndarray, gain: float, eps: float) -> np.ndarray:
    """``exp(-gain * (log(eps) + log1p(M / eps)))`` as ``(eps + M) ** -gain``,
    in place where ``smoothed`` is float64."""
    smooth = np.add(smoothed, eps, out=smoothed if smoothed.dtype == np.float64 else None)
    np.log(smooth, out=smooth)
    smooth *= -gain
    return np.exp(smooth, out=smooth)


def _pcen_native(
    S: np.ndarray, b: float, gain: float, eps: float, bias: float, power: float, axis: int, zi: Any
) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The smoother and gain of ``pcen`` with ``ref=S`` in one native pass
    (scipy's ``lfilter`` recursion, same operations): ``(out, zf, done)``,
    ``out`` the finished PCEN when ``done`` (``power=0.5``, ``bias > 0``),
    else the gain ``(eps + M) ** -gain``. ``None`` where scipy must report
    the error (a ``zi`` or ``axis`` that does not fit ``S``)."""
    from ... import _native

    S = np.asarray(S)
    zi = np.asarray(zi)
    if (
        S.ndim == 0
        or not isinstance(axis, (int, np.integer))
        or isinstance(axis, bool)
        or zi.ndim != S.ndim
        or not -S.ndim <= axis < S.ndim
        or S.dtype.kind not in "fiu"
    ):
        return None
    x = np.moveaxis(S, axis, -1)
    lead = x.shape[:-1]
    try:
        z = np.broadcast_to(np.moveaxis(zi, axis, -1), (*lead, 1))
    except ValueError:
        return None
    rows = np.ascontiguousarray(x.reshape(math.prod(lead), x.shape[-1]), dtype=np.float64)
    done = power == 0.5 and bias > 0
    options = {"b": float(b), "gain": float(gain), "eps": float(eps), "bias": float(bias),
               "sqrt": done}  # fmt: skip
    out, zf = _native.pcen(rows, np.ascontiguousarray(z, dtype=np.float64).reshape(-1), options)
    out = np.moveaxis(out.reshape(x.shape), -1, axis)
    return out, np.moveaxis(zf.reshape(*lead, 1), -1, axis), done


@librosa_api
def pcen(
    S: np.ndarray,
    *,
    sr: float = 22050,
    hop_length: int = 512,
    gain: float = 0.98,
    bias: float = 2,
    power: float = 0.5,
    time_constant: float = 0.400,
    eps: float = 1e-6,
    b: float | None = None,
    max_size: int = 1,
    ref: np.ndarray | None = None,
    axis: int = -1,
    max_axis: int | None = None,
    zi: np.ndarray | None = None,
    return_zf: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``librosa.pcen``: per-channel energy normalisation of a (mel) power
    spectrogram, same shape (float64, as librosa's smoother). Max-filtered
    references (``max_size > 1``) are handed to librosa."""
    import scipy.signal

    from ._fallback import handed_over

    _pcen_checks(power, gain, bias, eps, time_constant, max_size)
    if b is None:
        t_frames = time_constant * sr / float(hop_length)
        b = (np.sqrt(1 + 4 * t_frames**2) - 1) / (2 * t_frames**2)
    if not 0 <= b <= 1:
        raise ParameterError(f"b={b} must be between 0 and 1")
    if ref is None and max_size != 1:
        return handed_over("pcen", "a max-filtered reference (max_size > 1)")(  # type: ignore[no-any-return]
            S, sr=sr, hop_length=hop_length, gain=gain, bias=bias, power=power,
            time_constant=time_constant, eps=eps, b=b, max_size=max_size, ref=ref, axis=axis,
            max_axis=max_axis, zi=zi, return_zf=return_zf,
        )  # fmt: skip
    if np.issubdtype(S.dtype, np.complexfloating):
        warnings.warn(
            "pcen was called on complex input so phase information will be discarded. "
            "To suppress this warning, call pcen(np.abs(D)) instead.",
            stacklevel=3,
        )
        S = np.abs(S)
    if zi is None:
        zi = np.empty((1,) * np.ndim(S if ref is None else ref))
        zi[:] = scipy.signal.lfilter_zi([b], [1, b - 1])[:]
    fast = None if ref is not None else _pcen_native(S, b, gain, eps, bias, power, axis, zi)
    if fast is not None and fast[2]:
        return (fast[0], fast[1]) if return_zf else fast[0]
    if fast is not None:
        smooth, zf = fast[0], fast[1]
    else:
        ref = S if ref is None else ref
        smoothed, zf = scipy.signal.lfilter([b], [1, b - 1], ref, zi=zi, axis=axis)
        smooth = _gain(smoothed, gain, eps)
    if power == 0:
        out = np.log1p(S * smooth)
    elif bias == 0:
        out = np.exp(power * (np.log(S) + np.log(smooth)))
    elif power == 0.5 and smooth.shape == np.shape(S):
        # bias**0.5 * expm1(0.5 * log1p(x)) == sqrt(bias) * x / (sqrt(1 + x) + 1)
        x = np.multiply(smooth, S, out=smooth)
        x /= bias
        root = np.add(x, 1.0)
        np.sqrt(root, out=root)
        root += 1.0
        out = np.divide(x, root, out=x)
        out *= math.sqrt(bias)
    else:
        out = (bias**power) * np.expm1(power * np.log1p(S * smooth / bias))
    return (out, zf) if return_zf else out
