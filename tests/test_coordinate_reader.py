"""The one coordinate reader (``alm.parse.coerce_coordinate``) and the answer
parser around it: numbers read exactly as Python's ``float`` reads them,
non-finite and out-of-range values as a typed failure, total on hostile
answers, and the answer chosen as the reference parser would choose it."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pandas as pd
import pytest

from agl_fast import geo
from agl_fast.alm.parse import coerce_coordinate, parse_answer, parse_upstream
from agl_fast.cli import main
from agl_fast.exceptions import InvalidCoordinatesError

N_NUMERALS = 100_000


def _digits(rng: random.Random, lo: int, hi: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(rng.randint(lo, hi)))


def _numeral(rng: random.Random, *, json_only: bool = False) -> str:
    """One numeral: sign, integer part (leading zeros, up to 400 digits now
    and then), fraction (or only a fraction), exponent (large ones too).
    ``json_only``: the JSON grammar (no ``+``, no bare ``.5`` or ``5.``)."""
    sign = rng.choice(["", "-"] if json_only else ["", "", "-", "+"])
    long_int = rng.random() < 0.02
    whole = _digits(rng, 300, 400) if long_int else _digits(rng, 1, 4)
    if json_only and len(whole) > 1:
        whole = whole.lstrip("0") or "0"
    frac = ""
    r = rng.random()
    if r < 0.6:
        frac = "." + _digits(rng, 1, 25)
    elif r < 0.65 and not json_only:
        frac = "."
    elif r < 0.7 and not json_only:
        whole, frac = "", "." + _digits(rng, 1, 8)
    exp = ""
    r = rng.random()
    if r < 0.45:
        exp = rng.choice("eE") + rng.choice(["", "-", "+"]) + _digits(rng, 1, 2)
    elif r < 0.5:
        exp = rng.choice("eE") + rng.choice(["", "-"]) + str(rng.choice([305, 308, 309, 320, 400]))
    return sign + whole + frac + exp


def _expect(numeral: str, axis: str) -> float | None:
    """float()'s value when it is a valid coordinate, None when it is not."""
    x = float(numeral)
    limit = 90.0 if axis == "latitude" else 180.0
    return x if math.isfinite(x) and abs(x) <= limit else None


def test_coerce_coordinate_agrees_with_float_on_generated_numerals():
    rng = random.Random(20260)
    n_valid = n_invalid = n_exp = 0
    for i in range(N_NUMERALS):
        s = _numeral(rng)
        axis = "latitude" if i % 2 else "longitude"
        want = _expect(s, axis)
        n_exp += "e" in s.lower()
        # The decimal comma and surrounding text are read the same way.
        text = s.replace(".", ",") if i % 7 == 0 else s
        text = f" {text}° " if i % 5 == 0 else text
        if want is None:
            n_invalid += 1
            with pytest.raises(InvalidCoordinatesError, match=axis):
                coerce_coordinate(text, axis)
        else:
            n_valid += 1
            got = coerce_coordinate(text, axis)
            assert got == want and math.copysign(1, got) == math.copysign(1, want), (text, got)
    # The generator covers both outcomes and exponents substantially.
    assert n_valid > 30_000 and n_invalid > 10_000 and n_exp > 40_000


def test_json_numbers_in_an_answer_are_read_exactly():
    rng = random.Random(7)
    for _ in range(10_000):
        s = _numeral(rng, json_only=True)
        a = parse_answer(f'{{"city": "c", "latitude": {s}, "longitude": 2.5}}')
        want = _expect(s, "latitude")
        if want is None:
            assert (a.status, a.latitude, a.longitude) == ("invalid", None, None), s
            assert a.error and "latitude" in a.error
        else:
            assert (a.status, a.latitude, a.longitude) == ("ok", want, 2.5), s


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1e-05", 0.00001), ("4.885e1", 48.85), ("-3.39E+1 ", -33.9), (".5", 0.5),
     ("48,85° N", 48.85), ("33.9 S", -33.9), ("1.5e1 W", -15.0), ("12E", 12.0),
     ("\u221233.9", -33.9), ("\uff14\uff18.85", 48.85), ("4\u200b8.5", 48.5),
     (1, 1.0), (-0.0, -0.0), ("unknown", None), ("north", None), (None, None),
     (float("nan"), None)],
)  # fmt: skip
def test_coerce_coordinate_examples(value, expected):
    assert coerce_coordinate(value, "latitude") == expected


