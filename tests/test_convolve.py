"""FFT convolution against scipy.signal.fftconvolve."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal

from agl_fast import room
from agl_fast.exceptions import NonFiniteError, ParameterError, ShapeError

RNG = np.random.default_rng(11)


def _ref(x: np.ndarray, h: np.ndarray, mode: str) -> np.ndarray:
    m = "full" if mode == "truncate" else mode
    y = scipy.signal.fftconvolve(x.astype(np.float64), h.astype(np.float64), mode=m)
    return y[: len(x)] if mode == "truncate" else y


def _close(got: np.ndarray, ref: np.ndarray) -> None:
    # float32 FFTs against scipy's float64: 1e-5 of the output's peak.
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("mode", ["full", "same", "valid", "truncate"])
@pytest.mark.parametrize(("n", "m"), [(1000, 37), (37, 1000), (200_000, 4000), (5, 5)])
def test_binaural_matches_scipy(mode: str, n: int, m: int) -> None:
    x = RNG.standard_normal((3, n)).astype(np.float32)
    h = RNG.standard_normal((2, m)).astype(np.float32)
    got = room.fftconvolve(x, h, mode=mode)
    ref = np.stack([[_ref(xi, hc, mode) for hc in h] for xi in x])
    _close(got, ref)


def test_per_source_multichannel_and_ragged() -> None:
    x = [RNG.standard_normal(n).astype(np.float32) for n in (3000, 5000)]
    h = [RNG.standard_normal((4, 300)).astype(np.float32), RNG.standard_normal((2, 100))]
    got = room.fftconvolve(x, h, mode="same")
    assert isinstance(got, list) and got[0].shape == (4, 3000) and got[1].shape == (2, 5000)
    for xi, hi, gi in zip(x, h, got, strict=True):
        _close(gi, np.stack([_ref(xi, hc, "same") for hc in hi]))
    hb = RNG.standard_normal((2, 2, 64)).astype(np.float32)
    xb = RNG.standard_normal((2, 999)).astype(np.float32)
    out = room.fftconvolve(xb, hb, n_threads=2)
    for i in range(2):
        _close(out[i], np.stack([_ref(xb[i], hc, "full") for hc in hb[i]]))


def test_single_source_and_thread_independence() -> None:
    x = RNG.standard_normal(50_000).astype(np.float32)
    h = RNG.standard_normal((2, 2000)).astype(np.float32)
    a = room.fftconvolve(x, h, mode="truncate", n_threads=1)
    b = room.fftconvolve(x, h, mode="truncate", n_threads=2)
    assert a.shape == (2, 50_000)
    np.testing.assert_array_equal(a, b)


def test_bad_input() -> None:
    x = np.ones(10, np.float32)
    with pytest.raises(ParameterError, match="mode must be"):
        room.fftconvolve(x, x, mode="circular")
    with pytest.raises(ShapeError, match="one impulse response per source"):
        room.fftconvolve(np.ones((2, 10), np.float32), np.ones((3, 2, 4), np.float32))
    with pytest.raises(NonFiniteError, match="source 0"):
        room.fftconvolve(np.array([1, np.inf], np.float32), x)
    with pytest.raises(ShapeError, match="empty"):
        room.fftconvolve([np.zeros(0, np.float32)], [x])
