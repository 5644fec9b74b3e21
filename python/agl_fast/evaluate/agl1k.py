"""The ``agl1k`` scoring mode: the published AGL1K rules, quirks included.

These rules reproduce the paper's leaderboard. Their defects are kept on
purpose (see the ``strict`` mode for a sound alternative):

* a latitude or longitude whose stripped, lower-cased text is one of
  :data:`REFUSAL_TOKENS` (or missing) is a refusal scored 10,000 km, so
  ``"0.0"`` is a refusal but ``"0.00"`` is a real coordinate;
* unparseable values and latitudes outside [-90, 90] give NaN, which leaves
  the row out of the mean distance and the accuracies' denominators;
* countries go through a 101-entry alias table, everything else is
  title-cased, so ``Korea, Republic of`` in the truth never matches;
* continents are title-cased, ``Australia`` becomes ``Oceania`` and
  anything containing ``arctic`` becomes ``Antarctica``.
"""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import geo
from ..coords import LATITUDE_RANGE

REFUSAL_TOKENS = frozenset(
    {"0", "-1", "", "null", "none", "n/a", "na", "unknown", "unable", "cannot", "0.0"}
)
REFUSAL_DISTANCE_KM = 10_000.0

ALIASES_FILE = "agl1k_country_aliases.tsv"


@lru_cache(maxsize=4)
def load_aliases(path: str) -> dict[str, str]:
    """The AGL1K country alias table (``variant<TAB>canonical``, one header line).

    The benchmark distributes it as ``agl1k_country_aliases.tsv`` next to its
    ground truth; an absent file gives an empty table.
    """
    p = Path(path)
    if not p.is_file():
        return {}
    with p.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    return {r[0].strip().lower(): r[1].strip() for r in rows[1:] if len(r) >= 2}


def is_missing(v: Any) -> bool:
    """True for None and float NaN."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def is_refusal(v: Any) -> bool:
    """The published refusal test on a raw value."""
    return is_missing(v) or str(v).strip().lower() in REFUSAL_TOKENS


def parse_coordinate(v: Any) -> float:
    """Number or NaN (what ``float()`` of the raw text gives)."""
    try:
        return float(str(v).strip())
    except ValueError:
        return math.nan


def normalize_country(v: Any, aliases: dict[str, str] | None = None) -> str | None:
    """The published country normalisation (None for empty)."""
    if is_missing(v):
        return None
    s = str(v).strip()
    if not s:
        return None
    low = s.lower()
    if "taiwan" in low:
        return "China"
    if low.startswith("the "):
        low = low[4:]
    cleaned = low.replace(",", "").replace(".", "").replace(";", "").strip()
    table = aliases or {}
    if cleaned in table:
        return table[cleaned]
    if s.lower().startswith("the "):
        return "The " + s[4:].title()
    return s.title()


def normalize_continent(v: Any) -> str | None:
    """The published continent normalisation (None for empty)."""
    if is_missing(v):
        return None
    s = str(v).strip()
    if not s:
        return None
    if "arctic" in s.lower():
        return "Antarctica"
    t = s.title()
    return "Oceania" if t == "Australia" else t


def _match(pred: pd.Series, truth: pd.Series) -> np.ndarray:
    out = np.full(len(pred), np.nan)
    for i, (p, t) in enumerate(zip(pred, truth, strict=False)):
        if is_missing(p) or is_missing(t):
            continue
        out[i] = float(str(p).lower() == str(t).lower())
    return out


def score_rows(joined: pd.DataFrame, aliases: dict[str, str] | None = None) -> pd.DataFrame:
    """Per-row scores of predictions joined to the truth, by the published rules.

    ``joined`` holds the prediction columns and the truth columns
    (``latitude``, ``longitude``, ``city``, ``country``, ``continent``).
    Returns a frame with ``distance_km``, ``refused``, ``continent_ok``,
    ``country_ok`` and ``city_ok`` (NaN where the row does not count).
    """
    lat_raw, lon_raw = joined["predicted_latitude"], joined["predicted_longitude"]
    refused_coord = np.array(
        [is_refusal(a) or is_refusal(b) for a, b in zip(lat_raw, lon_raw, strict=False)], dtype=bool
    )
    lat = np.array([parse_coordinate(v) for v in lat_raw], dtype=np.float64)
    lon = np.array([parse_coordinate(v) for v in lon_raw], dtype=np.float64)
    lat[(lat < LATITUDE_RANGE[0]) | (lat > LATITUDE_RANGE[1])] = np.nan
    with np.errstate(invalid="ignore"):
        lon = np.where(np.isfinite(lon), (lon + 180.0) % 360.0 - 180.0, np.nan)
    d = geo.geodesic(
        joined["latitude"].to_numpy(np.float64),
        joined["longitude"].to_numpy(np.float64),
        np.where(refused_coord, 0.0, lat),
        np.where(refused_coord, 0.0, lon),
    )
    d = np.where(refused_coord, REFUSAL_DISTANCE_KM, d)
    table = aliases or {}
    p_country = joined["predicted_country"].map(lambda v: normalize_country(v, table))
    t_country = joined["country"].map(lambda v: normalize_country(v, table))
    p_cont = joined["predicted_continent"].map(normalize_continent)
    t_cont = joined["continent"].map(normalize_continent)
    p_city = joined["predicted_city"].map(lambda v: None if is_missing(v) or v == "" else v)
    refused = (
        refused_coord
        | joined["predicted_city"].map(is_refusal).to_numpy(bool)
        | p_country.map(is_refusal).to_numpy(bool)
        | p_cont.map(is_refusal).to_numpy(bool)
    )
    return pd.DataFrame(
        {
            "question_id": joined["question_id"].to_numpy(),
            "pred_latitude": lat,
            "pred_longitude": lon,
            "distance_km": d,
            "refused": refused,
            "continent_ok": _match(p_cont, t_cont),
            "country_ok": _match(p_country, t_country),
            "city_ok": _match(p_city, joined["city"]),
            "pred_continent": p_cont.to_numpy(),
            "true_continent": t_cont.to_numpy(),
            "pred_country": p_country.to_numpy(),
            "true_country": t_country.to_numpy(),
        }
    )
