"""Binaural scene simulation: physical checks of the labels and acoustics."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pyroomacoustics")
from scipy.signal import correlate

from agl_fast.exceptions import ParameterError
from agl_fast.spatial import simulate as sim

RECEIVERS = ["two_mic"] + (["hrtf"] if sim.find_sofa() is not None else [])


def _spec(source_offsets, absorption=0.2, yaw=0.0, dim=(8.0, 6.0, 3.4)):
    listener = (4.0, 3.0, 1.5)
    return sim.SceneSpec(
        dim,
        (absorption,) * 6,
        0.1,
        listener,
        yaw,
        [tuple(np.add(listener, o)) for o in source_offsets],
    )


def test_bat_labels_axes():
    # Facing +x: the right is -y, the left +y.
    cases = {(0, -1, 0): 0, (1, 0, 0): 90, (0, 1, 0): 180, (-1, 0, 0): 270}
    for off, az in cases.items():
        lab = sim.bat_labels((0, 0, 0), 0.0, off)
        assert lab["azimuth"] == az
        assert lab["elevation"] == 90
        assert lab["distance_class"] == 2
    # Turning the head by +90 degrees (to face +y) moves +y straight ahead.
    assert sim.bat_labels((0, 0, 0), 90.0, (0, 1, 0))["azimuth"] == 90
    lab = sim.bat_labels((1, 1, 1), 0.0, (3, 1, 3))
    assert lab["elevation"] == 135
    assert lab["distance_class"] == round(2 * math.sqrt(8))
    assert sim.bat_labels((0, 0, 0), 0.0, (30, 0, 0))["distance_class"] == 20


def _lag_and_level(h: np.ndarray, sr: int) -> tuple[int, float]:
    """Cross-correlation lag of the left ear behind the right (samples) over the
    first 5 ms from the onset, and the right/left energy ratio (dB) there."""
    onset = int(np.argmax(np.max(np.abs(h), axis=0) > 0.1 * np.max(np.abs(h))))
    seg = h[:, max(0, onset - 40) : onset + int(0.005 * sr)].astype(np.float64)
    xc = correlate(seg[0], seg[1], mode="full")
    lag = int(np.argmax(xc)) - (seg.shape[1] - 1)
    level = 10 * math.log10(np.sum(seg[1] ** 2) / np.sum(seg[0] ** 2))
    return lag, level


@pytest.mark.parametrize("receiver", RECEIVERS)
@pytest.mark.parametrize("yaw", [0.0, 130.0])
def test_right_ear_leads_for_a_source_on_the_right(receiver, yaw):
    frame = sim._head_frame(yaw)
    right, left = -2.0 * frame[1], 2.0 * frame[1]
    spec = _spec([right, left], yaw=yaw)
    max_itd = sim.EAR_SPACING / sim.SPEED_OF_SOUND * 32000
    for src, sign in zip(spec.sources, (1, -1), strict=True):
        h, used = sim.simulate_brir(spec, src, receiver=receiver, ray_tracing=False)
        assert used == receiver
        assert h.shape[0] == 2 and h.dtype == np.float32
        lag, level = _lag_and_level(h, 32000)
        # Right source: the left ear lags (positive lag) and the right is louder.
        assert sign * lag >= 0.6 * max_itd, (lag, max_itd)
        assert sign * lag <= 2.0 * max_itd
        assert sign * level > 3.0, level
    assert sim.bat_labels(spec.listener, yaw, spec.sources[0])["azimuth"] == 0
    assert sim.bat_labels(spec.listener, yaw, spec.sources[1])["azimuth"] == 180


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_drr_falls_with_distance(receiver):
    spec = _spec([(d, 0.0, 0.0) for d in (-3.0, -1.5, 0.6)], absorption=0.15)
    scene = sim.simulate_scene(spec, receiver=receiver)
    drr = [a["drr"] for a in scene.acoustics]  # distances 3, 1.5, 0.6 m
    assert all(np.isfinite(drr))
    assert drr[0] < drr[1] < drr[2], drr
    assert [lab["distance_class"] for lab in scene.labels] == [6, 3, 1]


def test_rt60_follows_absorption():
    dim = (7.0, 5.0, 3.0)
    volume, surface = 105.0, 2 * (35 + 21 + 15)
    rt = {}
    for a in (0.08, 0.2, 0.45):
        scene = sim.simulate_scene(_spec([(2.0, 0.5, 0.0)], absorption=a, dim=dim))
        rt[a] = scene.acoustics[0]["rt60"]
        eyring = 0.161 * volume / (-surface * math.log(1 - a))
        assert 0.5 * eyring < rt[a] < 2.0 * eyring, (a, rt[a], eyring)
    assert rt[0.08] > rt[0.2] > rt[0.45]


def test_sample_scene_is_seeded_and_in_range():
    a = sim.sample_scene(np.random.default_rng(3), n_sources=2)
    b = sim.sample_scene(np.random.default_rng(3), n_sources=2)
    assert a == b
    rng = np.random.default_rng(0)
    dists = []
    for _ in range(300):
        s = sim.sample_scene(rng)
        p, lis = np.array(s.sources[0]), np.array(s.listener)
        assert np.all(p > 0) and np.all(p < np.array(s.room_dim))
        dists.append(float(np.linalg.norm(p - lis)))
    assert max(dists) <= 10.0
    hist, edges = np.histogram(dists, bins=np.arange(0, 10.5, 0.5))
    assert 1.0 <= edges[np.argmax(hist)] <= 2.5  # peaks near 1.8 m


def test_simulate_scene_from_seed_records_receiver():
    scene = sim.simulate_scene(5, receiver="two_mic", n_sources=2)
    assert scene.receiver == "two_mic"
    assert len(scene.brirs) == len(scene.labels) == 2
    for lab in scene.labels:
        assert 0 <= lab["azimuth"] < 360 and 0 <= lab["elevation"] < 180
        assert 0 <= lab["distance_class"] <= 20


def test_spatialize_loudness_and_length(rng):
    sr = 32000
    src = rng.standard_normal(12 * sr).astype(np.float32)
    delta = np.zeros((2, 64), dtype=np.float32)
    delta[:, 0] = 1.0
    y = sim.spatialize([src], [delta], sr=sr)
    assert y.shape == (2, 10 * sr)
    rms_db = 20 * math.log10(float(np.sqrt(np.mean(y.astype(np.float64) ** 2))))
    assert rms_db == pytest.approx(-14.0, abs=0.05)
    short = rng.standard_normal(sr).astype(np.float32)
    y2 = sim.spatialize([src, short], [delta, 0.5 * delta], sr=sr, seconds=2.0)
    assert y2.shape == (2, 2 * sr)
    np.testing.assert_allclose(y2[:, sr + 10 :], y[:, sr + 10 : 2 * sr], atol=1e-5)


def test_spatialize_bad_input(rng):
    with pytest.raises(ParameterError, match="one BRIR per source"):
        sim.spatialize([np.zeros(10)], [])
    with pytest.raises(ParameterError, match="mono"):
        sim.spatialize([np.zeros((2, 10))], [np.zeros((2, 4))])
    with pytest.raises(ParameterError, match="receiver must be"):
        sim.simulate_brir(_spec([(1.0, 0, 0)]), (5.0, 3.0, 1.5), receiver="ambisonic")
