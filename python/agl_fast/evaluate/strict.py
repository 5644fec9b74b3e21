"""The ``strict`` scoring mode (the default).

* Answers are classified by :func:`~agl_fast.evaluate.parse.parse_answer`
  (``status`` column); only ``ok`` rows enter the distance figures, so
  refusals are reported by ``reject_rate`` and never mixed into the mean.
  ``0, 0`` ("null island") counts as a refusal.
* Countries are compared as ISO 3166-1 alpha-2 codes: names, ISO codes and
  the alias tables of :mod:`~agl_fast.evaluate.gazetteer` (English and local
  names, the ground-truth spellings such as ``Korea, Republic of``).
* Continents of the truth are derived from its ISO country with the seven-
  continent mapping of GeoNames (AF, AN, AS, EU, NA, OC, SA; Russia and Cyprus in EU,
  Turkey in AS, Egypt in AF); predicted continents are parsed from their
  text (``Australia`` -> OC, ``X or Y`` -> wrong).
* Truth rows named ``China`` whose coordinates lie in Taiwan, Hong Kong or
  Macao (the AGL1K truth folds them into China) accept either ISO code.
* Cities match after Unicode/diacritic/case folding or through GeoNames
  alternate names.
* ``coords_mismatch`` flags a prediction whose coordinates fall in another
  country than the one it names (offline reverse geocoding).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .. import geo
from . import gazetteer
from .parse import from_fields, parse_answer

SEPARATE_FROM_CN = frozenset({"TW", "HK", "MO"})

_FIELDS = {
    "predicted_city": "city",
    "predicted_country": "country",
    "predicted_continent": "continent",
    "predicted_latitude": "latitude",
    "predicted_longitude": "longitude",
}


def _answer(row: dict[str, Any]) -> Any:
    fields = {v: row.get(k) for k, v in _FIELDS.items()}
    has_fields = any(
        v is not None and not (isinstance(v, float) and math.isnan(v)) and str(v).strip() != ""
        for v in fields.values()
    )
    text = row.get("model_output")
    if not has_fields and isinstance(text, str) and text.strip():
        return parse_answer(text, row.get("finish_reason"))
    if not has_fields:
        return parse_answer(None, row.get("finish_reason"))
    return from_fields(fields)


def score_rows(joined: pd.DataFrame, aliases: dict[str, str]) -> pd.DataFrame:
    """Per-row strict scores; see the module docs."""
    gaz = gazetteer.Gazetteer.default(extra_aliases=aliases)
    answers = [_answer(r) for r in joined.to_dict("records")]
    status = np.array([a.status for a in answers], dtype=object)
    lat = np.array([np.nan if a.latitude is None else a.latitude for a in answers])
    lon = np.array([np.nan if a.longitude is None else a.longitude for a in answers])
    null_island = (lat == 0) & (lon == 0)
    status[null_island & (status == "ok")] = "refusal"
    answered = status == "ok"
    d = geo.geodesic(
        joined["latitude"].to_numpy(np.float64),
        joined["longitude"].to_numpy(np.float64),
        np.where(answered, lat, 0.0),
        np.where(answered, lon, 0.0),
    )
    d = np.where(answered, d, np.nan)
    t_iso = [gaz.country_code(v) for v in joined["country"]]
    # The AGL1K truth names China for clips in Taiwan, Hong Kong and Macao,
    # which ISO 3166-1 codes separately: either answer counts there.
    t_rg = gaz.reverse_country(joined["latitude"], joined["longitude"])
    t_alt = [
        r if t == "CN" and r in SEPARATE_FROM_CN else t for t, r in zip(t_iso, t_rg, strict=True)
    ]
    p_iso = [gaz.country_code(a.country) for a in answers]
    t_cont = [gaz.continent_of(c) for c in t_iso]
    p_cont = [gaz.continent_code(a.continent) for a in answers]
    rg_iso = gaz.reverse_country(np.where(answered, lat, np.nan), np.where(answered, lon, np.nan))
    refused = np.isin(status, ["refusal", "blocked", "empty"])

    def ok(pred: list[Any], truth: list[Any], alt: list[Any] | None = None) -> np.ndarray:
        out = np.full(len(pred), np.nan)
        for i, (p, t) in enumerate(zip(pred, truth, strict=True)):
            if t is None:
                continue
            out[i] = float(p is not None and (p == t or (alt is not None and p == alt[i])))
        return out

    city_ok = np.array(
        [
            np.nan if not isinstance(t, str) or not t else float(gaz.same_city(a.city, t))
            for a, t in zip(answers, joined["city"], strict=False)
        ]
    )
    mismatch = np.array(
        [bool(p and r and p != r) for p, r in zip(p_iso, rg_iso, strict=False)],
        dtype=bool,
    )
    return pd.DataFrame(
        {
            "question_id": joined["question_id"].to_numpy(),
            "status": status.astype(str),
            "pred_latitude": lat,
            "pred_longitude": lon,
            "distance_km": d,
            "refused": refused,
            "continent_ok": ok(p_cont, t_cont),
            "country_ok": ok(p_iso, t_iso, t_alt),
            "city_ok": city_ok,
            "pred_continent": p_cont,
            "true_continent": t_cont,
            "pred_country": p_iso,
            "true_country": t_iso,
            "coords_country": rg_iso,
            "coords_mismatch": mismatch,
        }
    )
