"""Geo kernels: parity with an independent numpy haversine and with
geographiclib's geodesic, analytic values, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from agl_fast import geo
from agl_fast.exceptions import ParameterError, ShapeError

geodesic_ref = pytest.importorskip("geographiclib.geodesic").Geodesic.WGS84


def _np_haversine(lat1, lon1, lat2, lon2, r=6371.0088):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(lon2 - lon1)
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * r * np.arcsin(np.sqrt(np.clip(a, 0, 1)))


def _random_pairs(n, seed=0):
    rng = np.random.default_rng(seed)
    lat1 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon1 = rng.uniform(-180, 180, n)
    lat2 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon2 = rng.uniform(-180, 180, n)
    k = n // 5
    # Nearly antipodal pairs.
    lat2[:k] = -lat1[:k] + rng.normal(0, 0.3, k)
    lon2[:k] = lon1[:k] + 180 + rng.normal(0, 0.3, k)
    # Exactly antipodal and polar pairs, points on the equator and meridians.
    lat2[k : 2 * k] = -lat1[k : 2 * k]
    lon2[k : 2 * k] = lon1[k : 2 * k] + 180
    lat1[2 * k : 2 * k + 500] = 90.0
    lat2[2 * k + 500 : 2 * k + 1000] = -90.0
    lat1[2 * k + 1000 : 2 * k + 1500] = 0.0
    lat2[2 * k + 1000 : 2 * k + 1500] = 0.0
    lon2[2 * k + 1500 : 2 * k + 2000] = lon1[2 * k + 1500 : 2 * k + 2000]
    return lat1, lon1, np.clip(lat2, -90, 90), lon2


def test_haversine_matches_numpy_formula():
    lat1, lon1, lat2, lon2 = _random_pairs(100_000)
    got = geo.haversine(lat1, lon1, lat2, lon2)
    want = _np_haversine(lat1, lon1, lat2, lon2)
    # Within ~1 km of the antipode the textbook formula (asin of sqrt h,
    # h rounded near 1) is off by up to 0.2 m; compared below instead.
    ok = want < np.pi * 6371.0088 - 1.0
    assert ok.sum() > 50_000
    np.testing.assert_allclose(got[ok], want[ok], rtol=0, atol=1e-6)


def test_haversine_matches_geographiclib_on_a_sphere():
    # geographiclib with zero flattening: great-circle distances to a few nm.
    r_km = 6371.0088
    sphere = pytest.importorskip("geographiclib.geodesic").Geodesic(r_km * 1000.0, 0.0)
    lat1, lon1, lat2, lon2 = _random_pairs(20_000, seed=3)
    got = geo.haversine(lat1, lon1, lat2, lon2)
    pairs = zip(lat1, lon1, lat2, lon2, strict=True)
    ref = np.array([sphere.Inverse(a, b, c, d)["s12"] for a, b, c, d in pairs]) / 1000.0
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-10)
    assert np.abs(got[4000:8000] - np.pi * r_km).max() < 1e-9  # exact antipodes


def test_geodesic_matches_geographiclib_on_1e5_pairs():
    lat1, lon1, lat2, lon2 = _random_pairs(100_000, seed=1)
    got = geo.geodesic(lat1, lon1, lat2, lon2)
    pairs = zip(lat1, lon1, lat2, lon2, strict=True)
    ref = np.array([geodesic_ref.Inverse(a, b, c, d)["s12"] for a, b, c, d in pairs])
    np.testing.assert_allclose(got, ref / 1000.0, rtol=0, atol=1e-10)  # 100 nm


def _edge_pairs(n, seed=5):
    """Pairs the solver treats specially: coincident and very close points
    (micrometres to 100 km), nearly antipodal points on and near the
    equator, meridians through the poles, and pole to pole."""
    rng = np.random.default_rng(seed)
    lat1 = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon1 = rng.uniform(-180, 180, n)
    k = n // 6
    step = 10.0 ** rng.uniform(-11, 0, n)  # degrees
    lat2 = np.clip(lat1 + step * rng.uniform(-1, 1, n), -90, 90)
    lon2 = lon1 + step * rng.uniform(-1, 1, n)
    lat2[:k] = lat1[:k]
    lon2[:k] = lon1[:k]  # coincident
    lat1[k : 2 * k] = rng.uniform(-0.01, 0.01, k)
    lat2[k : 2 * k] = rng.uniform(-0.01, 0.01, k)
    lon2[k : 2 * k] = lon1[k : 2 * k] + 180 - rng.uniform(0, 1, k)  # near-antipodal, equator
    lat1[2 * k : 3 * k] = 0.0
    lat2[2 * k : 3 * k] = 0.0
    lon2[2 * k : 3 * k] = lon1[2 * k : 3 * k] + rng.uniform(170, 180, k)  # equator
    lon2[3 * k : 4 * k] = lon1[3 * k : 4 * k] + rng.choice([0.0, 180.0], k)  # meridians
    lat2[3 * k : 4 * k] = rng.uniform(-90, 90, k)
    lat1[4 * k : 5 * k] = rng.choice([-90.0, 90.0], k)
    lat2[4 * k : 5 * k] = rng.choice([-90.0, 90.0], k)  # pole to pole or coincident poles
    return lat1, lon1, lat2, lon2


def test_geodesic_matches_geographiclib_on_edge_cases_to_nanometres():
    lat1, lon1, lat2, lon2 = _edge_pairs(12_000)
    got = geo.geodesic(lat1, lon1, lat2, lon2)
    pairs = zip(lat1, lon1, lat2, lon2, strict=True)
    ref = np.array([geodesic_ref.Inverse(a, b, c, d)["s12"] for a, b, c, d in pairs])
    # geographiclib is accurate to 15 nm; agl-fast agrees with it to 100 nm.
    np.testing.assert_allclose(got, ref / 1000.0, rtol=0, atol=1e-10)
    assert (got[:2000] == 0.0).all()  # coincident points


def test_geodesic_matches_geopy():
    geopy_distance = pytest.importorskip("geopy.distance")
    lat1, lon1, lat2, lon2 = _random_pairs(2_000, seed=2)
    got = geo.geodesic(lat1, lon1, lat2, lon2)
    ref = [
        geopy_distance.geodesic((a, b), (c, d)).km
        for a, b, c, d in zip(lat1, lon1, lat2, (lon2 + 180) % 360 - 180, strict=False)
    ]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)


def test_analytic_values():
    # Quarter meridian of WGS-84 and a quarter of the equator.
    np.testing.assert_allclose(geo.geodesic(0, 0, 90, 0), [10001.965729312], atol=1e-9)
    np.testing.assert_allclose(geo.geodesic(0, 0, 0, 90), [6378.137 * np.pi / 2], atol=1e-9)
    np.testing.assert_allclose(geo.haversine(0, 0, 0, 180, radius=1.0), [np.pi], atol=1e-12)


def test_longitudes_are_wrapped():
    a = geo.geodesic([10.0], [370.0], [20.0], [-350.0])
    b = geo.geodesic([10.0], [10.0], [20.0], [10.0])
    np.testing.assert_allclose(a, b, atol=1e-9)


def test_invalid_latitudes_are_nan_or_raise():
    d = geo.geodesic([95.0, 10.0, np.nan], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, np.inf, 0.0])
    assert np.isnan(d).all()
    with pytest.raises(ParameterError, match=r"3 coordinate pair.*first at index 0"):
        geo.haversine(
            [95.0, 10.0, np.nan], [0, 0, 0], [0, 0, 0], [0, np.inf, 0], on_invalid="raise"
        )


def test_bad_shapes_and_values():
    with pytest.raises(ShapeError, match="same length"):
        geo.haversine([0.0, 1.0], [0.0], [0.0], [0.0])
    with pytest.raises(ParameterError, match="must be a real numeric array"):
        geo.haversine(["a"], [0.0], [0.0], [0.0])
    with pytest.raises(ParameterError, match="radius"):
        geo.haversine([0.0], [0.0], [0.0], [0.0], radius=-1)
    with pytest.raises(ParameterError, match="f must lie"):
        geo.geodesic([0.0], [0.0], [0.0], [0.0], f=0.5)


def test_summary_matches_numpy():
    rng = np.random.default_rng(3)
    d = rng.exponential(3000, 200_001)
    d[::7] = np.nan
    s = geo.summarize(d, n_threads=2)
    v = d[~np.isnan(d)]
    assert s.n_valid == len(v)
    np.testing.assert_allclose(s.mean_km, v.mean(), rtol=1e-12)
    np.testing.assert_allclose(s.geoscore, np.mean(5000 * np.exp(-v / 1492.7)), rtol=1e-12)
    for t, a in s.accuracy.items():
        assert a == np.mean(v < t)
    for q, x in s.quantiles.items():
        assert x == np.quantile(v, q)
    # Same result for any thread count.
    assert geo.summarize(d, n_threads=1) == s
