"""Octave / third-octave band filtering and per-band room parameters."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy")

from agl_fast.bands import band_centres, band_filter, band_room_parameters
from agl_fast.exceptions import ParameterError


def test_centres_follow_iec_61260() -> None:
    exact, nominal = band_centres("octave", 125, 8000)
    np.testing.assert_array_equal(nominal, [125, 250, 500, 1000, 2000, 4000, 8000])
    assert exact[3] == 1000.0
    np.testing.assert_allclose(exact[1:] / exact[:-1], 10**0.3)
    exact3, nominal3 = band_centres("third", 100, 5000)
    assert len(nominal3) == 18 and nominal3[0] == 100 and nominal3[-1] == 5000
    np.testing.assert_allclose(exact3[1:] / exact3[:-1], 10**0.1)


def test_a_tone_stays_in_its_band() -> None:
    sr = 16000
    t = np.arange(sr) / sr
    tone = np.sin(2 * np.pi * 1000 * t) * np.hanning(sr)
    nominal, out = band_filter(tone, sr, "octave", 250, 4000)
    energy = (out.astype(np.float64) ** 2).sum(axis=-1)
    k = list(nominal).index(1000)
    assert energy.argmax() == k
    np.testing.assert_allclose(energy[k], (tone**2).sum(), rtol=0.05)
    assert 10 * np.log10(energy[k] / energy[list(nominal).index(250)]) > 60


def test_band_decay_times_of_a_known_exponential() -> None:
    # White noise under a 0.6 s T60 envelope decays at 0.6 s in every band.
    sr, t60 = 16000, 0.6
    rng = np.random.default_rng(5)
    t = np.arange(2 * sr) / sr
    ir = (rng.standard_normal(t.size) * 10 ** (-3 * t / t60)).astype(np.float32)
    r = band_room_parameters(np.stack([ir, ir])[None], sr, fmin=500, fmax=4000)
    assert r["t30"].shape == (4, 1, 2)
    assert np.all(r["status_t30"] == "ok")
    np.testing.assert_allclose(r["t30"], t60, rtol=0.05)


def test_bad_band_arguments() -> None:
    with pytest.raises(ParameterError, match="bands must be"):
        band_centres("half")
    with pytest.raises(ParameterError, match="fits below"):
        band_filter(np.ones(1000), 1000.0, "octave", 1000, 8000)
    with pytest.raises(ParameterError, match="at least 16"):
        band_filter(np.ones(4), 16000.0)
    with pytest.raises(ParameterError, match="ir must be"):
        band_room_parameters(np.ones((2, 2, 2, 100)), 16000.0)
