"""STFT, spectrogram, mel banks, melspectrogram and dB conversions against
librosa, plus analytic checks.

Tolerance: float32. agl-fast computes in float32 and librosa in float64 (its
window is float64), so values agree to about 1e-6 of the spectrum's peak;
tests assert ``max|a - b| <= 2e-5 * max|b|`` for spectra and 1e-3 dB for
decibel outputs above the floor.
"""

from __future__ import annotations

import librosa
import numpy as np
import pytest

import agl_fast

RTOL_PEAK = 2e-5


def close_to_peak(a: np.ndarray, b: np.ndarray, tol: float = RTOL_PEAK) -> None:
    assert a.shape == b.shape
    err = np.abs(a - b).max() / np.abs(b).max()
    assert err <= tol, f"max error {err:.3g} of peak exceeds {tol}"


STFT_CASES = [
    {},
    {"n_fft": 1024, "hop_length": 320, "pad_mode": "reflect"},
    {"n_fft": 1024, "hop_length": 320, "win_length": 800},
    {"n_fft": 512, "win_length": 400, "window": "hamming", "center": False},
    {"n_fft": 511, "hop_length": 100},
    {"n_fft": 256, "hop_length": 64, "window": "rectangular", "pad_mode": "reflect"},
]


@pytest.mark.parametrize("kw", STFT_CASES)
def test_stft_matches_librosa(rng: np.random.Generator, kw: dict) -> None:
    y = rng.standard_normal(22050 + 37).astype(np.float32)
    lib_kw = dict(kw)
    if lib_kw.get("window") == "rectangular":
        lib_kw["window"] = "boxcar"
    ours = agl_fast.stft(y, **kw)
    ref = librosa.stft(y, **lib_kw)
    assert ours.dtype == np.complex64
    close_to_peak(ours, ref)


def test_stft_symmetric_window_and_array_window(rng: np.random.Generator) -> None:
    y = rng.standard_normal(8000).astype(np.float32)
    w = np.hanning(400).astype(np.float32)
    ours = agl_fast.stft(y, n_fft=512, win_length=400, window=w)
    ref = librosa.stft(y, n_fft=512, win_length=400, window=w)
    close_to_peak(ours, ref)
    sym = agl_fast.stft(y, n_fft=512, win_length=400, window="hann_symmetric")
    close_to_peak(
        sym,
        librosa.stft(y, n_fft=512, win_length=400, window=("hann", False))
        if False
        else librosa.stft(y, n_fft=512, win_length=400, window=w.astype(np.float64)),
    )


def test_short_signals_reflect_like_numpy(rng: np.random.Generator) -> None:
    # Shorter than n_fft // 2: numpy's reflect padding repeats the mirror.
    y = rng.standard_normal(100).astype(np.float32)
    ours = agl_fast.stft(y, n_fft=512, hop_length=64, pad_mode="reflect")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = librosa.stft(y, n_fft=512, hop_length=64, pad_mode="reflect")
    close_to_peak(ours, ref)


@pytest.mark.parametrize("power", [1.0, 2.0, 1.5])
def test_spectrogram_power(rng: np.random.Generator, power: float) -> None:
    y = rng.standard_normal(16000).astype(np.float32)
    ours = agl_fast.spectrogram(y, n_fft=1024, hop_length=256, power=power)
    ref = np.abs(librosa.stft(y, n_fft=1024, hop_length=256)) ** power
    close_to_peak(ours, ref, 5e-5)


@pytest.mark.parametrize(
    "kw",
    [
        {"sr": 22050, "n_fft": 2048},
        {"sr": 32000, "n_fft": 1024, "n_mels": 128, "fmin": 50, "fmax": 14000},
        {"sr": 16000, "n_fft": 512, "n_mels": 40, "htk": True},
        {"sr": 16000, "n_fft": 512, "n_mels": 64, "norm": None},
        {"sr": 44100, "n_fft": 4096, "n_mels": 96, "fmin": 20, "norm": 1.0},
        {"sr": 44100, "n_fft": 2048, "n_mels": 80, "norm": np.inf, "htk": True},
    ],
)
def test_mel_filterbank_matches_librosa(kw: dict) -> None:
    """librosa's float32 filterbank to the bit: numpy's rfftfreq and
    linspace arithmetic, each weight rounded to float32 as librosa stores it
    and again after the norm's double-precision product."""
    ours = agl_fast.mel_filterbank(**kw)
    ref = librosa.filters.mel(**kw)
    assert ours.shape == ref.shape and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.filterwarnings("ignore:Empty filters detected")
def test_mel_filterbank_is_librosas_across_rates_sizes_and_norms() -> None:
    for sr in (8000, 16000, 22050, 32000, 44100, 48000):
        for n_fft in (400, 512, 1024, 2048):
            for n_mels in (40, 128):
                for htk in (False, True):
                    for norm in ("slaney", None, 2.0):
                        kw = dict(sr=sr, n_fft=n_fft, n_mels=n_mels, htk=htk, norm=norm)
                        ref = librosa.filters.mel(**kw)  # type: ignore[arg-type]
                        ours = agl_fast.mel_filterbank(**kw)  # type: ignore[arg-type]
                        np.testing.assert_array_equal(ours, ref, err_msg=str(kw))


