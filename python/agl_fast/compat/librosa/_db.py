"""``power_to_db`` and ``amplitude_to_db`` as each librosa release means them.

* 0.10 and 0.11 take ``ref`` (a callable called on the whole magnitude) and
  the ``top_db`` floor over the whole array (:func:`whole`).
* 1.0 adds ``axes=`` (``"auto"``: the last two axes, so each channel of a
  multichannel spectrogram has its own ``ref=np.max`` and ``top_db`` floor),
  calls a ``ref`` function as ``ref(S, axis=axes, keepdims=True)`` (one that
  does not take those arguments is a ``ParameterError``) and returns a numpy
  scalar for a 0-d input (:func:`by_axes`).

Both run on the native kernels; axes other than the last two or all of
them, and reference arrays that are not one value per channel, are handed
to librosa.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import features as _f
from ...exceptions import ParameterError
from ._errors import HandOver

__all__ = ["by_axes", "whole"]

#: Reference functions the kernels compute themselves (the maximum).
_MAXIMA = (np.max, np.amax)


def _complex_warning(name: str) -> None:
    hint = "np.abs(D)**2" if name == "power_to_db" else "np.abs(S)"
    warnings.warn(
        f"{name} was called on complex input so phase information will be discarded. "
        f"To suppress this warning, call {name}({hint}) instead.",
        UserWarning,
        stacklevel=5,
    )


def whole(
    name: str, S: Any, ref: float | Callable[..., Any], amin: float, top_db: float | None
) -> Any:
    """librosa 0.10/0.11: ``ref`` and ``top_db`` over the whole array;
    a numpy scalar for scalars, 0-d arrays and Python numbers (numpy's
    ufuncs give librosa's)."""
    S = np.asarray(S)
    if np.iscomplexobj(S):
        _complex_warning(name)
        S = np.abs(S)
    fn = _f.amplitude_to_db if name == "amplitude_to_db" else _f.power_to_db
    if callable(ref) and ref not in _MAXIMA:
        ref = float(ref(np.abs(S) if name == "amplitude_to_db" else S))
    elif not callable(ref):
        ref = _one_value(ref)
        if S.ndim == 0:
            # librosa subtracts the float64 reference from a numpy scalar
            # (not in place), so a float32 scalar comes out float64
            S = S.astype(np.float64)
    if S.ndim > 1 and S.flags.f_contiguous and not S.flags.c_contiguous:
        # librosa's spectrograms are Fortran-ordered: convert the C-ordered
        # transpose (an elementwise map with whole-array ref/top_db, so the
        # same values) instead of copying into C order, and keep the layout
        return fn(S.T, ref=ref, amin=amin, top_db=top_db).T
    out = fn(S, ref=ref, amin=amin, top_db=top_db)
    return out[()] if out.ndim == 0 else out


def _one_value(ref: Any) -> float:
    """A numeric ``ref`` as librosa reads it (``np.abs(ref)``), when it is
    one value."""
    if isinstance(ref, (int, float, np.number)) and not isinstance(ref, (bool, np.bool_)):
        return float(np.abs(ref))
    value = np.abs(np.asarray(ref))
    if value.size != 1 or value.dtype.kind not in "iuf":
        raise HandOver("a reference that is not one real number")
    return float(value.reshape(()))


def _axes(axes: Any, ndim: int) -> str:
    """``"whole"`` or ``"channels"`` (the last two axes of a 3-D or larger
    array) for librosa 1.0's ``axes``; other axes are handed to librosa."""
    if isinstance(axes, str) and axes == "auto":
        return "channels" if ndim >= 3 else "whole"
    if axes is None:
        return "whole"
    try:
        picked = {int(a) % max(ndim, 1) for a in np.atleast_1d(np.asarray(axes))}
    except (TypeError, ValueError, OverflowError):
        raise HandOver(f"axes={axes!r} is not a set of axes the native path reads") from None
    if picked == set(range(ndim)):
        return "whole"
    if ndim >= 3 and picked == {ndim - 2, ndim - 1}:
        return "channels"
    raise HandOver(f"axes={axes!r} other than the last two axes or all of them")


def by_axes(
    name: str,
    S: Any,
    ref: float | Callable[..., Any],
    amin: float,
    top_db: float | None,
    axes: Any,
) -> Any:
    """librosa 1.0: ``ref`` and ``top_db`` over ``axes`` (see the module
    notes); a numpy scalar for a 0-d input (``log_spec[()]``)."""
    amplitude = name == "amplitude_to_db"
    S = np.asarray(S)
    if not amplitude and amin <= 0:
        raise ParameterError("amin must be strictly positive")
    if np.iscomplexobj(S):
        _complex_warning(name)
        S = np.abs(S)
    magnitude = np.abs(S) if amplitude and S.dtype.kind not in "u" else S
    scope = _axes(axes, S.ndim)
    if scope == "whole":
        if callable(ref) and ref not in _MAXIMA:
            ref = _one_value(_reference(ref, magnitude, _librosa_axes(axes, S.ndim)))
        return whole(name, magnitude, ref, amin, top_db)
    lead = S.shape[:-2]
    channels = magnitude.reshape(-1, *S.shape[-2:])
    fn = _f.amplitude_to_db if amplitude else _f.power_to_db
    if callable(ref) and ref in _MAXIMA:
        flat = channels.reshape(channels.shape[0], -1)
        out = fn(flat, ref=ref, amin=amin, top_db=top_db, per_item=True)
        return out.reshape(S.shape)
    if callable(ref):
        values = np.asarray(_reference(ref, magnitude, (-2, -1)))
    else:
        values = np.abs(np.asarray(ref))
    if values.dtype.kind not in "iuf":
        raise HandOver("a reference that is not real")
    if values.size == 1:
        refs = np.full(channels.shape[0], float(values.reshape(())))
    elif values.shape == (*lead, 1, 1):
        refs = values.reshape(-1).astype(np.float64)
    else:
        raise HandOver(f"a reference of shape {values.shape}, not one value per channel")
    rows = [fn(channels[c], ref=float(refs[c]), amin=amin, top_db=top_db) for c in range(len(refs))]
    return np.stack(rows).reshape(S.shape)


def _librosa_axes(axes: Any, ndim: int) -> Any:
    """The ``axis`` librosa 1.0 passes to a reference function."""
    if isinstance(axes, str) and axes == "auto":
        return (-2, -1) if ndim >= 2 else ((-1,) if ndim == 1 else None)
    return axes


def _reference(fn: Callable[..., Any], magnitude: np.ndarray, axes: Any) -> Any:
    """``fn(magnitude, axis=axes, keepdims=True)``, librosa 1.0's call."""
    try:
        return fn(magnitude, axis=axes, keepdims=True)
    except TypeError as exc:
        raise ParameterError(
            "The provided reference function must support 'axis' and 'keepdims' arguments "
            "for proper multichannel processing."
        ) from exc
