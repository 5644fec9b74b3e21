"""``import agl_fast.compat.librosa as librosa`` behaves like librosa for the
functions it provides and names the ones it does not."""

from __future__ import annotations

import librosa as real
import numpy as np
import pytest

import agl_fast
import agl_fast.compat.librosa as librosa


def test_drop_in_functions_match(rng: np.random.Generator) -> None:
    y = rng.standard_normal(22050 * 2).astype(np.float32)
    S = librosa.stft(y)
    R = real.stft(y)
    assert S.shape == R.shape and S.dtype == R.dtype
    assert np.abs(S - R).max() <= 2e-5 * np.abs(R).max()
    M = librosa.feature.melspectrogram(y=y, sr=22050, n_mels=64)
    Mr = real.feature.melspectrogram(y=y, sr=22050, n_mels=64)
    assert np.abs(M - Mr).max() <= 2e-5 * Mr.max()
    np.testing.assert_allclose(
        librosa.power_to_db(Mr, ref=np.max), real.power_to_db(Mr, ref=np.max), atol=1e-3
    )
    np.testing.assert_allclose(
        librosa.amplitude_to_db(np.abs(R)), real.amplitude_to_db(np.abs(R)), atol=1e-3
    )
    np.testing.assert_allclose(
        librosa.filters.mel(sr=16000, n_fft=512),
        real.filters.mel(sr=16000, n_fft=512),
        rtol=1e-5,
        atol=1e-9,
    )
    Ms = librosa.feature.melspectrogram(S=np.abs(R) ** 2, sr=22050)
    np.testing.assert_allclose(
        Ms, real.feature.melspectrogram(S=np.abs(R) ** 2, sr=22050), rtol=1e-4, atol=1e-6 * Ms.max()
    )


def test_uncovered_functions_are_librosas_own() -> None:
    """A name agl-fast does not accelerate is librosa's object, never an
    error (the script goes on), and is counted."""
    librosa.reset_counters()
    assert librosa.feature.chroma_cqt is real.feature.chroma_cqt
    assert librosa.pyin is real.pyin
    assert librosa.filters.chroma is real.filters.chroma
    assert not hasattr(librosa, "beat_track")  # not a librosa name either
    names = librosa.coverage().librosa_names
    assert names["feature.chroma_cqt"] == 1 and names["pyin"] == 1