def test_melspectrogram_and_power_to_db(rng: np.random.Generator) -> None:
    y = rng.standard_normal(3 * 22050).astype(np.float32)
    ours = agl_fast.melspectrogram(y=y, sr=22050)
    ref = librosa.feature.melspectrogram(y=y, sr=22050)
    close_to_peak(ours, ref)
    for kw in [{}, {"ref": np.max}, {"ref": 3.0, "amin": 1e-6, "top_db": None}]:
        db_ours = agl_fast.power_to_db(ref, **kw)
        db_ref = librosa.power_to_db(ref, **kw)
        np.testing.assert_allclose(db_ours, db_ref, atol=1e-3)
    amp = np.abs(librosa.stft(y))
    np.testing.assert_allclose(
        agl_fast.amplitude_to_db(amp, ref=np.max),
        librosa.amplitude_to_db(amp, ref=np.max),
        atol=1e-3,
    )


def test_logmel_is_per_item(rng: np.random.Generator) -> None:
    quiet = 1e-3 * rng.standard_normal(22050).astype(np.float32)
    loud = rng.standard_normal(22050).astype(np.float32)
    batch = np.stack([quiet, loud])
    out = agl_fast.logmel(batch, sr=22050, ref=np.max, top_db=80.0)
    for i, y in enumerate([quiet, loud]):
        ref = librosa.power_to_db(
            librosa.feature.melspectrogram(y=y, sr=22050), ref=np.max, top_db=80.0
        )
        np.testing.assert_allclose(out[i], ref, atol=2e-3)
    assert out[0].max() == 0.0 and out[1].max() == 0.0


def test_real_recordings_melspectrogram(real_stereo_32k: list[np.ndarray]) -> None:
    for clip in real_stereo_32k:
        y = clip[0]
        ours = agl_fast.melspectrogram(y=y, sr=32000, n_fft=1024, hop_length=320)
        ref = librosa.feature.melspectrogram(y=y, sr=32000, n_fft=1024, hop_length=320)
        close_to_peak(ours, ref)
        np.testing.assert_allclose(agl_fast.power_to_db(ours), librosa.power_to_db(ref), atol=5e-3)


# --- analytic checks ----------------------------------------------------------


def test_parseval_per_frame(rng: np.random.Generator) -> None:
    n = 1024
    y = rng.standard_normal(n * 8).astype(np.float32)
    S = agl_fast.stft(y, n_fft=n, hop_length=n, window="rectangular", center=False)
    power = np.abs(S.astype(np.complex128)) ** 2
    energy_f = (power[0] + power[-1] + 2 * power[1:-1].sum(axis=0)) / n
    energy_t = (y.astype(np.float64).reshape(-1, n) ** 2).sum(axis=1)
    np.testing.assert_allclose(energy_f, energy_t, rtol=1e-5)


def test_pure_tone_lands_in_its_bin_and_band() -> None:
    sr, n_fft = 32000, 1024
    k = 37  # exactly on bin 37
    f = k * sr / n_fft
    y = np.sin(2 * np.pi * f * np.arange(sr) / sr).astype(np.float32)
    S = np.abs(agl_fast.stft(y, n_fft=n_fft, hop_length=320))
    assert np.all(S[:, 5:-5].argmax(axis=0) == k)
    M = agl_fast.melspectrogram(y=y, sr=sr, n_fft=n_fft, hop_length=320, n_mels=64)
    bank = agl_fast.mel_filterbank(sr=sr, n_fft=n_fft, n_mels=64)
    assert M[:, 10].argmax() == bank[:, k].argmax()


def test_float64_power_to_db_matches_librosa_in_any_layout() -> None:
    """The double-precision dB kernel (a vectorised logarithm) against
    librosa, for C- and Fortran-ordered input (librosa's STFT layout, which
    is converted without a transposing copy and keeps its layout)."""
    import librosa

    rng = np.random.default_rng(7)
    S = np.asfortranarray(rng.random((257, 300)) ** 4 * 10.0 ** rng.integers(-14, 3, (257, 300)))
    for x in (S, np.ascontiguousarray(S)):
        for kw in ({}, {"ref": np.max}, {"top_db": None, "amin": 1e-20}, {"ref": 3.5}):
            got = agl_fast.power_to_db(x, **kw)
            want = librosa.power_to_db(x, **kw)
            assert got.dtype == np.float64 and got.flags.f_contiguous == x.flags.f_contiguous
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    amp = np.sqrt(S)
    np.testing.assert_allclose(
        agl_fast.amplitude_to_db(amp, ref=2.0**70),
        librosa.amplitude_to_db(amp, ref=2.0**70),
        atol=1e-12,
    )
    bad = S.copy()
    bad[3, 5] = np.nan
    with pytest.raises(agl_fast.exceptions.NonFiniteError, match="S is not finite"):
        agl_fast.power_to_db(bad)


