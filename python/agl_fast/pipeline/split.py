"""Train / validation / test splits that no recording crosses.

A split assigns whole *units* of rows. :func:`split_by_group` makes each
duplicate group (``duplicate_group``, :mod:`agl_fast.pipeline.dedup`) one
unit and every clip outside a group its own, so two copies of a recording
never land in different splits. :func:`split_by_place` also joins into one
unit every two clips whose recording sites lie closer than ``min_km``
(great-circle distance, :func:`agl_fast.geo.haversine`; single linkage), so
any two clips of different splits are at least ``min_km`` apart.

Units are dealt out in a seeded random order, largest first, each to the
split furthest below its share of rows (:func:`assign_units`): the same
table, fractions and seed give the same splits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..coords import validate_coordinates
from ..exceptions import ParameterError
from ..geo import MEAN_EARTH_RADIUS_KM, haversine
from .dedup import require_groups

__all__ = [
    "DEFAULT_FRACTIONS",
    "SPLIT_COLUMN",
    "SPLIT_NAMES",
    "assign_units",
    "check_fractions",
    "group_units",
    "place_units",
    "split_by_group",
    "split_by_place",
]

_log = logging.getLogger("agl_fast.pipeline")

#: The splits, in order, and the share of rows each gets by default.
SPLIT_NAMES = ("train", "validation", "test")
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)
#: The column the split of each row is written to.
SPLIT_COLUMN = "split"
#: Kilometres per degree of latitude on the mean Earth sphere.
_KM_PER_DEGREE = MEAN_EARTH_RADIUS_KM * np.pi / 180.0


def check_fractions(fractions: Sequence[float]) -> np.ndarray:
    """The shares of the splits as an array, checked: one per split of
    :data:`SPLIT_NAMES`, finite, non-negative, summing to 1 (within 1e-6).

    Raises
    ------
    ParameterError
        Any other value.
    """
    f = np.asarray(list(fractions), np.float64)
    if f.shape != (len(SPLIT_NAMES),):
        raise ParameterError(
            f"fractions must give {len(SPLIT_NAMES)} shares ({', '.join(SPLIT_NAMES)}), "
            f"got {list(fractions)}"
        )
    if not np.all(np.isfinite(f)) or np.any(f < 0) or abs(f.sum() - 1.0) > 1e-6:
        raise ParameterError(f"fractions must be >= 0 and sum to 1, got {f.tolist()}")
    return f


def group_units(table: pa.Table) -> np.ndarray:
    """Unit of each row: one per duplicate group, one per clip outside a group.

    Returns
    -------
    np.ndarray [shape=(n,), dtype=int64]

    Raises
    ------
    ParameterError
        The table has no ``duplicate_group`` column (run ``agl-fast dedup``).
    """
    require_groups(table, "so that no recording crosses a split")
    groups = table.column("duplicate_group").to_pylist()
    ids: dict[Any, int] = {}
    out = np.empty(len(groups), np.int64)
    for i, g in enumerate(groups):
        out[i] = ids.setdefault(("row", i) if g is None else ("group", g), len(ids))
    return out


def _roots(parent: np.ndarray) -> np.ndarray:
    """Each element's root in a disjoint-set forest (pointer jumping)."""
    p = parent.copy()
    while True:
        q = p[p]
        if np.array_equal(q, p):
            return p
        p = q


def _link(parent: np.ndarray, i: int, j: int) -> None:
    a, b = i, j
    while parent[a] != a:
        a = int(parent[a])
    while parent[b] != b:
        b = int(parent[b])
    if a != b:
        parent[max(a, b)] = min(a, b)


