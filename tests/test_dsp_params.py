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
