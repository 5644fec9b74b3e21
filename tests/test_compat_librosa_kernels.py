"""The native paths behind four compat.librosa functions, against the
libraries they replace: ``resample(res_type="polyphase")`` against
``scipy.signal.resample_poly``, ``pcen`` against librosa's (scipy's
``lfilter`` smoother), ``spectral_bandwidth`` against librosa's, and the
direct PCM WAV reader of ``load`` against soundfile (exact samples)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.signal
import soundfile as sf

librosa = pytest.importorskip("librosa")

import agl_fast.compat.librosa as compat  # noqa: E402
from agl_fast import audio  # noqa: E402

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("orig", "target"), [(22050, 16000), (16000, 22050), (44100, 22050), (8000, 44100), (3, 7)]
)
def test_polyphase_is_scipys_resample_poly(dtype: type, orig: int, target: int) -> None:
    y = (0.3 * RNG.standard_normal(5001)).astype(dtype)
    g = np.gcd(orig, target)
    want = scipy.signal.resample_poly(y, target // g, orig // g, axis=-1)
    got = compat.resample(y, orig_sr=orig, target_sr=target, res_type="polyphase", fix=False)
    assert got.dtype == y.dtype and got.shape == want.shape
    tol = 1e-6 if dtype is np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * np.max(np.abs(want)))
    # librosa's own call (fix_length to ceil(n * ratio), dtype kept)
    ref = librosa.resample(y, orig_sr=orig, target_sr=target, res_type="polyphase")
    fixed = compat.resample(y, orig_sr=orig, target_sr=target, res_type="polyphase")
    assert fixed.shape == ref.shape and fixed.dtype == ref.dtype
    np.testing.assert_allclose(fixed, ref, rtol=0, atol=tol * np.max(np.abs(ref)))


def test_polyphase_channels_axis_scale_and_fallbacks() -> None:
    y = RNG.standard_normal((2, 3, 900))
    for axis in (-1, 0):
        want = librosa.resample(
            y, orig_sr=48000, target_sr=32000, res_type="polyphase", axis=axis, scale=True
        )
        got = compat.resample(
            y, orig_sr=48000, target_sr=32000, res_type="polyphase", axis=axis, scale=True
        )
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    compat.reset_counters()
    # float16 data and non-integer rates are librosa's own
    half = y[0, 0].astype(np.float16)
    out = compat.resample(half, orig_sr=4, target_sr=3, res_type="polyphase")
    assert out.dtype == np.float16
    with pytest.raises(librosa.util.exceptions.ParameterError):
        compat.resample(y, orig_sr=100.5, target_sr=100, res_type="polyphase")
    reasons = {r for (name, r) in compat.coverage().fallbacks if name == "resample"}
    assert reasons == {
        "polyphase on float16 data is not accelerated",
        "non-integer rates or fix_length keywords are not accelerated",
    }


def _mel() -> np.ndarray:
    y = 0.1 * RNG.standard_normal(22050 * 3)
    return librosa.feature.melspectrogram(y=y, sr=22050) * 2**31


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"power": 0.25},
        {"power": 0.0},
        {"bias": 0.0},
        {"gain": 0.5, "bias": 10.0, "time_constant": 0.06},
        {"b": 0.3, "axis": 0},
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pcen_is_librosas(kwargs: dict[str, float], dtype: type) -> None:
    S = _mel().astype(dtype)
    want, want_zf = librosa.pcen(S, sr=22050, return_zf=True, **kwargs)
    got, got_zf = compat.pcen(S, sr=22050, return_zf=True, **kwargs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)
    # the smoother's final state: scipy's recursion, the same operations
    np.testing.assert_array_equal(got_zf, want_zf)


def test_pcen_streams_like_librosa_and_keeps_bad_values() -> None:
    S = _mel()
    zi_lib = zi_ours = None
    for block in np.array_split(S, 4, axis=-1):
        a, zi_lib = librosa.pcen(block, sr=22050, zi=zi_lib, return_zf=True)
        b, zi_ours = compat.pcen(block, sr=22050, zi=zi_ours, return_zf=True)
        np.testing.assert_allclose(b, a, rtol=1e-13)
        np.testing.assert_array_equal(zi_ours, zi_lib)
    # an empty block (no frames) passes the state through (scipy's own
    # final state is then unset memory: not compared)
    a = librosa.pcen(S[:, :0], sr=22050, zi=zi_lib)
    b, zb = compat.pcen(S[:, :0], sr=22050, zi=zi_ours, return_zf=True)
    assert a.shape == b.shape == (S.shape[0], 0)
    np.testing.assert_array_equal(zb, zi_ours)
    stereo = np.stack([S, 2 * S])
    np.testing.assert_allclose(
        compat.pcen(stereo, sr=22050), librosa.pcen(stereo, sr=22050), rtol=1e-13
    )
    bad = S.copy()
    bad[3, 10] = np.nan
    bad[5, 0] = -1e12  # eps + M negative: NaN, as in librosa
    with np.errstate(invalid="ignore"):
        want = librosa.pcen(bad, sr=22050)
        got = compat.pcen(bad, sr=22050)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spectral_bandwidth_is_librosas(dtype: type) -> None:
    y = (0.1 * RNG.standard_normal(22050 * 2)).astype(dtype)
    S = np.abs(librosa.stft(y))
    cent = librosa.feature.spectral_centroid(S=S, sr=22050)
    freq = np.tile(np.linspace(0, 11025, S.shape[0])[:, None], (1, S.shape[1]))
    for kw in [{}, {"p": 1}, {"p": 3, "norm": False}, {"centroid": cent}, {"freq": freq}]:
        want = librosa.feature.spectral_bandwidth(S=S, sr=22050, **kw)
        got = compat.feature.spectral_bandwidth(S=S, sr=22050, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype is np.float32 else 1e-12)


@pytest.mark.parametrize(
    ("subtype", "channels"),
    [("PCM_16", 1), ("PCM_16", 2), ("PCM_24", 2), ("PCM_32", 1), ("FLOAT", 3)],
)
def test_pcm_wav_reader_gives_soundfiles_samples(
    tmp_path: Path, subtype: str, channels: int
) -> None:
    sr = 16000
    x = np.clip(0.4 * RNG.standard_normal((sr * 2 + 7, channels)), -1, 1)
    path = tmp_path / f"{subtype}.wav"
    sf.write(path, x, sr, subtype=subtype)
    want, _ = sf.read(path, dtype="float32", always_2d=True)
    y, out_sr = audio.load(path, sr=None)
    assert out_sr == sr
    np.testing.assert_array_equal(np.atleast_2d(y), want.T)
    # offset and duration cut whole frames, as soundfile's seek and read
    part, _ = audio.load(path, sr=None, offset=0.5, duration=0.25)
    np.testing.assert_array_equal(np.atleast_2d(part), want[8000:12000].T)
    # librosa's load at the file's rate: its downmix, to float32 rounding
    a, _ = librosa.load(path, sr=None)
    b, _ = compat.load(path, sr=None)
    assert a.shape == b.shape
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-7)
    # max_duration cuts at a whole frame
    cut, _ = audio.load(path, sr=None, max_duration=1.0)
    np.testing.assert_array_equal(np.atleast_2d(cut), want[:sr].T)
