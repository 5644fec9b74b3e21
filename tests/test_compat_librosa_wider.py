"""istft, spectral_contrast, chroma_stft, delta, normalize, to_mono and pcen
through ``agl_fast.compat.librosa`` against librosa itself.

Tolerances: ``istft``, ``normalize`` and ``to_mono`` are librosa's bit for
bit; from a given spectrogram ``chroma_stft`` and ``spectral_contrast`` agree
to float rounding of a sum (rtol 1e-6); ``delta``'s edge fit and ``pcen``'s
closed forms agree to 1e-5 (float32) / 1e-10 (float64) relative; from audio,
the spectrogram is agl-fast's (float32 STFT rounding, rtol 1e-3 with an
absolute floor at 1e-4 of the output's scale).
"""

from __future__ import annotations

import numpy as np
import pytest

librosa = pytest.importorskip("librosa")

import agl_fast.compat.librosa as compat  # noqa: E402

SR = 22050


@pytest.fixture
def music() -> np.ndarray:
    """Five seconds of detuned chords over noise (tuning +0.2 semitone bins)."""
    rng = np.random.default_rng(3)
    t = np.arange(5 * SR) / SR
    f0 = 220.0 * 2 ** (0.2 / 12)
    y = sum(np.sin(2 * np.pi * f0 * r * t) for r in (1.0, 1.26, 1.5, 2.0))
    return (0.1 * y + 0.01 * rng.standard_normal(t.size)).astype(np.float64)


def _close(a: np.ndarray, b: np.ndarray, share: float = 1e-4) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=share * float(np.max(np.abs(b))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"hop_length": 300},
        {"n_fft": 1000, "hop_length": 256, "win_length": 800},
        {"center": False},
        {"length": 12345},
        {"length": 5 * SR + 3000},
        {"n_fft": 512, "hop_length": 1024},
        {"window": "hamming", "n_fft": 1024},
    ],
)
def test_istft_is_librosas_bit_for_bit(music: np.ndarray, dtype: type, kw: dict) -> None:
    stft_kw = {k: v for k, v in kw.items() if k != "length"}
    D = librosa.stft(music.astype(dtype), **stft_kw)
    expected = librosa.istft(D, **kw)
    got = compat.istft(D, **kw)
    assert got.dtype == expected.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expected)


