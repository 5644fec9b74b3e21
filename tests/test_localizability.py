"""Localizability: fitting recovers known weights, scoring, reports, judges."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agl_fast.exceptions import ParameterError, ShapeError
from agl_fast.localizability import (
    CONTRIBUTION_SCHEMA,
    LocalizabilityWeights,
    by_continent,
    contributions_matrix,
    fit_weights,
    fractions_matrix,
    judge_agreement,
    read_contributions,
    score,
    top_categories,
    top_categories_chart,
)

CATS = ("Speech", "Bird", "Bell", "Wind", "Engine", "Music", "Silence", "Rain")
# known weights: a_i on well-localized clips, abar_i on badly localized ones
A_TRUE = np.array([1.6, 1.2, 0.9, 0.1, 0.2, 0.5, 0.05, 0.15])
ABAR_TRUE = np.array([0.2, 0.3, 0.1, 0.8, 0.7, 0.6, 0.4, 0.1])


def _synthetic(rng: np.random.Generator, n: int = 4000, noise: float = 0.02):
    t = rng.uniform(0, 1, (n, len(CATS))) * (rng.uniform(0, 1, (n, len(CATS))) < 0.6)
    e = rng.choice([50.0, 300.0, 2500.0, 8000.0], n)
    w = np.where((e < 1000.0)[:, None], A_TRUE, ABAR_TRUE)
    c = w * t + noise * rng.standard_normal(t.shape)
    c[t == 0] = np.nan  # a category absent from the clip is not judged
    return t, e, c


def test_fit_recovers_known_weights(rng):
    t, e, c = _synthetic(rng)
    w = fit_weights(t, e, c, CATS)
    np.testing.assert_allclose(w.a, A_TRUE, atol=0.01)
    np.testing.assert_allclose(w.abar, ABAR_TRUE, atol=0.01)
    # P: a_i > 1/3; N: abar_i > 1/3 and not in P (Music is in both, so P only)
    assert w.positive == ("Speech", "Bird", "Bell", "Music")
    assert w.negative == ("Wind", "Engine", "Silence")
    assert (w.alpha, w.gamma_km, w.theta) == (1.0 / 3.0, 1000.0, 1.0)


def test_fit_hand_computed_and_min_samples():
    # one category; good clips x = (0.5, 1.0), y = (1.0, 1.0): a = (0.5+1)/(0.25+1) = 1.2
    t = np.array([[0.5], [1.0], [0.0], [1.0]])
    e = np.array([10.0, 999.0, 5.0, 1000.0])  # 1000 km is not < gamma
    c = np.array([[1.0], [1.0], [7.0], [0.25]])
    w = fit_weights(t, e, c, ["x"], min_samples=1)
    assert w.a[0] == pytest.approx(1.2)
    assert w.abar[0] == pytest.approx(0.25)
    assert (w.n_good, w.n_bad) == ((2,), (1,))
    w3 = fit_weights(t, e, c, ["x"], min_samples=3)
    assert np.isnan(w3.a[0]) and w3.positive == ()


def test_weights_roundtrip_and_score(tmp_path, rng):
    t, e, c = _synthetic(rng, n=600)
    w = fit_weights(t, e, c, CATS, min_samples=10)
    back = LocalizabilityWeights.load(w.save(tmp_path / "weights.json"))
    assert back == w
    lk, flag = score(back, t, CATS)
    signed = back.signed()
    k = 3
    expect = sum(signed.get(cat, 0.0) * t[k, j] for j, cat in enumerate(CATS))
    assert lk[k] == pytest.approx(expect)
    np.testing.assert_array_equal(flag, lk > 1.0)
    # columns in another order give the same scores
    perm = np.arange(len(CATS))[::-1]
    lk2, _ = score(back, t[:, perm], [CATS[j] for j in perm])
    np.testing.assert_allclose(lk2, lk)


def test_top_categories_and_chart(tmp_path, rng):
    t, e, c = _synthetic(rng, n=1500)
    w = fit_weights(t, e, c, CATS)
    top = top_categories(w, k=2).to_pylist()
    assert [(r["sign"], r["category"]) for r in top] == [
        ("positive", "Speech"),
        ("positive", "Bird"),
        ("negative", "Wind"),
        ("negative", "Engine"),
    ]
    png = top_categories_chart(w, tmp_path / "top.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_by_continent():
    s = np.array([2.0, 0.5, 1.5, np.nan, 3.0])
    tab = by_continent(s, ["Europe", "Europe", "Asia", "Asia", None]).to_pylist()
    assert [r["continent"] for r in tab] == ["unknown", "Asia", "Europe"]  # by mean l
    eu = tab[2]
    assert (eu["n"], eu["mean_l"], eu["share_localizable"]) == (2, 1.25, 0.5)
    with pytest.raises(ShapeError, match="2 scores for 3"):
        by_continent(s[:2], ["a", "b", "c"])


def test_contributions_parquet_roundtrip(tmp_path):
    table = pa.table(
        {
            "key": ["k1", "k1", "k2"],
            "category": ["Speech", "Bird", "Bird"],
            "contribution": [0.9, 0.2, 0.4],
            "n_judges": [3, 2, 3],
        },
        schema=CONTRIBUTION_SCHEMA,
    )
    pq.write_table(table, tmp_path / "c.parquet")
    back = read_contributions(tmp_path / "c.parquet")
    m = contributions_matrix(back, ["k2", "k1"], ["Bird", "Speech"])
    np.testing.assert_array_equal(m[1], [0.2, 0.9])
    assert m[0, 0] == 0.4 and np.isnan(m[0, 1])
    pq.write_table(table.drop_columns(["n_judges"]), tmp_path / "bad.parquet")
    with pytest.raises(ParameterError, match="missing \\['n_judges'\\]"):
        read_contributions(tmp_path / "bad.parquet")


def test_fractions_matrix_from_tagging_table():
    classes = pa.list_(
        pa.struct([("index", pa.int32()), ("name", pa.string()), ("fraction", pa.float32())])
    )
    tab = pa.table(
        {
            "classes": pa.array(
                [[{"index": 0, "name": "Speech", "fraction": 0.5}], [], None], type=classes
            )
        }
    )
    t, cats = fractions_matrix(tab, ["Bird", "Speech"])
    assert cats == ("Bird", "Speech")
    np.testing.assert_array_equal(t[:2], [[0.0, 0.5], [0.0, 0.0]])
    assert np.isnan(t[2]).all()


def test_judge_agreement_hand_computed():
    j1 = np.array([[1.0, 0.0, np.nan], [0.0, 2.0, 0.0]])
    j2 = np.array([[1.0, 1.0, np.nan], [0.0, 2.0, 0.0]])
    row = judge_agreement({"b": j2, "a": j1}, top=2).to_pylist()[0]
    assert (row["judge_a"], row["judge_b"], row["n_clips"]) == ("a", "b", 2)
    assert row["cosine"] == pytest.approx((1 / np.sqrt(2) + 1.0) / 2)
    # aggregates: a = (0.5, 1, 0), b = (0.5, 1.5, 0)
    assert row["pearson"] == pytest.approx(np.corrcoef([0.5, 1, 0], [0.5, 1.5, 0])[0, 1])
    assert row["top_overlap"] == 1.0


def test_judge_agreement_identical_and_bad_input(rng):
    m = rng.uniform(0, 1, (20, 12))
    row = judge_agreement({"x": m, "y": m.copy()}).to_pylist()[0]
    assert row["cosine"] == pytest.approx(1.0)
    assert row["pearson"] == pytest.approx(1.0)
    assert row["top_overlap"] == 1.0
    with pytest.raises(ParameterError, match="at least two judges"):
        judge_agreement({"x": m})
    with pytest.raises(ShapeError, match="share one 2-D shape"):
        judge_agreement({"x": m, "y": m[:3]})


def test_fit_bad_shapes():
    with pytest.raises(ShapeError, match="one shape"):
        fit_weights(np.zeros((3, 2)), np.zeros(3), np.zeros((3, 3)), ["a", "b"])
    with pytest.raises(ShapeError, match="1 category names for 2"):
        fit_weights(np.zeros((3, 2)), np.zeros(3), np.zeros((3, 2)), ["a"])