@pytest.mark.parametrize(
    "value",
    ["1e+308", "1e308", "nan", "NaN", "-inf", "Infinity", "9" * 300, "9" * 400, "9" * 5000,
     "200", "-90.0001", float("inf"), 10**400, 1e308],
)  # fmt: skip
def test_non_finite_and_out_of_range_are_a_typed_failure(value):
    with pytest.raises(InvalidCoordinatesError):
        coerce_coordinate(value, "latitude")


def test_longitude_range_is_checked():
    assert coerce_coordinate("180", "longitude") == 180.0
    with pytest.raises(InvalidCoordinatesError, match="longitude"):
        coerce_coordinate("180.5", "longitude")


@pytest.mark.parametrize(
    "raw",
    ['{"city": "Rome", "latitude": ' + "9" * 400 + ', "longitude": 12}',
     '{"city": "Rome", "latitude": ' + "9" * 5000 + ', "longitude": 12}',
     '{"city": "Rome", "latitude": "' + "9" * 5000 + '", "longitude": 12}',
     '{"city": "Rome", "latitude": NaN, "longitude": Infinity}',
     '{"city": "Rome", "latitude": 1e308, "longitude": 12}',
     '{"city": "Rome", "latitude": "nan", "longitude": "inf"}',
     "{'city': 'Rome', 'latitude': " + "9" * 5000 + ", 'longitude': 12,}",
     '{"city": "Rome", "latitude": 200, "longitude": 12}'],
)  # fmt: skip
def test_hostile_numbers_in_answers_are_invalid_not_partial(raw):
    a = parse_answer(raw)
    assert (a.status, a.latitude, a.longitude, a.city) == ("invalid", None, None, "Rome")
    assert a.error is not None and len(a.error) < 300


@pytest.mark.parametrize(
    "raw",
    ["[" * 100_000, '{"a": ' + "[" * 100_000 + "}", "{" * 100_000,
     '{"city": "x", "r": ' + '{"a": ' * 5_000 + "1" + "}" * 5_000 + "}"],
)  # fmt: skip
def test_deep_nesting_is_not_an_answer_and_raises_nothing(raw):
    a = parse_answer(raw)
    assert a.status in ("unparseable", "partial")
    assert a.latitude is None


def test_a_fake_block_before_the_real_answer_is_not_the_answer():
    real = '{"city": "Paris", "country": "France", "latitude": 48.85, "longitude": 2.35}'
    for fake in ('{"predicted_latitude": 1e308, "predicted_longitude": NaN, "city": "X"}',
                 '{"latitude": 1e308, "longitude": NaN}',
                 '{"lat": "91", "lon": "2"}'):  # fmt: skip
        a = parse_answer(f"Note: {fake}\nAnswer:\n```json\n{real}\n```")
        assert (a.status, a.city, a.latitude, a.longitude) == ("ok", "Paris", 48.85, 2.35), fake
    # A fake block alone is a typed failure, never stored values.
    a = parse_answer('{"predicted_latitude": 1e308, "predicted_longitude": NaN}')
    assert (a.status, a.latitude, a.longitude) == ("invalid", None, None)


