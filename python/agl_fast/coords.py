"""Geographic coordinates: the one place where they are parsed and checked.

Manifests, curation inputs, truth files of ``evaluate`` and the game all
read latitude and longitude through this module, so that one rule decides
what a coordinate is:

* a real number (``int``, ``float``, a numpy number) or text that parses as
  one (surrounding whitespace allowed);
* finite;
* latitude in ``[-90, 90]`` and longitude in ``[-180, 180]`` degrees,
  never wrapped.

``bool`` is not a number here (``True`` is not a latitude). A value that is
absent (``None``, an empty string, NaN from a reader's missing cell) is
*missing*, which is not the same as *invalid*: :func:`validate_coordinates`
gives it NaN and no reason, while an invalid value gets NaN and a reason a
person understands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

import numpy as np

from .exceptions import InvalidCoordinatesError

__all__ = [
    "LATITUDE_RANGE",
    "LONGITUDE_RANGE",
    "check_column",
    "coordinate_problem",
    "parse_coordinate",
    "validate_coordinates",
]

#: Closed range of a latitude in degrees.
LATITUDE_RANGE = (-90.0, 90.0)
#: Closed range of a longitude in degrees (no wrapping: 190 is an error).
LONGITUDE_RANGE = (-180.0, 180.0)

_RANGES = {"latitude": LATITUDE_RANGE, "longitude": LONGITUDE_RANGE}
_AXES = {"lat": "latitude", "latitude": "latitude", "lon": "longitude", "longitude": "longitude"}
#: Characters of a value shown in a message at most.
_SHOWN = 40


def _axis(axis: str) -> str:
    try:
        return _AXES[axis]
    except (KeyError, TypeError):
        raise InvalidCoordinatesError(
            f"axis must be 'latitude' or 'longitude', got {axis!r}"
        ) from None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float | np.floating):
        return math.isnan(float(value))
    return False


def _problem(value: object, axis: str) -> tuple[float, str | None]:
    """``(degrees, None)`` for a valid value, ``(nan, reason)`` otherwise
    (a missing value is a reason too here: the caller decides)."""
    if _is_missing(value):
        return math.nan, f"{axis} is missing"
    if isinstance(value, bool | np.bool_):
        return math.nan, f"{axis} {_shown(value)} is not a number"
    if isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            return math.nan, f"{axis} {_shown(value)} is not a number"
    elif isinstance(value, Real | np.integer | np.floating):
        try:
            x = float(value)
        except OverflowError:
            return math.nan, f"{axis} {_shown(value)} is out of range"
    else:
        return math.nan, f"{axis} {_shown(value)} is not a number"
    if not math.isfinite(x):
        return math.nan, f"{axis} {_shown(value)} is not finite"
    lo, hi = _RANGES[axis]
    if not lo <= x <= hi:
        return math.nan, f"{axis} {_shown(value)} is outside [{lo:g}, {hi:g}] degrees"
    return x, None


def parse_coordinate(value: object, axis: str) -> float:
    """One latitude or longitude in degrees, checked.

    Parameters
    ----------
    value : object
        A real number or text that parses as one.
    axis : {"latitude", "longitude"}
        Which coordinate (``"lat"``/``"lon"`` are accepted too).

    Returns
    -------
    float
        The value in degrees, unchanged (never wrapped).

    Raises
    ------
    InvalidCoordinatesError
        When the value is missing, not numeric, not finite or out of range;
        the message names the value and the range.

    Examples
    --------
    >>> parse_coordinate(" 48.85 ", "latitude")
    48.85
    """
    x, reason = _problem(value, _axis(axis))
    if reason is not None:
        raise InvalidCoordinatesError(reason)
    return x


def coordinate_problem(lat: object, lon: object) -> str | None:
    """Why a latitude/longitude pair is not valid, or None when it is.

    Parameters
    ----------
    lat, lon : object
        The raw values (numbers or text).

    Returns
    -------
    str or None
        A reason naming each bad value (``"latitude 200 is outside [-90,
        90] degrees; longitude 'east' is not a number"``), None when both
        are valid.
    """
    reasons = [r for r in (_problem(lat, "latitude")[1], _problem(lon, "longitude")[1]) if r]
    return "; ".join(reasons) if reasons else None


def _values(col: Any) -> Sequence[Any]:
    """Python values of a sequence, numpy array, Arrow array or pandas Series."""
    if hasattr(col, "to_pylist"):
        return list(col.to_pylist())
    if hasattr(col, "tolist"):
        return list(col.tolist())
    return list(col)


def check_column(values: Any, axis: str) -> tuple[np.ndarray, list[str | None]]:
    """Check one column of latitudes or longitudes (a table that has only
    one of the two).

    Parameters
    ----------
    values : sequence, np.ndarray, Arrow array or pandas Series [shape=(n,)]
        Raw values, one per row.
    axis : {"latitude", "longitude"}
        Which coordinate.

    Returns
    -------
    degrees : np.ndarray [shape=(n,), dtype=float64]
        NaN where missing or invalid.
    reasons : list of (str or None) [length n]
        None for valid and missing values, else the reason.
    """
    name = _axis(axis)
    vals = _values(values)
    out = np.full(len(vals), np.nan)
    reasons: list[str | None] = [None] * len(vals)
    for i, v in enumerate(vals):
        if _is_missing(v):
            continue
        out[i], reasons[i] = _problem(v, name)
    return out, reasons


def validate_coordinates(
    lat: Any, lon: Any, *, missing_ok: bool = True
) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """Check a column of latitudes and one of longitudes.

    Parameters
    ----------
    lat, lon : sequence, np.ndarray, Arrow array or pandas Series [shape=(n,)]
        Raw values, one per row.
    missing_ok : bool
        Whether a row without coordinates (both values missing) is fine, as
        in a curation manifest (default), or a problem, as in a truth file.

    Returns
    -------
    lat, lon : np.ndarray [shape=(n,), dtype=float64]
        Degrees; NaN where the value is missing or invalid (an invalid value
        makes the whole pair NaN).
    reasons : list of (str or None) [length n]
        None for a valid pair and, with ``missing_ok``, for a row whose two
        values are both missing; otherwise the reason, as
        :func:`coordinate_problem` words it.

    Raises
    ------
    InvalidCoordinatesError
        When the two columns differ in length.
    """
    lats, lons = _values(lat), _values(lon)
    if len(lats) != len(lons):
        raise InvalidCoordinatesError(
            f"latitude and longitude columns differ in length: {len(lats)} and {len(lons)}"
        )
    n = len(lats)
    out_lat = np.full(n, np.nan)
    out_lon = np.full(n, np.nan)
    reasons: list[str | None] = [None] * n
    for i, (a, b) in enumerate(zip(lats, lons, strict=True)):
        if missing_ok and _is_missing(a) and _is_missing(b):
            continue
        x, ra = _problem(a, "latitude")
        y, rb = _problem(b, "longitude")
        if ra is None and rb is None:
            out_lat[i], out_lon[i] = x, y
        else:
            reasons[i] = "; ".join(r for r in (ra, rb) if r)
    return out_lat, out_lon, reasons
