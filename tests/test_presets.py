"""The ``bat`` and ``efficientat`` recipes against numpy transcriptions of
their formulas (tests/reference.py), IPD analytic checks, and Kaldi mel banks
against torchaudio when the torch extra is installed.

Tolerances: log-mel within 2e-3 dB where the mel energy is well above the
float32 noise floor (>= -100 dB relative to the clip peak); IPD cos/sin within
2e-4 absolute (float32 phase of each bin, summed over a mel triangle of area 1);
EfficientAT log features within 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

import agl_fast
import refimpl as reference


def _stereo(rng: np.random.Generator, n: int) -> np.ndarray:
    base = rng.standard_normal(n + 7).astype(np.float32)
    return np.stack([base[7:], 0.6 * base[:-7] + 0.1 * rng.standard_normal(n)]).astype(np.float32)


def _check_bat(ours: np.ndarray, ref: np.ndarray) -> None:
    assert ours.shape == ref.shape and ours.dtype == np.float32
    # A float32 FFT's absolute error is about 1e-7 of the frame's norm, so a
    # low band resting on one bin 80 dB below the frame's peak bin (while
    # the band itself, weighted, sits 55 dB below the loudest band) carries
    # about 1e-3 relative error (5e-3 dB): 2e-3 dB within 40 dB of the
    # loudest band, 2e-2 dB everywhere.
    near = ref[:2] > ref[:2].max(axis=-1, keepdims=True) - 40
    np.testing.assert_allclose(ours[:2][near], ref[:2][near], atol=2e-3)
    np.testing.assert_allclose(ours[:2], ref[:2], atol=2e-2)
    np.testing.assert_allclose(ours[2:], ref[2:], atol=2e-4)


def test_bat_matches_numpy_transcription(rng: np.random.Generator) -> None:
    y = _stereo(rng, 32000 * 2 + 123)
    ours = agl_fast.bat(y)
    ref = reference.bat_numpy(y)
    assert ours.shape == (4, 1 + y.shape[1] // 320, 128)
    _check_bat(ours, ref)


def test_bat_on_real_recordings(real_stereo_32k: list[np.ndarray]) -> None:
    clips = [c[:, : 32000 * 10] for c in real_stereo_32k]
    batch = np.stack(clips)
    out = agl_fast.bat(batch)
    for i, c in enumerate(clips):
        ref = reference.bat_numpy(c)
        # Real recordings have near-silent high bands where float32 rounding of
        # the FFT (about 1e-7 of the peak) dominates: 5e-3 dB within 60 dB of
        # the clip's peak, 5e-2 dB within 90 dB.
        peak = ref[:2].max()
        for span, tol in ((60, 5e-3), (90, 5e-2)):
            mask = ref[:2] > peak - span
            np.testing.assert_allclose(out[i, :2][mask], ref[:2][mask], atol=tol)
        # The IPD of a bin rests on its phase, whose float32 error grows as
        # its level falls: about 3e-4 rad 70 dB below the peak. 2e-4 where
        # both ears are within 60 dB of the peak, 1e-3 everywhere.
        loud = np.minimum(ref[0], ref[1]) > peak - 60
        np.testing.assert_allclose(out[i, 2:][:, loud], ref[2:][:, loud], atol=2e-4)
        np.testing.assert_allclose(out[i, 2:], ref[2:], atol=1e-3)


def test_bat_fast_transcription_agrees(rng: np.random.Generator) -> None:
    y = _stereo(rng, 32000)
    mel = reference.slaney_mel(32000, 1024, 128, 50.0, 14000.0)
    win = reference.padded_window("hann", 1024, 1024)
    _check_bat(agl_fast.bat(y), reference.bat_fast_transcription(y, mel, win))


def test_bat_loudness_normalisation(rng: np.random.Generator) -> None:
    y = 0.01 * _stereo(rng, 16000)
    rms = np.sqrt(np.mean(y.astype(np.float64) ** 2))
    gain = 10 ** (-14 / 20) / rms
    ours = agl_fast.bat(y, loudness_dbfs=-14.0)
    ref = reference.bat_numpy((y * gain).astype(np.float32))
    _check_bat(ours, ref)
    silent = np.zeros((2, 8000), np.float32)
    assert np.all(agl_fast.bat(silent, loudness_dbfs=-14.0)[:2] == -100.0)


def test_efficientat_matches_numpy_transcription(rng: np.random.Generator) -> None:
    y = rng.standard_normal(32000 * 3 + 5).astype(np.float32) * 0.3
    ours = agl_fast.efficientat(y)
    ref = reference.efficientat_numpy(y)
    assert ours.shape == ref.shape == (128, 1 + (len(y) - 1) // 320)
    np.testing.assert_allclose(ours, ref, atol=1e-4)


def test_efficientat_on_real_recordings(real_stereo_32k: list[np.ndarray]) -> None:
    for clip in real_stereo_32k:
        y = clip.mean(axis=0)[: 32000 * 10]
        np.testing.assert_allclose(
            agl_fast.efficientat(y), reference.efficientat_numpy(y), atol=2e-4
        )


def test_kaldi_banks_match_transcription() -> None:
    ours = agl_fast.kaldi_mel_filterbank(sr=32000, n_fft=1024, n_mels=128, fmin=0, fmax=15000)
    np.testing.assert_allclose(ours, reference.kaldi_mel(32000, 1024, 128, 0, 15000), atol=1e-6)


@pytest.mark.torch
def test_kaldi_banks_match_torchaudio() -> None:
    torch = pytest.importorskip("torch")
    kaldi = pytest.importorskip("torchaudio.compliance.kaldi")
    for fmin, fmax in [(0.0, 15000.0), (20.0, 8000.0), (0.0, -500.0)]:
        bank, _ = kaldi.get_mel_banks(128, 1024, 32000.0, fmin, fmax, 100.0, -500.0, 1.0)
        ref = torch.nn.functional.pad(bank, (0, 1)).numpy()
        ours = agl_fast.kaldi_mel_filterbank(sr=32000, n_fft=1024, n_mels=128, fmin=fmin, fmax=fmax)
        # torchaudio builds the banks in float32.
        np.testing.assert_allclose(ours, ref, atol=2e-5)


def test_ipd_of_a_delayed_copy_is_the_delay_phase() -> None:
    sr, n_fft, hop, d = 32000, 1024, 320, 3  # right lags left by 3 samples
    rng = np.random.default_rng(7)
    x = rng.standard_normal(sr + d).astype(np.float32)
    y = np.stack([x[d:], x[:-d]])
    S = agl_fast.stft(y[0], n_fft=n_fft, hop_length=hop, pad_mode="reflect")
    R = agl_fast.stft(y[1], n_fft=n_fft, hop_length=hop, pad_mode="reflect")
    assert S.shape == R.shape
    # Unprojected check through a single-bin "mel" bank: an identity basis.
    feats = agl_fast.ipd_features(
        y, sr=sr, n_fft=n_fft, hop_length=hop, n_mels=128, fmin=0.0, fmax=sr / 2
    )
    bank = agl_fast.mel_filterbank(sr=sr, n_fft=n_fft, n_mels=128, fmin=0.0, fmax=sr / 2)
    k = np.arange(n_fft // 2 + 1)
    phase = -2 * np.pi * k * d / n_fft  # delay by d samples
    expect_cos = bank @ np.cos(phase)
    expect_sin = bank @ np.sin(phase)
    mid = slice(5, -5)  # away from the reflect-padded edges
    np.testing.assert_allclose(
        feats[0][:, mid], expect_cos[:, None].repeat(feats.shape[-1], 1)[:, mid], atol=0.05
    )
    np.testing.assert_allclose(
        feats[1][:, mid], expect_sin[:, None].repeat(feats.shape[-1], 1)[:, mid], atol=0.05
    )


def test_ipd_zero_bins_have_zero_phase() -> None:
    silent = np.zeros((2, 4000), np.float32)
    f = agl_fast.ipd_features(silent)
    bank = agl_fast.mel_filterbank(sr=32000, n_fft=1024, n_mels=128, fmin=50, fmax=14000)
    np.testing.assert_allclose(f[0], np.repeat(bank.sum(1)[:, None], f.shape[-1], 1), rtol=1e-6)
    assert np.all(f[1] == 0)
    # One channel silent: IPD = phase of the other (or minus it).
    rng = np.random.default_rng(3)
    x = rng.standard_normal(4000).astype(np.float32)
    only_right = np.stack([np.zeros_like(x), x])
    spec = np.fft.rfft(
        reference.frames(x.astype(np.float64), 1024, 320, True, "reflect")
        * reference.padded_window("hann", 1024, 1024),
        axis=-1,
    )
    phase = np.angle(spec)
    f = agl_fast.ipd_features(only_right)
    np.testing.assert_allclose(f[0], (np.cos(phase) @ bank.T).T, atol=2e-4)
    np.testing.assert_allclose(f[1], (np.sin(phase) @ bank.T).T, atol=2e-4)


def test_preset_dispatch(rng: np.random.Generator) -> None:
    y = rng.standard_normal(22050).astype(np.float32)
    np.testing.assert_array_equal(agl_fast.preset("librosa", y), agl_fast.logmel(y))
    with pytest.raises(agl_fast.exceptions.ParameterError, match="unknown preset"):
        agl_fast.preset("mfcc", y)