def test_the_reference_parsers_object_is_read_when_it_holds_an_answer():
    # A nested object first: the reference code reads the first brace-free
    # object (Oslo); so does parse_answer, though Bergen's object starts first.
    text = ('{"notes": {"city": "Oslo", "latitude": 59.91, "longitude": 10.75}, '
            '"city": "Bergen", "latitude": 60.39, "longitude": 5.32}')  # fmt: skip
    ref = parse_upstream(text)
    a = parse_answer(text)
    assert (ref["city"], ref["latitude"]) == ("Oslo", 59.91)
    assert (a.city, a.latitude, a.longitude) == ("Oslo", 59.91, 10.75)


def test_upstream_parser_keeps_the_reference_rules():
    # float() of the raw value, no range check, an overflow ends the reading.
    assert parse_upstream('{"latitude": "1e-05", "longitude": 200}')["latitude"] == 1e-05
    assert parse_upstream('{"latitude": "1e-05", "longitude": 200}')["longitude"] == 200.0
    big = parse_upstream('{"city": "A", "longitude": ' + "9" * 400 + ', "latitude": 5}')
    assert (big["city"], big["longitude"], big["latitude"]) == ("A", 0.0, 0.0)
    assert parse_upstream('{"latitude": ' + "9" * 5000 + "}")["latitude"] == 0.0


def test_evaluate_scores_exponents_exactly_end_to_end(tmp_path):
    truth = tmp_path / "truth.csv"
    pd.DataFrame(
        {"key": ["paris", "rome"], "latitude": [48.8566, 41.9029],
         "longitude": [2.3522, 12.4534], "city": ["Paris", "Rome"],
         "country": ["France", "Italy"], "continent": ["Europe", "Europe"]}
    ).to_csv(truth, index=False)  # fmt: skip
    pred = tmp_path / "m.jsonl"
    rows = [
        {"question_id": "paris", "predicted_latitude": "1e-05", "predicted_longitude": "2e0",
         "predicted_country": "France"},
        {"question_id": "rome", "predicted_latitude": "4.19029e1",
         "predicted_longitude": "1.24534E+01", "predicted_country": "Italy"},
    ]  # fmt: skip
    pred.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "ev"
    rc = main(["evaluate", str(pred), "--truth", str(truth), "--out", str(out),
               "--n-boot", "10"])  # fmt: skip
    assert rc == 0
    want = geo.geodesic(np.array([48.8566]), np.array([2.3522]), np.array([0.00001]),
                        np.array([2.0]))[0]  # fmt: skip
    for mode in ("strict", "agl1k"):
        s = pd.read_parquet(out / f"m.{mode}.rows.parquet").set_index("question_id")
        assert s.loc["paris", "pred_latitude"] == 0.00001, mode
        assert s.loc["paris", "distance_km"] == pytest.approx(want, rel=1e-12), mode
        assert 5400 < want < 5480
        assert s.loc["rome", "distance_km"] < 1e-6, mode


def test_parsers_are_total_on_generated_hostile_answers():
    """Seeded fuzz: token soup of JSON syntax, key names, huge and
    non-finite numbers; every answer gets a status, never an exception, and
    an ``ok`` answer always holds a valid pair."""
    from agl_fast.alm.parse import STATUSES

    tokens = ["{", "}", "[", "]", '"', "'", ":", ",", '"lat"', '"latitude"', '"lon"',
              '"longitude"', '"city"', '"Rome"', "1e308", "9" * 500, "9" * 5000, "NaN",
              "Infinity", "-", ".", "e", "```json", "\\", "null", " ", "N", "S", "41.9",
              "12.5", "-0", "\u200b", "\u2212", '"1e-05"', "[" * 200, "{" * 100]  # fmt: skip
    rng = random.Random(43)
    for _ in range(600):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 60)))
        a = parse_answer(text)
        assert a.status in STATUSES
        if a.status == "ok":
            assert abs(a.latitude) <= 90 and abs(a.longitude) <= 180
        up = parse_upstream(text)
        assert isinstance(up["latitude"], float) and isinstance(up["longitude"], float)
