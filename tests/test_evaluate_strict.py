"""Strict mode, readers and the bad-input cases of the evaluation suite."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from agl_fast import evaluate as ev
from agl_fast.evaluate.gazetteer import Gazetteer, fold
from agl_fast.exceptions import ParameterError

TRUTH = pd.DataFrame(
    {
        "key": ["a", "b", "c", "d"],
        "latitude": [48.8566, 37.5665, 41.9029, -33.8688],
        "longitude": [2.3522, 126.978, 12.4534, 151.2093],
        "city": ["Paris", "Seoul", "Vatican City", "Sydney"],
        "country": ["France", "Korea, Republic of", "Holy See", "Australia"],
        "continent": ["Europe", "Asia", None, "Oceania"],
        "human_sounds": [0.5, 0.0, 0.0, 0.0],
        "animal": [0.0, 1.0, 0.0, 0.0],
        "music": [0.0] * 4,
        "natural_sounds": [0.0] * 4,
        "channel": [0.0] * 4,
        "environment_and_background": [0.0] * 4,
        "sounds_of_things": [0.0] * 4,
    }
)


def _write(tmp_path, name, records):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    return p


def test_strict_differs_from_agl1k_on_spellings(tmp_path):
    recs = [
        {
            "question_id": "a",
            "predicted_city": "PARIS",
            "predicted_country": "France",
            "predicted_continent": "Europe",
            "predicted_latitude": "48.85",
            "predicted_longitude": "2.35",
        },
        {
            "question_id": "b",
            "predicted_city": "Seoul",
            "predicted_country": "South Korea",
            "predicted_continent": "Asia",
            "predicted_latitude": "37.5",
            "predicted_longitude": "127",
        },
        {
            "question_id": "c",
            "predicted_city": "Rome",
            "predicted_country": "Vatican",
            "predicted_continent": "Europe",
            "predicted_latitude": "41.9",
            "predicted_longitude": "12.45",
        },
        {
            "question_id": "d",
            "predicted_city": "unknown",
            "predicted_country": "unknown",
            "predicted_continent": "unknown",
            "predicted_latitude": "0.0",
            "predicted_longitude": "0.0",
        },
        {"question_id": "zzz", "predicted_latitude": "1", "predicted_longitude": "1"},
        {"question_id": "a", "predicted_latitude": "5", "predicted_longitude": "5"},
    ]
    pred, rr = ev.read_predictions(_write(tmp_path, "m.jsonl", recs))
    assert rr.n_duplicate_keys == 1
    s_strict, jr = ev.score(pred, TRUTH, mode="strict")
    s_agl, _ = ev.score(pred, TRUTH, mode="agl1k")
    assert jr.n_unknown_keys == 1 and jr.n_scored == 4
    # Korea, Republic of never matches in agl1k mode, does in strict mode.
    assert s_agl["country_ok"].tolist()[:3] == [1.0, 0.0, 0.0]
    assert s_strict["country_ok"].tolist() == [1.0, 1.0, 1.0, 0.0]
    # The Vatican truth has no continent in the file: agl1k drops it,
    # strict derives Europe from the ISO country.
    assert np.isnan(s_agl["continent_ok"][2]) and s_strict["continent_ok"][2] == 1.0
    # The refusal is 10,000 km in agl1k, left out of the distances in strict.
    assert s_agl["distance_km"][3] == 10_000.0 and np.isnan(s_strict["distance_km"][3])
    assert s_strict["status"][3] == "refusal" and s_strict["refused"][3]


def test_bad_coordinates_and_empty_files(tmp_path):
    recs = [
        {"question_id": "a", "predicted_latitude": "95", "predicted_longitude": "2"},
        {"question_id": "b", "predicted_latitude": "nan", "predicted_longitude": "inf"},
        {"question_id": "c", "predicted_latitude": "north", "predicted_longitude": "x"},
        {"question_id": "d", "predicted_latitude": "-33.9", "predicted_longitude": "511.2"},
    ]
    pred, _ = ev.read_predictions(_write(tmp_path, "m.jsonl", recs))
    # agl1k keeps the reference rules: longitude 511.2 is scored (wrapped).
    s, _ = ev.score(pred, TRUTH, mode="agl1k")
    d = s["distance_km"].to_numpy()
    assert np.isnan(d[:3]).all() and d[3] < 10
    assert ev.table_metrics(s)["n_distance"] == 1
    # strict refuses every number out of range or not finite, as a typed status.
    s, _ = ev.score(pred, TRUTH, mode="strict")
    assert list(s["status"]) == ["invalid", "invalid", "refusal", "invalid"]
    assert np.isnan(s["distance_km"].to_numpy()).all()
    assert ev.table_metrics(s)["n_distance"] == 0
    empty, rr = ev.read_predictions(_write(tmp_path, "e.jsonl", []))
    assert rr.n_rows == 0
    s, jr = ev.score(empty, TRUTH, mode="strict")
    assert jr.n_scored == 0 and np.isnan(ev.table_metrics(s)["geoscore"])
    with pytest.raises(ParameterError, match="unknown prediction format"):
        ev.read_predictions(tmp_path / "x.txt")


def test_model_that_answered_nothing(tmp_path):
    recs = [{"question_id": k, "model_output": ""} for k in "abcd"]
    pred, _ = ev.read_predictions(_write(tmp_path, "m.jsonl", recs))
    s, _ = ev.score(pred, TRUTH, mode="strict")
    assert (s["status"] == "empty").all()
    m = ev.table_metrics(s)
    assert m["reject_rate"] == 1.0 and m["n_distance"] == 0


def test_raw_output_is_parsed_in_strict_mode(tmp_path):
    recs = [
        {
            "question_id": "a",
            "model_output": '```json\n{"city": "Paris", "lat": 48.85, "lng": 2.35}\n```',
        }
    ]
    pred, _ = ev.read_predictions(_write(tmp_path, "m.jsonl", recs))
    s, _ = ev.score(pred, TRUTH, mode="strict")
    assert s["status"][0] == "ok" and s["city_ok"][0] == 1.0 and s["distance_km"][0] < 2


def test_gazetteer_folding_and_reverse_geocoding():
    g = Gazetteer.default()
    assert fold("  São  Paulo ") == "sao paulo"
    assert g.same_city("Köln", "Cologne") and not g.same_city("Paris", "London")
    assert g.country_code("Türkiye") == "TR" and g.country_code("the Netherlands") == "NL"
    assert g.continent_of(g.country_code("Egypt")) == "AF"
    assert g.reverse_country([48.85, 35.68, np.nan], [2.35, 139.69, 0.0]) == ["FR", "JP", None]


def test_bootstrap_and_paired_test_are_seeded():
    rng = np.random.default_rng(0)
    n = 300
    s = pd.DataFrame(
        {
            "question_id": [str(i) for i in range(n)],
            "distance_km": rng.exponential(2000, n),
            "refused": rng.random(n) < 0.1,
            "continent_ok": (rng.random(n) < 0.5).astype(float),
            "country_ok": (rng.random(n) < 0.3).astype(float),
            "city_ok": (rng.random(n) < 0.1).astype(float),
            "human_sounds": rng.random(n),
        }
    )
    ci = ev.bootstrap_ci(s, n_boot=200, seed=1)
    assert ci == ev.bootstrap_ci(s, n_boot=200, seed=1)
    m = ev.table_metrics(
        s.assign(
            **{
                c: 0.0
                for c in (
                    "animal",
                    "music",
                    "natural_sounds",
                    "channel",
                    "environment_and_background",
                    "sounds_of_things",
                )
            }
        )
    )
    for k in ("geoscore", "mean_distance_km", "q50_km"):
        assert ci[k][0] <= m[k] <= ci[k][1]
    worse = s.assign(distance_km=s["distance_km"] * 2)
    res = {r.metric: r for r in ev.paired_bootstrap(s, worse, n_boot=200, seed=1)}
    assert res["mean_distance_km"].diff < 0 and res["mean_distance_km"].p_value < 0.01
    assert res["country_acc"].p_value == 1.0
