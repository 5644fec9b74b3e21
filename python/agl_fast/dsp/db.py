"""Power and amplitude to decibels, as librosa's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _native
from .._internal.args import array, flag, opt_real, real
from .._internal.batch import to_float32
from .._internal.config import resolve_threads
from ..exceptions import ParameterError, ShapeError

__all__ = ["amplitude_to_db", "power_to_db"]


def resolve_db_ref(ref: float | Callable[..., Any]) -> float | None:
    """``None`` for a per-item maximum (``np.max``/``np.amax``)."""
    if callable(ref):
        if ref in (np.max, np.amax, max):
            return None
        raise ParameterError(
            "ref must be a number or np.max for the native path, got a callable "
            f"{getattr(ref, '__name__', ref)!r}"
        )
    return real("ref", ref)


def _to_db(
    S: Any,
    ref: float | Callable[..., Any],
    amin: float,
    top_db: float | None,
    per_item: bool,
    amplitude: bool,
    n_threads: int | None,
) -> Any:
    """dB conversion; float32 arrays take the float32 kernel, float64 arrays,
    scalars and integers the float64 one (as librosa, which computes in the
    input's precision). A 0-d input gives a 0-d result."""
    amin = real("amin", amin)
    top_db = opt_real("top_db", top_db)
    if isinstance(S, (bool, np.bool_)):
        raise ParameterError(f"S must be numeric, got {S!r}")
    raw = S if isinstance(S, np.ndarray) else array("S", S, complex_ok=True)
    if raw.dtype.kind == "c":
        raw = np.abs(raw)
    if raw.dtype.kind not in "fiu":
        raise ParameterError(f"S must be a numeric array, got dtype={raw.dtype}")
    double = raw.dtype != np.float32
    custom = callable(ref) and ref not in (np.max, np.amax, max)
    fortran = raw.ndim > 1 and raw.flags.f_contiguous and not raw.flags.c_contiguous
    if fortran and not per_item and not custom:
        # A Fortran-ordered array (librosa's STFT layout) is converted as its
        # C-ordered transpose (an elementwise map with whole-array ref and
        # top_db: the same values), without a copy, and keeps its layout.
        return _to_db(raw.T, ref, amin, top_db, False, amplitude, n_threads).T
    # Arrays of the kernel's type are read where they are (no copy); both
    # kernels report NaN themselves.
    a = np.asarray(raw, dtype=np.float64) if double else to_float32(raw, what="S")
    if a.size == 0:
        raise ShapeError(f"S is empty (shape {a.shape})")
    if not (np.isfinite(amin) and amin > 0):
        raise ParameterError(f"amin must be strictly positive, got amin={amin}")
    if custom and callable(ref):
        r: float | None = float(ref(np.abs(a) if amplitude else a))
    else:
        r = resolve_db_ref(ref)
    if r is not None and not np.isfinite(r):
        raise ParameterError(f"ref must be finite, got ref={r}")
    if top_db is not None and not (top_db >= 0):
        raise ParameterError(f"top_db must be non-negative, got top_db={top_db}")
    shape = a.shape
    # A float32 amplitude reference above ~1.8e19 overflows when squared in
    # float32: such calls take the double-precision kernel and come back as
    # float32.
    wide = amplitude and not double and ((r is not None and abs(r) > 1e18) or amin < 1e-18)
    flat = a.reshape(1, -1) if a.ndim == 0 else a
    rows = flat.reshape(flat.shape[0], -1) if (per_item and flat.ndim > 1) else flat.reshape(1, -1)
    # The kernel runs in the precision of the array it is given.
    out = _native.to_db(
        np.ascontiguousarray(rows, dtype=np.float64) if (double or wide) else rows,
        r,
        float(amin),
        None if top_db is None else float(top_db),
        amplitude,
        resolve_threads(n_threads),
    )
    if wide:
        out = out.astype(np.float32)
    return out.reshape(shape)


def power_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
    per_item: bool = False,
    n_threads: int | None = None,
) -> np.ndarray:
    """Power to decibels, as ``librosa.power_to_db``.

    ``10 * log10(max(amin, S)) - 10 * log10(max(amin, ref))``, then clipped
    to ``max - top_db``.

    Parameters
    ----------
    S : np.ndarray
        Power values.
    ref : float or callable
        Reference power; ``np.max`` uses the maximum.
    amin : float > 0
        Floor.
    top_db : float >= 0 or None
        Dynamic range kept below the maximum.
    per_item : bool
        Treat axis 0 as a batch: ``ref=np.max`` and ``top_db`` use each item's
        own maximum instead of the whole array's (librosa's behaviour).

    Returns
    -------
    np.ndarray [shape=S.shape, dtype=float32 or float64]
        float32 for float32 input; float64 (computed in double precision)
        for anything else, scalars included (a 0-d array then).
    """
    return _to_db(S, ref, amin, top_db, flag("per_item", per_item), False, n_threads)


def amplitude_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
    per_item: bool = False,
    n_threads: int | None = None,
) -> np.ndarray:
    """Amplitude to decibels, as ``librosa.amplitude_to_db``:
    ``power_to_db(|S|**2, ref=ref**2, amin=amin**2, top_db=top_db)``.

    Parameters are those of :func:`power_to_db` (``amin`` default ``1e-5``).

    Returns
    -------
    np.ndarray [shape=S.shape, dtype=float32 or float64]
        float32 for float32 input; float64 (computed in double precision)
        for anything else, scalars included (a 0-d array then).
    """
    return _to_db(S, ref, amin, top_db, flag("per_item", per_item), True, n_threads)
