"""Arguments as librosa takes them.

librosa tests flags by their truth value (``if htk:``) and uses numbers as
numpy does, so ``htk=np.uint8(0)``, ``mono=np.array([[0]])`` or
``sr=np.float64(22050)`` work there; agl-fast's native API is stricter. The
compatibility layer reads such values here, the way librosa would, and
hands any other value to librosa (:class:`~._errors.HandOver`), which then
accepts it or raises its own error.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ...exceptions import ParameterError
from ._errors import HandOver

__all__ = ["MAX_TEXT_NUMBER", "count", "flag", "opt_real", "real", "valid_audio"]


def flag(value: Any) -> bool:
    """A flag by its truth value, as ``if value:`` in librosa (a numpy
    array of more than one element raises numpy's ``ValueError``)."""
    return bool(value)


#: Longest text a number parameter may be given as before it is refused
#: here: librosa multiplies such a value by the sample rate (``offset *
#: sr_native``), which repeats a string ``sr`` times (1.6 GB and seconds of
#: work for 100,000 characters at 16 kHz) before ``int`` refuses it.
MAX_TEXT_NUMBER = 32


def real(name: str, value: Any) -> float:
    """A real number (Python's or numpy's, or a 0-d numpy array) as a
    float; text longer than :data:`MAX_TEXT_NUMBER` characters is a
    :class:`ParameterError`; anything else is handed to librosa."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf":
        return float(value.reshape(()))
    if isinstance(value, (numbers.Real, np.bool_)):
        return float(value)
    if isinstance(value, (str, bytes)) and len(value) > MAX_TEXT_NUMBER:
        raise ParameterError(
            f"{name} must be a number, got a {type(value).__name__} of {len(value):,} "
            "characters (librosa would repeat it once per sample of a second)"
        )
    raise HandOver(f"{name}={_short(value)} is not a plain number")


def opt_real(name: str, value: Any) -> float | None:
    """:func:`real`, with ``None`` kept."""
    return None if value is None else real(name, value)


def count(name: str, value: Any) -> int:
    """A positive integer (Python's or numpy's) as an int; any other value
    is handed to librosa (which takes some, a float ``n_mels`` in places,
    and refuses others)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        number = int(value)
        if number > 0:
            return number
    raise HandOver(f"{name}={_short(value)} is not a positive integer")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}..."


def valid_audio(y: Any, what: str = "y", finite: bool = True) -> np.ndarray:
    """librosa's ``valid_audio(y, mono=False)``: a floating-point, finite
    numpy array with at least one dimension (``finite=False`` leaves out the
    scan of the values, for a caller that makes it later)."""
    if not isinstance(y, np.ndarray):
        raise ParameterError(f"Audio data must be of type numpy.ndarray, got {type(y).__name__}")
    if not np.issubdtype(y.dtype, np.floating):
        raise ParameterError(f"Audio data must be floating-point, got {what}.dtype={y.dtype}")
    if y.ndim == 0:
        raise ParameterError(
            f"Audio data must be at least one-dimensional, given {what}.shape={y.shape}"
        )
    if finite and not np.isfinite(y).all():
        raise ParameterError("Audio buffer is not finite everywhere")
    return y
