"""Spatial metrics: mAP against scikit-learn, great-circle errors, rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agl_fast.exceptions import ParameterError, ShapeError
from agl_fast.spatial import metrics as m


def test_average_precision_matches_sklearn(rng):
    skm = pytest.importorskip("sklearn.metrics")
    n, c = 400, 12
    y = rng.random((n, c)) < 0.15
    y[0] = True  # every class has a positive
    s = rng.random((n, c))
    s[:, 3] = np.round(s[:, 3], 1)  # ties
    s[:, 4] = 0.5  # all tied
    s[:, 5] = y[:, 5] + 0.01 * rng.random(n)  # perfect ranking
    ours, per = m.mean_average_precision(y, s, return_per_class=True)
    ref_per = skm.average_precision_score(y, s, average=None)
    np.testing.assert_allclose(per, ref_per, rtol=1e-12, atol=1e-12)
    assert ours == pytest.approx(skm.average_precision_score(y, s, average="macro"), abs=1e-12)
    assert per[5] == pytest.approx(1.0)
    assert per[4] == pytest.approx(y[:, 4].mean())


def test_map_skips_classes_without_positives():
    y = np.array([[1, 0], [0, 0], [1, 0]])
    s = np.array([[0.9, 0.1], [0.2, 0.5], [0.8, 0.3]])
    value, per = m.mean_average_precision(y, s, return_per_class=True)
    assert math.isnan(per[1]) and per[0] == 1.0 and value == 1.0
    with pytest.raises(ShapeError, match="must both be"):
        m.mean_average_precision(y, s[:, :1])


def _unit(az_deg, el_deg):
    az, el = np.radians(az_deg), np.radians(el_deg)
    return np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], -1)


def test_angular_error_is_the_great_circle_angle(rng):
    az_p, az_t = rng.uniform(0, 360, 200), rng.uniform(0, 360, 200)
    el_p, el_t = rng.uniform(-89, 89, 200), rng.uniform(-89, 89, 200)
    dots = np.sum(_unit(az_p, el_p) * _unit(az_t, el_t), axis=1)
    ref = np.degrees(np.arccos(np.clip(dots, -1, 1)))
    got = m.angular_error(az_p, el_p, az_t, el_t, convention="degrees")
    np.testing.assert_allclose(got, ref, atol=1e-6)
    # BAT labels: elevation 90 is horizontal; right (0) vs front (90) is 90 degrees.
    assert m.angular_error([0], [90], [90], [90])[0] == pytest.approx(90.0)
    assert m.angular_error([359], [90], [1], [90])[0] == pytest.approx(2.0)
    assert m.angular_error([10], [135], [10], [90])[0] == pytest.approx(45.0)
    with pytest.raises(ParameterError, match="convention"):
        m.angular_error([0], [0], [0], [0], convention="radians")


def test_direction_metrics_er20():
    out = m.direction_metrics([0, 0, 0, 0], [90] * 4, [10, 30, 0, 180], [90] * 4)
    assert out["mae_deg"] == pytest.approx((10 + 30 + 0 + 180) / 4)
    assert out["er20"] == pytest.approx(0.5)


def test_distance_error_rate_and_binary_accuracy():
    assert m.distance_error_rate([1.0, 2.0, 3.6, 0.0], [1.4, 2.6, 3.0, 0.5]) == 0.5
    with pytest.raises(ShapeError, match="same shape"):
        m.distance_error_rate([1.0], [1.0, 2.0])
    pred = ["Yes.", "no", "Yes, it is.", "maybe", True]
    truth = ["yes", "No", "No", "no", "Yes"]
    assert m.binary_accuracy(pred, truth) == pytest.approx(3 / 5)
    with pytest.raises(ShapeError, match="differ in length"):
        m.binary_accuracy(["yes"], [])
