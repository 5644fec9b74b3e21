"""Binaural scene simulation: physical checks of the labels and acoustics."""

from __future__ import annotations

import logging
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
    # Two sources are averaged (OWL's loader): after the short one ends, half the long one.
    np.testing.assert_allclose(y2[:, sr + 10 :], 0.5 * y[:, sr + 10 : 2 * sr], atol=1e-5)


def test_spatialize_bad_input(rng):
    with pytest.raises(ParameterError, match="one BRIR per source"):
        sim.spatialize([np.zeros(10)], [])
    with pytest.raises(ParameterError, match="mono"):
        sim.spatialize([np.zeros((2, 10))], [np.zeros((2, 4))])
    with pytest.raises(ParameterError, match="receiver must be"):
        sim.simulate_brir(_spec([(1.0, 0, 0)]), (5.0, 3.0, 1.5), receiver="ambisonic")


def _door_spec(open_: bool = True) -> tuple[sim.SceneSpec, sim.Door]:
    # Listener near the east wall (x = 8) facing +x; the door is ahead and to
    # the right (-y), the source behind the wall ahead and to the left.
    door = sim.Door("east", (8.0, 1.0, 1.0), transmission_loss_db=35.0, open=open_)
    spec = sim.SceneSpec((8.0, 6.0, 3.0), (0.2,) * 6, 0.1, (6.5, 3.0, 1.5), 0.0,
                         [(9.5, 5.5, 1.5)], [door])  # fmt: skip
    return spec, door


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_through_door_source_is_heard_through_the_opening(receiver):
    spec, door = _door_spec()
    src = np.array(spec.sources[0])
    h_open, used = sim.simulate_brir(spec, src, receiver=receiver, ray_tracing=False, door=door)
    closed = sim.Door(**{**door.__dict__, "open": False})
    h_closed, _ = sim.simulate_brir(spec, src, receiver=receiver, ray_tracing=False, door=closed)
    assert used == receiver and h_open.dtype == np.float32
    # The opening carries far more energy than the 35 dB wall.
    gain_db = 10 * math.log10(np.sum(h_open.astype(np.float64) ** 2) / np.sum(h_closed**2.0))
    assert gain_db > 15.0, gain_db
    # Closed door: the wall path alone, 35 dB below the free-field 1/d peak.
    d = float(np.linalg.norm(src - np.array(spec.listener)))
    peak = float(np.max(np.abs(h_closed)))
    free = float(np.max(np.abs(sim._free_field(spec, src, used, sim.load_sofa(sim.find_sofa())
                                                if used == "hrtf" else None, 32000))))  # fmt: skip
    assert 20 * math.log10(peak / free) == pytest.approx(-35.0, abs=0.01)
    assert free <= 1.5 / d or used == "hrtf"
    # First arrival through the door: the bent path source -> door -> listener,
    # well after the straight line would have arrived.
    path = np.linalg.norm(src - np.array(door.centre)) + np.linalg.norm(
        np.array(door.centre) - (0.05, 0, 0) - np.array(spec.listener)
    )
    onset = int(np.argmax(np.max(np.abs(h_open), axis=0) > 0.1 * np.max(np.abs(h_open))))
    expected = path / sim.SPEED_OF_SOUND * 32000 + 40
    assert expected - 16 <= onset <= expected + 48, (onset, expected)  # ears +-0.09 m
    assert onset > (d / sim.SPEED_OF_SOUND * 32000 + 40) + 200
    # The sound seems to come from the door (right ear leads), while the wall
    # path alone comes from the true direction (left ear leads).
    lag_open, _ = _lag_and_level(h_open, 32000)
    lag_closed, _ = _lag_and_level(h_closed, 32000)
    assert lag_open > 3 and lag_closed < -3, (lag_open, lag_closed)


def test_through_door_labels_and_sampling():
    spec, door = _door_spec()
    scene = sim.simulate_scene(spec, receiver="two_mic")
    lab = scene.labels[0]
    assert lab["through_door"] and lab["door_open"]
    assert lab["distance_m"] == pytest.approx(math.hypot(3.0, 2.5))
    assert lab["path_m"] > lab["distance_m"] + 2.0
    assert lab["azimuth"] > 90 and lab["door_azimuth"] < 90  # source left, door right
    rng = np.random.default_rng(4)
    for _ in range(20):
        s = sim.sample_scene(rng, n_sources=2, through_door=1.0)
        for p, door in zip(s.sources, s.doors, strict=True):
            assert door is not None
            axis, sign = sim._WALL_NORMALS[door.wall]
            # The source is beyond the door's wall, the door on the wall plane.
            assert door.centre[axis] == (s.room_dim[axis] if sign > 0 else 0.0)
            assert sign * (p[axis] - door.centre[axis]) >= 0.5
            assert 0 < door.centre[1 - axis] < s.room_dim[1 - axis]
            assert np.linalg.norm(np.subtract(p, s.listener)) <= 10.0
    # Without doors the draws are those of before.
    a = sim.sample_scene(np.random.default_rng(3), n_sources=2)
    b = sim.sample_scene(np.random.default_rng(3), n_sources=2, through_door=0.0)
    assert a == b and a.doors == []
    assert not sim.simulate_scene(5, receiver="two_mic", max_order=1).labels[0]["through_door"]


def test_two_microphone_fallback_is_logged_once(monkeypatch, caplog):
    monkeypatch.delenv("AGL_FAST_SOFA", raising=False)
    monkeypatch.setattr(sim, "DEFAULT_SOFA", ())
    monkeypatch.setattr(sim, "_warned_two_mic", False)
    spec = _spec([(1.0, 0.0, 0.0)])
    with caplog.at_level(logging.WARNING, logger="agl_fast.spatial"):
        for _ in range(2):
            _, used = sim.simulate_brir(spec, spec.sources[0], receiver="auto", ray_tracing=False)
            assert used == "two_mic"
    assert [r.getMessage().startswith("no HRTF (SOFA) file found") for r in caplog.records] == [
        True
    ]