@pytest.mark.parametrize("kw", [{}, {"n_fft": 512, "hop_length": 100, "pad_mode": "reflect"}])
def test_complex_stft_is_the_power_spectrogram_engine(rng: np.random.Generator, kw: dict) -> None:
    # The complex STFT runs on the same frame-batched transform as the power
    # spectrogram: |X|^2 in float32 is the spectrogram, bit for bit, and the
    # bits do not depend on the thread count or on the batch around a clip.
    y = rng.standard_normal(40_000).astype(np.float32)
    z = rng.standard_normal(9_999).astype(np.float32)
    S = agl_fast.stft(y, n_threads=1, **kw)
    P = agl_fast.spectrogram(y, n_threads=1, **kw)
    assert np.array_equal(S.real * S.real + S.imag * S.imag, P)
    for threads in (2, 3):
        assert np.array_equal(agl_fast.stft(y, n_threads=threads, **kw), S)
    both = agl_fast.stft([z, y], n_threads=3, output="list", **kw)
    assert np.array_equal(both[1], S)
    assert np.array_equal(both[0], agl_fast.stft(z, n_threads=1, **kw))


F64_CASES = [
    {},
    {"n_fft": 512, "hop_length": 100, "win_length": 400, "pad_mode": "reflect"},
    {"n_fft": 511, "hop_length": 128, "window": "hamming", "center": False},
    {"n_fft": 1024, "hop_length": 256, "pad_mode": "edge"},
]


@pytest.mark.parametrize("kw", F64_CASES)
def test_float64_stft_spectrogram_and_mel_match_librosa(rng: np.random.Generator, kw: dict) -> None:
    """The double-precision path against librosa on float64 stereo audio:
    the complex STFT, ``|X| ** power`` (formed in the same pass) and the mel
    projection (one pass, the filterbank's non-zero weights only) agree to
    1e-12 of the peak with librosa (whose filterbank agl-fast's equals to
    the bit), and the bits do not depend on the thread count."""
    y = 0.3 * rng.standard_normal((2, 30_011))
    want = librosa.stft(y, **kw)
    got = agl_fast.stft(y, n_threads=1, **kw)
    assert got.dtype == np.complex128
    close_to_peak(got, want, 1e-12)
    for power in (2.0, 1.0, 1.5):
        P = agl_fast.spectrogram(y, power=power, n_threads=1, **kw)
        assert P.dtype == np.float64
        close_to_peak(P, np.abs(want) ** power, 1e-12)
    n_fft = kw.get("n_fft", 2048)
    bank = agl_fast.mel_filterbank(sr=22050, n_fft=n_fft, n_mels=64)
    for power in (2.0, 1.0):
        M = agl_fast.melspectrogram(y, sr=22050, n_mels=64, power=power, n_threads=1, **kw)
        assert M.dtype == np.float64 and M.shape == (2, 64, want.shape[-1])
        close_to_peak(M, np.einsum("...ft,mf->...mt", np.abs(want) ** power, bank), 1e-12)
        theirs = librosa.feature.melspectrogram(y=y, sr=22050, n_mels=64, power=power, **kw)
        close_to_peak(M, theirs, 1e-12)
        np.testing.assert_allclose(M, theirs, rtol=1e-12)
        M2 = agl_fast.melspectrogram(y, sr=22050, n_mels=64, power=power, n_threads=2, **kw)
        np.testing.assert_array_equal(M, M2)
    np.testing.assert_array_equal(got, agl_fast.stft(y, n_threads=2, **kw))


def test_compat_float32_stft_is_the_double_precision_result_rounded_once(
    rng: np.random.Generator,
) -> None:
    """librosa transforms float32 frames against its float64 window in double
    precision and stores complex64; the compat stft writes complex64 from the
    double-precision kernel directly: the complex128 result rounded once, bit
    for bit, and librosa's values to float32 rounding of the peak."""
    from agl_fast.compat import librosa as compat

    y = (0.3 * rng.standard_normal((2, 20_000))).astype(np.float32)
    for kw in ({}, {"n_fft": 512, "hop_length": 100, "pad_mode": "reflect"}):
        got = compat.stft(y, **kw)
        want = librosa.stft(y, **kw)
        assert got.dtype == want.dtype == np.complex64
        close_to_peak(got, want, 1e-7)
        wide = compat.stft(y, dtype=np.complex128, **kw)
        assert wide.dtype == np.complex128
        close_to_peak(wide, librosa.stft(y, dtype=np.complex128, **kw), 1e-12)
        np.testing.assert_array_equal(got, wide.astype(np.complex64))
    with pytest.raises(agl_fast.exceptions.ParameterError, match="power"):
        agl_fast.spectrogram(y.astype(np.float64), power=17.0)
