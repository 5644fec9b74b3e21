"""Python scalars checked before they become native parameters.

Counts cross into Rust as Python objects and are checked there (one helper
in the binding); real-valued parameters are checked here, so ``sr="x"``,
``sr=None`` or ``sr=True`` raise a :class:`ParameterError` that names the
parameter instead of a ``TypeError``/``ValueError`` from ``float()``.
Ranges (positive, finite, below a ceiling) are checked once, in the core.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .. import _native
from ..exceptions import ParameterError, ShapeError

__all__ = [
    "array",
    "arrow",
    "choice",
    "count",
    "dtype",
    "flag",
    "opt_real",
    "opt_text",
    "real",
    "reals",
    "text",
]

# Longest string echoed back in an error message.
_REPR_MAX = 80


def _show(value: Any) -> str:
    """A short ``repr`` for messages (huge strings are cut)."""
    r = repr(value)
    return r if len(r) <= _REPR_MAX else f"{r[:_REPR_MAX]}... ({len(r)} characters)"


def real(name: str, value: Any) -> float:
    """``value`` as a float; a ``ParameterError`` naming ``name`` unless it
    is a real number (booleans and strings are not)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a real number, got {name}={_show(value)}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise ParameterError(f"{name} must be a real number, got {name}={_show(value)}") from e


def opt_real(name: str, value: Any) -> float | None:
    """:func:`real`, with ``None`` kept as ``None``."""
    return None if value is None else real(name, value)


def array(name: str, value: Any, dtype: Any = None, *, complex_ok: bool = False) -> np.ndarray:
    """``np.asarray(value)`` as ``dtype``, with numpy's conversion errors
    (ragged lists, strings, objects, complex values where real ones are
    expected) raised as a ``ShapeError``/``ParameterError`` naming ``name``;
    no copy when ``value`` already is such an array."""
    if value is None or isinstance(value, (str, bytes)):
        raise ParameterError(f"{name} must be a numeric array, got {name}={_show(value)}")
    try:
        a = np.asarray(value)
    except ValueError as e:
        raise ShapeError(f"{name} must be a rectangular numeric array: {e}") from e
    except TypeError as e:
        raise ParameterError(f"{name} must be a numeric array: {e}") from e
    allowed = "biufc" if complex_ok else "biuf"
    if a.dtype.kind not in allowed:
        raise ParameterError(f"{name} must be a real numeric array, got dtype={a.dtype}")
    return a if dtype is None else a.astype(dtype, copy=False)


def count(name: str, value: Any) -> int:
    """A positive integer count, by the binding's own rule (the message
    names ``name``: "n_fft must be a positive integer, got -1")."""
    return int(_native.check_count(name, value))


def flag(name: str, value: Any) -> bool:
    """A boolean parameter: ``True``/``False`` or a numpy bool; anything
    else (``2``, ``"yes"``, ``None``) is a ``ParameterError`` naming
    ``name``, never truth-tested."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ParameterError(f"{name} must be True or False, got {name}={_show(value)}")


def text(name: str, value: Any) -> str:
    """A required string parameter (``None`` and non-strings are refused)."""
    if not isinstance(value, str):
        raise ParameterError(f"{name} must be a string, got {name}={_show(value)}")
    return value


def opt_text(name: str, value: Any) -> str | None:
    """:func:`text`, with ``None`` kept as ``None``."""
    return None if value is None else text(name, value)


def choice(name: str, value: Any, options: Iterable[str]) -> str:
    """A string parameter that must be one of ``options``."""
    allowed = tuple(options)
    if not isinstance(value, str) or value not in allowed:
        raise ParameterError(f"{name} must be one of {allowed}, got {name}={_show(value)}")
    return value


def reals(name: str, values: Any) -> tuple[float, ...]:
    """A sequence of real numbers (a tuple, list or 1-D array); each item is
    checked by :func:`real`, and the message names ``name``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ParameterError(
            f"{name} must be a sequence of real numbers, got {name}={_show(values)}"
        )
    return tuple(real(f"{name}[{i}]", v) for i, v in enumerate(values))


def arrow(name: str, value: Any) -> Any:
    """A ``pyarrow.Array`` from an object exporting the Arrow C data
    interface (``__arrow_c_array__``) or a ``pyarrow.ChunkedArray``. An
    export that raises, returns something other than a ``(schema, array)``
    pair of capsules, or capsules of the wrong name is a ``ParameterError``
    naming ``name``, chained to the original error."""
    import pyarrow as pa

    try:
        if isinstance(value, pa.ChunkedArray):
            return value.combine_chunks()
        if isinstance(value, pa.Array):
            return value
        return pa.array(value)
    except Exception as e:
        raise ParameterError(
            f"{name}: its Arrow export (__arrow_c_array__) failed: {type(e).__name__}: {e}"
        ) from e


def dtype(name: str, value: Any) -> np.dtype[Any]:
    """A numpy dtype parameter (anything ``np.dtype`` accepts, as numpy
    reads it); a ``ParameterError`` naming ``name`` otherwise."""
    try:
        return np.dtype(value)
    except Exception as e:
        raise ParameterError(f"{name} must be a numpy dtype, got {name}={_show(value)}") from e