def test_istft_multichannel_dtype_and_hand_over(music: np.ndarray) -> None:
    D = librosa.stft(np.stack([music, music[::-1]]).astype(np.float32))
    np.testing.assert_array_equal(compat.istft(D), librosa.istft(D))
    np.testing.assert_array_equal(
        compat.istft(D, dtype=np.float64), librosa.istft(D, dtype=np.float64)
    )
    compat.reset_counters()
    out = np.zeros((2, librosa.istft(D).shape[-1]), dtype=np.float32)
    got = compat.istft(D, out=out)
    assert got is out and np.array_equal(out, librosa.istft(D))
    assert compat.coverage().fallbacks[("istft", "an out= array")] == 1
    with pytest.raises(librosa.util.exceptions.ParameterError):
        compat.istft(D, win_length=4096)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spectral_contrast(music: np.ndarray, dtype: type) -> None:
    y = music.astype(dtype)
    S = np.abs(librosa.stft(y))
    for kw in ({}, {"linear": True}, {"n_bands": 4, "fmin": 300.0, "quantile": 0.1}):
        expected = librosa.feature.spectral_contrast(S=S, sr=SR, **kw)
        got = compat.feature.spectral_contrast(S=S, sr=SR, **kw)
        assert got.dtype == expected.dtype == np.float64
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)
    _close(
        compat.feature.spectral_contrast(y=y, sr=SR), librosa.feature.spectral_contrast(y=y, sr=SR)
    )
    for bad in ({"quantile": 1.0}, {"fmin": 0.0}, {"n_bands": 0}, {"n_bands": 12}):
        with pytest.raises(librosa.util.exceptions.ParameterError):
            librosa.feature.spectral_contrast(S=S, sr=SR, **bad)
        with pytest.raises(librosa.util.exceptions.ParameterError):
            compat.feature.spectral_contrast(S=S, sr=SR, **bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chroma_stft_and_its_tuning_estimate(music: np.ndarray, dtype: type) -> None:
    from agl_fast.compat.librosa._chroma import estimate_tuning

    y = music.astype(dtype)
    P = np.abs(librosa.stft(y)) ** 2
    assert estimate_tuning(P, SR, 12) == librosa.estimate_tuning(S=P, sr=SR, bins_per_octave=12)
    assert abs(estimate_tuning(P, SR, 12) - 0.2) < 0.05  # the signal's detuning
    for kw in ({}, {"norm": 2}, {"n_chroma": 24}, {"tuning": 0.0, "norm": None}):
        expected = librosa.feature.chroma_stft(S=P, sr=SR, **kw)
        got = compat.feature.chroma_stft(S=P, sr=SR, **kw)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    _close(compat.feature.chroma_stft(y=y, sr=SR), librosa.feature.chroma_stft(y=y, sr=SR))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_delta(dtype: type) -> None:
    data = np.random.default_rng(0).standard_normal((20, 300)).astype(dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    for kw in ({}, {"order": 2}, {"width": 3}, {"width": 5, "order": 3}, {"axis": 0}):
        expected = librosa.feature.delta(data, **kw)
        got = compat.feature.delta(data, **kw)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)
    compat.reset_counters()
    np.testing.assert_array_equal(
        compat.feature.delta(data, mode="nearest"), librosa.feature.delta(data, mode="nearest")
    )
    assert sum(compat.coverage().fallbacks.values()) == 1
    for bad in ({"width": 4}, {"width": 1}, {"order": 0}, {"width": 301, "axis": -1}):
        with pytest.raises(librosa.util.exceptions.ParameterError):
            compat.feature.delta(data, **bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_normalize_is_librosas_bit_for_bit(dtype: type) -> None:
    S = np.random.default_rng(1).standard_normal((40, 30)).astype(dtype)
    S[:, 3] = 0
    for norm in (np.inf, -np.inf, 0, 1, 2, None):
        for fill in (None, False, True):
            for axis in (0, 1, None):
                if norm == 0 and fill is True:
                    continue
                with np.errstate(invalid="ignore"):  # complex 0 / nan, in librosa too
                    expected = librosa.util.normalize(S, norm=norm, axis=axis, fill=fill)
                    got = compat.util.normalize(S, norm=norm, axis=axis, fill=fill)
                assert got.dtype == expected.dtype
                np.testing.assert_array_equal(got, expected, err_msg=f"{norm} {fill} {axis}")
    bad = S.copy()
    bad[2, 2] = np.nan
    for kw in ({}, {"norm": 2}, {"threshold": -1.0}, {"fill": 3}, {"norm": "x"}):
        with pytest.raises(librosa.util.exceptions.ParameterError):
            compat.util.normalize(bad if not kw or kw == {"norm": 2} else S, **kw)


def test_to_mono_is_librosas_bit_for_bit() -> None:
    y = np.random.default_rng(2).standard_normal((3, 1000)).astype(np.float32)
    for x in (y, y[:2], y[0], y.reshape(3, 1, 1000)):
        np.testing.assert_array_equal(compat.to_mono(x), librosa.to_mono(x))
    big = np.full((2, 10), np.finfo(np.float32).max, dtype=np.float32)
    with np.errstate(over="ignore"):  # the mean overflows: inf, no error (as librosa)
        np.testing.assert_array_equal(compat.to_mono(big), librosa.to_mono(big))
    bad = y.copy()
    bad[1, 5] = np.inf
    for x in (bad, bad[1], y.astype(np.int16)):
        with pytest.raises(librosa.util.exceptions.ParameterError):
            compat.to_mono(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pcen(music: np.ndarray, dtype: type) -> None:
    M = librosa.feature.melspectrogram(y=music.astype(dtype), sr=SR) * 2**31
    for kw in ({}, {"power": 0.25}, {"power": 0.0}, {"bias": 0.0}, {"gain": 0.5, "eps": 1e-3},
               {"axis": 0}, {"b": 0.1}):  # fmt: skip
        expected = librosa.pcen(M, sr=SR, **kw)
        got = compat.pcen(M, sr=SR, **kw)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    out, zf = compat.pcen(M, return_zf=True)
    ref_out, ref_zf = librosa.pcen(M, return_zf=True)
    np.testing.assert_allclose(out, ref_out, rtol=1e-10)
    np.testing.assert_array_equal(zf, ref_zf)
    compat.reset_counters()
    np.testing.assert_array_equal(compat.pcen(M, max_size=3), librosa.pcen(M, max_size=3))
    assert compat.coverage().fallbacks[("pcen", "a max-filtered reference (max_size > 1)")] == 1
    with pytest.warns(UserWarning, match="complex input"):
        compat.pcen(M.astype(np.complex128))
    for bad in ({"power": -1}, {"gain": -1}, {"bias": -1}, {"eps": 0}, {"time_constant": 0},
                {"max_size": 0}, {"b": 2.0}):  # fmt: skip
        with pytest.raises(librosa.util.exceptions.ParameterError):
            compat.pcen(M, **bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spectral_rolloff_is_librosas_bit_for_bit(music: np.ndarray, dtype: type) -> None:
    """The first bin reaching the threshold (rising bin frequencies) gives
    librosa's nanmin to the bit: any roll_percent, multichannel, a silent
    frame, a NaN frame (librosa counts a NaN comparison as reached) and
    user frequencies that fall (librosa's own formula then)."""
    import warnings

    y = music.astype(dtype)
    for kw in ({}, {"roll_percent": 0.05}, {"roll_percent": 0.99}, {"n_fft": 512}):
        want = librosa.feature.spectral_rolloff(y=y, **kw)
        got = compat.feature.spectral_rolloff(y=y, **kw)
        assert got.dtype == want.dtype == np.float64
        np.testing.assert_array_equal(got, want)
    S = np.abs(librosa.stft(np.stack([y, y[::-1]])))
    S[..., 3] = 0
    S[1, 7, 5] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither warns here
        np.testing.assert_array_equal(
            compat.feature.spectral_rolloff(S=S), librosa.feature.spectral_rolloff(S=S)
        )
    falling = np.linspace(0, 11025, S.shape[-2])[::-1].copy()
    np.testing.assert_array_equal(
        compat.feature.spectral_rolloff(S=S[0], freq=falling),
        librosa.feature.spectral_rolloff(S=S[0], freq=falling),
    )