def place_units(
    table: pa.Table, min_km: float, n_threads: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Units of rows no split may separate: duplicate groups
    (:func:`group_units`) joined with every two sites closer than ``min_km``.

    Parameters
    ----------
    table : pa.Table
        Rows with ``duplicate_group``, ``latitude`` and ``longitude``
        (degrees; checked by :func:`agl_fast.coords.validate_coordinates`).
    min_km : float
        Distance in km that clips of different splits keep at least.
    n_threads : int or None
        Threads of the distance kernel.

    Returns
    -------
    units : np.ndarray [shape=(n,), dtype=int64]
        Unit of each row (-1 for a row without valid coordinates).
    placed : np.ndarray [shape=(n,), dtype=bool]
        Rows with valid coordinates.
    """
    if not (isinstance(min_km, (int, float)) and np.isfinite(min_km) and min_km >= 0):
        raise ParameterError(f"min_km must be a finite number >= 0, got min_km={min_km!r}")
    for c in ("latitude", "longitude"):
        if c not in table.column_names:
            raise ParameterError(f"splitting by place needs a {c!r} column")
    lat, lon, _ = validate_coordinates(table.column("latitude"), table.column("longitude"))
    placed = np.isfinite(lat) & np.isfinite(lon)
    units = group_units(table)
    n = table.num_rows
    # Disjoint sets over the units, then the sites: rows at one site are one.
    parent = np.arange(n + 1, dtype=np.int64)  # units are < n
    sites: dict[tuple[float, float], int] = {}
    for i in np.flatnonzero(placed).tolist():
        first = sites.setdefault((float(lat[i]), float(lon[i])), i)
        _link(parent, int(units[i]), int(units[first]))
    where = np.array(list(sites.values()), np.int64)
    if len(where) > 1 and min_km > 0:
        order = where[np.argsort(lat[where], kind="stable")]
        s_lat, s_lon = lat[order], lon[order]
        # Sites further apart in latitude than min_km are further apart on
        # the sphere: only those within the band need a distance.
        band = min_km / _KM_PER_DEGREE
        ends = np.searchsorted(s_lat, s_lat + band, side="right")
        for a in range(len(order) - 1):
            b = np.arange(a + 1, ends[a])
            if not len(b):
                continue
            d = haversine(
                np.full(len(b), s_lat[a]), np.full(len(b), s_lon[a]), s_lat[b], s_lon[b],
                n_threads=n_threads,
            )  # fmt: skip
            for j in b[d < min_km].tolist():
                _link(parent, int(units[order[a]]), int(units[order[j]]))
    root = _roots(parent)[units]
    return np.where(placed, root, -1), placed


def assign_units(units: np.ndarray, fractions: Sequence[float], seed: int = 0) -> np.ndarray:
    """Split index (into :data:`SPLIT_NAMES`) of each row: whole units,
    dealt in a seeded random order, largest first, each to the split
    furthest below its share of rows.

    Parameters
    ----------
    units : np.ndarray [shape=(n,), dtype=int64]
        Unit of each row (negative: no unit, no split).
    fractions : sequence of float
        Share of rows per split (:func:`check_fractions`).
    seed : int
        Seed of the order.

    Returns
    -------
    np.ndarray [shape=(n,), dtype=int64]
        -1 for a row without a unit.
    """
    f = check_fractions(fractions)
    out = np.full(len(units), -1, np.int64)
    ok = units >= 0
    ids, inverse, sizes = np.unique(units[ok], return_inverse=True, return_counts=True)
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(len(ids))
    order = shuffled[np.argsort(-sizes[shuffled], kind="stable")]
    target = f * ok.sum()
    filled = np.zeros(len(f))
    chosen = np.empty(len(ids), np.int64)
    open_ = f > 0
    for u in order.tolist():
        deficit = np.where(open_, target - filled, -np.inf)
        k = int(np.argmax(deficit))
        chosen[u] = k
        filled[k] += sizes[u]
    out[ok] = chosen[inverse]
    return out


def _labels(index: np.ndarray) -> pa.Array:
    return pa.array([SPLIT_NAMES[k] if k >= 0 else None for k in index.tolist()], pa.string())


def _counts(index: np.ndarray, units: np.ndarray) -> dict[str, Any]:
    rows = {name: int((index == k).sum()) for k, name in enumerate(SPLIT_NAMES)}
    empty = [name for name, c in rows.items() if c == 0]
    return {"rows": rows, "units": len(np.unique(units[units >= 0])), "empty": empty}


def split_by_group(
    table: pa.Table, fractions: Sequence[float] = DEFAULT_FRACTIONS, *, seed: int = 0
) -> tuple[pa.Array, dict[str, Any]]:
    """Splits that keep every duplicate group whole.

    Returns
    -------
    split : pa.Array [shape=(n,), type=string]
        :data:`SPLIT_NAMES` entry of each row.
    counts : dict
        ``rows`` per split, ``units`` (groups and ungrouped clips),
        ``empty`` (splits with a share that got no row: too few units).
    """
    units = group_units(table)
    index = assign_units(units, fractions, seed)
    counts = _counts(index, units)
    return _labels(index), {"by": "group", **counts}


def split_by_place(
    table: pa.Table,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    *,
    min_km: float,
    seed: int = 0,
    n_threads: int | None = None,
) -> tuple[pa.Array, dict[str, Any]]:
    """Splits whose recording sites lie at least ``min_km`` apart, duplicate
    groups kept whole (:func:`place_units`).

    Returns
    -------
    split : pa.Array [shape=(n,), type=string]
        :data:`SPLIT_NAMES` entry of each row; null for a row without valid
        coordinates (counted under ``unplaced`` and logged).
    counts : dict
        As :func:`split_by_group`, plus ``min_km`` and ``unplaced``.
    """
    units, placed = place_units(table, min_km, n_threads)
    index = assign_units(units, fractions, seed)
    counts = _counts(index, units)
    unplaced = int((~placed).sum())
    if unplaced:
        _log.warning("%d of %d rows have no valid coordinates: in no split", unplaced, len(units))
    return _labels(index), {"by": "place", "min_km": min_km, "unplaced": unplaced, **counts}
