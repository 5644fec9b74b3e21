"""The dsp package: StftParams' resolved defaults and the features facade."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import agl_fast
from agl_fast import dsp, features
from agl_fast.dsp.params import StftParams, default_hop_length


def test_stft_params_resolve_librosa_defaults() -> None:
    p = StftParams()
    assert (p.n_fft, p.win_length, p.hop_length) == (2048, 2048, 512)
    # librosa: hop_length defaults to win_length // 4, not n_fft // 4.
    q = StftParams(n_fft=1024, win_length=400)
    assert (q.win_length, q.hop_length) == (400, 100)
    assert StftParams(n_fft=512, hop_length=7).hop_length == 7
    assert default_hop_length(1024, None, None) == 256


def test_stft_params_frozen() -> None:
    p = StftParams(n_fft=256)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.n_fft = 512  # type: ignore[misc]


def test_stft_params_kwargs_give_same_stft() -> None:
    y = np.random.default_rng(0).standard_normal(4000).astype(np.float32)
    p = StftParams(n_fft=512, win_length=400)
    a = dsp.stft(y, **p.as_kwargs())
    b = agl_fast.stft(y, n_fft=512, win_length=400)
    np.testing.assert_array_equal(a, b)


def test_public_names_shared() -> None:
    assert agl_fast.StftParams is dsp.StftParams is features.StftParams
    for name in features.__all__:
        assert getattr(features, name) is getattr(dsp, name)
    assert features.stft is agl_fast.stft


def test_stft_params_copy_compare_and_pickle() -> None:
    import pickle

    p = StftParams(n_fft=512, win_length=400, pad_mode="reflect")
    q = pickle.loads(pickle.dumps(p))
    assert q == p and hash(q) == hash(p) and q is not p
    assert (q.win_length, q.hop_length, q.pad_mode) == (400, 100, "reflect")
    assert p != StftParams(n_fft=512)
    assert repr(p).startswith("StftParams(n_fft=512, hop_length=100, win_length=400")


def test_the_window_is_made_once_after_the_framing_is_checked() -> None:
    """A computed window is made once, at the checked length; a framing
    that fails its checks never makes it (no window of 2**62 samples)."""
    calls: list[int] = []

    def hann(n: int) -> np.ndarray:
        calls.append(n)
        return np.hanning(n)

    y = np.random.default_rng(1).standard_normal(4000).astype(np.float32)
    got = agl_fast.stft(y, n_fft=512, win_length=400, window=hann)
    assert calls == [400]
    want = agl_fast.stft(y, n_fft=512, win_length=400, window=np.hanning(400))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(agl_fast.exceptions.ParameterError, match="n_fft must be <="):
        agl_fast.stft(y, n_fft=2**62, window=hann)
    with pytest.raises(agl_fast.exceptions.ParameterError, match="n_fft must be >= win_length"):
        agl_fast.stft(y, n_fft=256, win_length=400, window=hann)
    assert calls == [400]


def test_a_numpy_padding_mode_is_applied_before_the_kernel() -> None:
    """``edge`` padding: the framing names it, ``pad_signal`` applies it
    and gives the uncentred framing; a kernel handed the centred framing
    without the padding refuses it instead of transforming unpadded audio."""
    from agl_fast import _native
    from agl_fast.dsp.stft import pad_signal

    y = np.random.default_rng(2).standard_normal(3000).astype(np.float32)
    frame = StftParams(n_fft=256, pad_mode="edge")
    assert (frame.outside_pad, StftParams(n_fft=256).outside_pad) == ("edge", None)
    padded, framing = pad_signal(y, frame)
    assert padded.shape == (3000 + 256,) and padded[0] == y[0] and padded[-1] == y[-1]
    assert (framing.center, framing.pad_mode, framing.outside_pad) == (False, "constant", None)
    got = agl_fast.stft(y, n_fft=256, pad_mode="edge")
    np.testing.assert_array_equal(got, agl_fast.stft(padded, n_fft=256, center=False))
    with pytest.raises(agl_fast.exceptions.ParameterError, match="pad_mode"):
        _native.stft(y[None], frame)
    with pytest.raises(agl_fast.exceptions.ParameterError, match="pad_mode"):
        agl_fast.ipd_features(np.stack([y, y]), n_fft=256, pad_mode="edge")
