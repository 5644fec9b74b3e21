"""Geo metrics over coordinate columns: haversine and WGS-84 geodesic
distances, GeoScore, threshold accuracies and quantiles.

Coordinates are float64 degrees (numpy arrays, anything ``np.asarray``
accepts, or Arrow float columns). Longitudes are wrapped to [-180, 180).
A pair with a non-finite coordinate or a latitude outside [-90, 90] gets a
NaN distance; ``on_invalid="raise"`` turns that into a
:class:`~agl_fast.exceptions.ParameterError` naming the count and the first
offending index instead.

>>> import numpy as np, agl_fast.geo as geo
>>> round(float(geo.geodesic([0.0], [0.0], [90.0], [0.0])[0]), 6)
10001.965729
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _native
from ._internal.args import array, real, reals
from ._internal.config import resolve_threads
from .exceptions import ParameterError, ShapeError

MEAN_EARTH_RADIUS_KM = 6371.0088
WGS84_A = 6378137.0
WGS84_F = 1.0 / 298.257223563
GEOSCORE_SCALE_KM = 1492.7
GEOSCORE_MAX = 5000.0
DEFAULT_THRESHOLDS_KM = (1.0, 10.0, 100.0, 500.0, 1000.0)
DEFAULT_QUANTILES = (0.25, 0.5, 0.75)

OnInvalid = Literal["nan", "raise"]


def _column(x: Any, name: str) -> npt.NDArray[np.float64]:
    if x is None or isinstance(x, (str, bytes)):
        raise ParameterError(f"{name} must hold numbers, got {name}={x!r}")
    if hasattr(x, "to_numpy") and not isinstance(x, np.ndarray):
        try:
            x = x.to_numpy(zero_copy_only=False)
        except TypeError:
            x = x.to_numpy()
    a = np.ascontiguousarray(array(name, x, np.float64))
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ShapeError(f"{name} must be 1-D, got shape {a.shape}")
    return a


def _pairs(lat1: Any, lon1: Any, lat2: Any, lon2: Any) -> list[npt.NDArray[np.float64]]:
    names = ("lat1", "lon1", "lat2", "lon2")
    cols = [_column(v, n) for v, n in zip((lat1, lon1, lat2, lon2), names, strict=True)]
    lengths = {len(c) for c in cols}
    if len(lengths) != 1:
        raise ShapeError(
            "coordinate arrays must have the same length, got "
            + ", ".join(f"{n}={len(c)}" for n, c in zip(names, cols, strict=True))
        )
    return cols


def _finish(
    out: tuple[npt.NDArray[np.float64], int, int | None], on_invalid: OnInvalid
) -> npt.NDArray[np.float64]:
    d, n_invalid, first = out
    if not isinstance(on_invalid, str) or on_invalid not in ("nan", "raise"):
        raise ParameterError(f"on_invalid must be 'nan' or 'raise', got on_invalid={on_invalid!r}")
    if n_invalid and on_invalid == "raise":
        raise ParameterError(
            f"{n_invalid} coordinate pair(s) are invalid (non-finite, or latitude outside "
            f"[-90, 90]); first at index {first}"
        )
    return d


def haversine(
    lat1: Any,
    lon1: Any,
    lat2: Any,
    lon2: Any,
    *,
    radius: float = MEAN_EARTH_RADIUS_KM,
    on_invalid: OnInvalid = "nan",
    n_threads: int | None = None,
) -> npt.NDArray[np.float64]:
    """Great-circle distance on a sphere.

    Parameters
    ----------
    lat1, lon1, lat2, lon2 : array_like [shape=(n,)]
        Coordinates in degrees.
    radius : float
        Sphere radius in km (default: the IUGG mean Earth radius).
    on_invalid : {"nan", "raise"}
        What an invalid pair gives: NaN (default) or a ``ParameterError``.
    n_threads : int, optional
        Worker threads.

    Returns
    -------
    d : np.ndarray [shape=(n,), dtype=float64]
        Distances in km.
    """
    a, b, c, d = _pairs(lat1, lon1, lat2, lon2)
    out = _native.haversine(
        a, b, c, d, radius=real("radius", radius), n_threads=resolve_threads(n_threads)
    )
    return _finish(out, on_invalid)


def geodesic(
    lat1: Any,
    lon1: Any,
    lat2: Any,
    lon2: Any,
    *,
    a: float = WGS84_A,
    f: float = WGS84_F,
    on_invalid: OnInvalid = "nan",
    n_threads: int | None = None,
) -> npt.NDArray[np.float64]:
    """Shortest distance on an ellipsoid (Karney's algorithm; WGS-84 default).

    Agrees with geographiclib (and so geopy's ``geodesic``) to well under a
    micrometre for every pair, antipodal and polar ones included.

    Parameters
    ----------
    lat1, lon1, lat2, lon2 : array_like [shape=(n,)]
        Coordinates in degrees.
    a : float
        Equatorial radius in metres.
    f : float
        Flattening, in [0, 0.1].
    on_invalid : {"nan", "raise"}
        What an invalid pair gives: NaN (default) or a ``ParameterError``.
    n_threads : int, optional
        Worker threads.

    Returns
    -------
    d : np.ndarray [shape=(n,), dtype=float64]
        Distances in km.
    """
    x1, y1, x2, y2 = _pairs(lat1, lon1, lat2, lon2)
    out = _native.geodesic(
        x1, y1, x2, y2, a=real("a", a), f=real("f", f), n_threads=resolve_threads(n_threads)
    )
    return _finish(out, on_invalid)


def geoscore(
    d: Any, *, scale: float = GEOSCORE_SCALE_KM, max_score: float = GEOSCORE_MAX
) -> npt.NDArray[np.float64]:
    """GeoScore ``max_score * exp(-d / scale)`` of distances ``d`` in km (NaN stays NaN)."""
    return _native.geoscore(
        _column(d, "d"), scale=real("scale", scale), max_score=real("max_score", max_score)
    )


@dataclass(frozen=True)
class GeoSummary:
    """Figures of a distance column (NaN distances left out of all of them)."""

    n: int
    n_valid: int
    mean_km: float
    geoscore: float
    accuracy: dict[float, float] = field(default_factory=dict)
    quantiles: dict[float, float] = field(default_factory=dict)


def summarize(
    d: Any,
    *,
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS_KM,
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES,
    scale: float = GEOSCORE_SCALE_KM,
    max_score: float = GEOSCORE_MAX,
    n_threads: int | None = None,
) -> GeoSummary:
    """Mean distance, GeoScore, accuracies ``d < t`` and quantiles in one pass.

    Quantiles use linear interpolation (numpy's and pandas' default).
    """
    col = _column(d, "d")
    n, nv, mean, gs, acc, q = _native.geo_summary(
        col,
        list(reals("thresholds", thresholds)),
        list(reals("quantiles", quantiles)),
        scale=real("scale", scale),
        max_score=real("max_score", max_score),
        n_threads=resolve_threads(n_threads),
    )
    return GeoSummary(
        n=int(n),
        n_valid=int(nv),
        mean_km=float(mean),
        geoscore=float(gs),
        accuracy={float(t): float(v) for t, v in zip(thresholds, acc, strict=False)},
        quantiles={float(x): float(v) for x, v in zip(quantiles, q, strict=False)},
    )


__all__ = [
    "GEOSCORE_MAX",
    "GEOSCORE_SCALE_KM",
    "MEAN_EARTH_RADIUS_KM",
    "GeoSummary",
    "geodesic",
    "geoscore",
    "haversine",
    "summarize",
]