def test_feature_rms_flatness_and_load(rng: np.random.Generator, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import soundfile as sf

    y = rng.standard_normal(22050).astype(np.float32)
    np.testing.assert_allclose(librosa.feature.rms(y=y), real.feature.rms(y=y), rtol=1e-5)
    np.testing.assert_allclose(
        librosa.feature.spectral_flatness(y=y), real.feature.spectral_flatness(y=y), rtol=1e-3
    )
    # A file at another rate: decoded natively, then resampled by soxr_hq,
    # as librosa's loader does, so the result is librosa's to the bit.
    t = np.arange(44100) / 44100
    tones = [np.sin(2 * np.pi * f * t + rng.uniform(0, 6)) for f in (440, 3000, 7000)]
    stereo = (0.2 * np.stack([sum(tones), tones[0] - tones[2]])).astype(np.float32)
    path = tmp_path / "x.wav"
    sf.write(path, stereo.T, 44100, subtype="FLOAT")
    ours, sr = librosa.load(path)
    ref, sr_ref = real.load(path)
    assert sr == sr_ref == 22050 and ours.shape == ref.shape and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, ref)
    reasons = {r for (name, r) in librosa.coverage().fallbacks if name == "resample"}
    assert any("'soxr_hq' is soxr's own filter" in r for r in reasons), reasons
    native, sr0 = librosa.load(path, sr=None, mono=False)
    assert sr0 == 44100
    np.testing.assert_array_equal(native, stereo)
    # The S= paths follow librosa (Parseval with halved DC/Nyquist bins; the
    # flatness of a magnitude spectrogram), multichannel included.
    S = np.abs(real.stft(np.stack([y, 0.5 * y[::-1]])))
    np.testing.assert_allclose(librosa.feature.rms(S=S), real.feature.rms(S=S), rtol=1e-6)
    np.testing.assert_allclose(
        librosa.feature.spectral_flatness(S=S), real.feature.spectral_flatness(S=S), rtol=1e-6
    )
    with pytest.raises(real.util.exceptions.ParameterError, match="frame_length"):
        librosa.feature.rms(S=np.ones((5, 5)))
    with pytest.raises(agl_fast.exceptions.ParameterError, match="frame_length"):
        librosa.feature.rms(S=np.ones((5, 5)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["spectral_centroid", "spectral_bandwidth", "spectral_rolloff"])
def test_spectral_shape_features_match_librosa(
    rng: np.random.Generator, name: str, dtype: type
) -> None:
    """From audio (agl-fast's magnitude spectrogram) and from S=; librosa's
    dtype; values to float32 STFT rounding (centroid and bandwidth) or the
    same bin (rolloff)."""
    y = (rng.standard_normal((2, 22050)) * np.linspace(0.1, 1, 22050)).astype(dtype)
    ours = getattr(librosa.feature, name)(y=y, sr=22050)
    theirs = getattr(real.feature, name)(y=y, sr=22050)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    rtol = 1e-3 if dtype is np.float32 else 1e-9
    if name == "spectral_rolloff":
        # a bin edge: allow one bin (10.8 Hz) where the cumulative sums tie
        assert np.mean(ours == theirs) > 0.99
        assert np.max(np.abs(ours - theirs)) <= 22050 / 2048 + 1e-9
    else:
        np.testing.assert_allclose(ours, theirs, rtol=rtol)
    S = np.abs(real.stft(y))
    np.testing.assert_allclose(
        getattr(librosa.feature, name)(S=S, sr=22050),
        getattr(real.feature, name)(S=S, sr=22050),
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"center": False}, {"frame_length": 1000, "hop_length": 333}, {"pad": True},
     {"zero_pos": False}, {"threshold": 0.3, "ref_magnitude": np.max},
     {"threshold": 0.05, "ref_magnitude": 2.0}],
)  # fmt: skip
def test_zero_crossing_rate_is_librosas_to_the_bit(rng: np.random.Generator, kwargs: dict) -> None:
    y = rng.standard_normal((2, 9000)).astype(np.float32)
    y[:, 100:400] = 0.0  # silence: zeros count as positive
    y[0, 500:520] = -0.0
    ours = librosa.feature.zero_crossing_rate(y, **kwargs)
    theirs = real.feature.zero_crossing_rate(y, **kwargs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"lag": 2, "max_size": 3}, {"detrend": True, "center": False},
     {"aggregate": np.median}, {"n_mels": 64, "fmax": 8000.0}],
)  # fmt: skip
def test_onset_strength_matches_librosa(rng: np.random.Generator, kwargs: dict) -> None:
    y = rng.standard_normal(3 * 22050).astype(np.float32)
    y[::5000] += 8.0  # clicks
    ours = librosa.onset.onset_strength(y=y, sr=22050, **kwargs)
    theirs = real.onset.onset_strength(y=y, sr=22050, **kwargs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3 * np.max(np.abs(theirs)))
    # from a given spectrogram the arithmetic is librosa's, to the bit
    S = real.power_to_db(real.feature.melspectrogram(y=y, sr=22050))
    np.testing.assert_array_equal(
        librosa.onset.onset_strength(S=S, sr=22050), real.onset.onset_strength(S=S, sr=22050)
    )


@pytest.mark.parametrize("kwargs", [{}, {"top_db": 20}, {"frame_length": 1024, "hop_length": 256}])
def test_trim_and_split_match_librosa(rng: np.random.Generator, kwargs: dict) -> None:
    y = np.zeros((2, 6 * 22050), dtype=np.float32)
    for start in (1.0, 2.5, 4.2):
        at = int(start * 22050)
        y[:, at : at + 11025] = 0.3 * rng.standard_normal((2, 11025))
    y += 1e-5 * rng.standard_normal(y.shape).astype(np.float32)
    yt, idx = librosa.effects.trim(y, **kwargs)
    rt, ridx = real.effects.trim(y, **kwargs)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(yt, rt)
    np.testing.assert_array_equal(
        librosa.effects.split(y, **kwargs), real.effects.split(y, **kwargs)
    )
