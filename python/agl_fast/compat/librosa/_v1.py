"""The accelerated names whose signature or meaning changed in librosa 1.0,
in 1.0's form; the package serves them in place of the 0.10/0.11 forms when
the installed librosa is 1.0 or later (see :mod:`._version`).

* ``to_mono(*signals, pad=True, norm=True, out=None)``: the mean (``norm``)
  or sum of one or more signals, each first reduced to mono, padded with
  zeros to the longest (``pad``) or cut to the shortest.
* ``power_to_db`` / ``amplitude_to_db`` with ``axes=`` (see :mod:`._db`).
* ``get_duration`` without the ``filename`` argument 1.0 removed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dsp.params import CENTER as _CENTER
from ...dsp.params import N_FFT as _N_FFT
from ...exceptions import ParameterError
from . import _accept, _db
from ._errors import librosa_api

__all__ = ["amplitude_to_db", "get_duration", "power_to_db", "to_mono"]


@librosa_api
def power_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
    axes: Any = "auto",
) -> Any:
    """``librosa.power_to_db`` of librosa 1.0: ``ref`` and the ``top_db``
    floor over ``axes`` (``"auto"``: per channel, the last two axes), same
    shape as ``S``; a numpy scalar for a 0-d input."""
    return _db.by_axes("power_to_db", S, ref, amin, top_db, axes)


@librosa_api
def amplitude_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
    axes: Any = "auto",
) -> Any:
    """``librosa.amplitude_to_db`` of librosa 1.0 (see :func:`power_to_db`)."""
    return _db.by_axes("amplitude_to_db", S, ref, amin, top_db, axes)


def _output(out: Any, size: int, dtype: np.dtype[Any]) -> np.ndarray:
    """librosa 1.0's output buffer: a new zero array, or ``out`` checked
    (shape ``(size,)``, a dtype that holds ``dtype``) and zeroed."""
    if out is None:
        return np.zeros((size,), dtype=dtype)
    if not isinstance(out, np.ndarray):
        raise ParameterError(f"out must be a numpy array, got {type(out).__name__}")
    if out.shape != (size,):
        raise ParameterError(f"out has shape={out.shape}, but expected {(size,)}")
    if np.promote_types(out.dtype, dtype) != out.dtype:
        raise ParameterError(
            f"out has dtype={out.dtype}, which cannot hold the result dtype {dtype}"
        )
    out[...] = 0
    return out


@librosa_api
def to_mono(
    *signals: np.ndarray, pad: bool = True, norm: bool = True, out: np.ndarray | None = None
) -> np.ndarray:
    """``librosa.to_mono`` of librosa 1.0: ``[shape=(n,)]``, the mean
    (``norm``) or the sum of ``signals``, each reduced over every axis but
    the last; ``n`` is the longest length (``pad``) or the shortest."""

    if not signals:
        raise ParameterError("At least one signal must be provided to `to_mono`.")
    # The finiteness scan is made on the (smaller) result when it cannot
    # leave a written ``out`` behind: a non-finite input gives a non-finite
    # result, and a non-finite result of finite input overflowed.
    late_scan = out is None
    for y in signals:
        _accept.valid_audio(y, finite=not late_scan)
    lengths = [y.shape[-1] for y in signals]
    size = max(lengths) if pad else min(lengths)
    dtype = signals[0].dtype
    for y in signals[1:]:
        dtype = np.promote_types(dtype, y.dtype)
    output = _output(out, size, dtype)
    for y in signals:
        axes = tuple(range(y.ndim - 1))
        # np.mean's and np.sum's reduction, in y's dtype
        part = np.add.reduce(y, axis=axes) if axes else np.array(y)
        if axes and norm:
            np.true_divide(part, math.prod(y.shape[:-1]), out=part, casting="unsafe")
        n = min(size, part.shape[-1])
        output[:n] += part[:n]
    if norm:
        output /= len(signals)
    if late_scan and output.size and not (np.isfinite(output.max()) and np.isfinite(output.min())):
        for y in signals:
            _accept.valid_audio(y)
    return output


@librosa_api
def get_duration(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = _N_FFT,
    hop_length: int = 512,
    center: bool = _CENTER,
    path: Any = None,
) -> float:
    """``librosa.get_duration`` of librosa 1.0 (no ``filename`` argument)."""
    from . import duration_of

    return duration_of(y, sr, S, n_fft, hop_length, center, path)  # type: ignore[no-any-return]
