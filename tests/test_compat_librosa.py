"""``import agl_fast.compat.librosa as librosa`` behaves like librosa for the
functions it provides and names the ones it does not."""

from __future__ import annotations

import librosa as real
import numpy as np
import pytest

import agl_fast.compat.librosa as librosa
from agl_fast.exceptions import NotAcceleratedError


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


def test_uncovered_functions_name_themselves() -> None:
    with pytest.raises(NotAcceleratedError, match="'chroma_stft'"):
        librosa.feature.chroma_stft  # noqa: B018
    with pytest.raises(NotAcceleratedError, match="'pyin'"):
        librosa.pyin  # noqa: B018
    with pytest.raises(NotAcceleratedError, match="'chroma'"):
        librosa.filters.chroma  # noqa: B018
    assert not hasattr(librosa, "beat_track")
