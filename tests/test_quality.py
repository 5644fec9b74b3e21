"""Quality metrics: parity with librosa, scipy and scikit-maad, analytic
checks, the filter table, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import scipy.signal

import agl_fast
from agl_fast import quality
from agl_fast.exceptions import NonFiniteError, ParameterError, ShapeError

SR = 16000
SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="module")
def clips() -> np.ndarray:
    rng = np.random.default_rng(7)
    t = np.arange(3 * SR) / SR
    noise = 0.1 * rng.standard_normal(3 * SR)
    chirp = 0.3 * scipy.signal.chirp(t, 100, t[-1], 6000) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    tone = 0.5 * np.sin(2 * np.pi * 440 * t)
    return np.stack([noise, chirp + 0.01 * noise, tone]).astype(np.float32)


def _welch_flatness(x: np.ndarray, nperseg: int = 1024, amin: float = 1e-10) -> float:
    _, p = scipy.signal.welch(x.astype(np.float64), SR, nperseg=nperseg)
    p = np.maximum(p, amin)
    return float(np.exp(np.mean(np.log(p))) / np.mean(p))


# --- parity ----------------------------------------------------------------
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("pad_mode", ["constant", "reflect"])
def test_frame_rms_matches_librosa(clips: np.ndarray, center: bool, pad_mode: str) -> None:
    librosa = pytest.importorskip("librosa")
    got = quality.rms(clips, frame_length=1024, hop_length=256, center=center, pad_mode=pad_mode)
    ref = librosa.feature.rms(
        y=clips, frame_length=1024, hop_length=256, center=center, pad_mode=pad_mode
    )
    assert got.shape == ref.shape
    # f64 accumulation here, float32 means in librosa: 1e-5 relative.
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-8)


def test_frame_flatness_matches_librosa(clips: np.ndarray) -> None:
    librosa = pytest.importorskip("librosa")
    for power in (2.0, 1.0):
        got = quality.spectral_flatness(clips, n_fft=1024, hop_length=256, power=power)
        ref = librosa.feature.spectral_flatness(y=clips, n_fft=1024, hop_length=256, power=power)
        assert got.shape == ref.shape
        # float32 spectra on both sides: 1e-3 relative. A tone's flatness
        # (1e-5) is set by float32 FFT round-off in bins 100 dB down, which
        # differs between FFT libraries: 5e-6 absolute.
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=5e-6)


def test_clip_flatness_matches_scipy_welch(clips: np.ndarray) -> None:
    m = quality.quality_metrics(clips, SR)
    ref = [_welch_flatness(x) for x in clips]
    # f32 FFT against scipy's f64 Welch: 1e-5 relative, 1e-9 absolute.
    np.testing.assert_allclose(m["flatness"], ref, rtol=1e-5, atol=1e-9)
    m = quality.quality_metrics(clips[:, :700], SR, welch_nperseg=256)
    ref = [_welch_flatness(x[:700], 256) for x in clips]
    np.testing.assert_allclose(m["flatness"], ref, rtol=1e-5, atol=1e-9)


def test_aci_matches_scikit_maad(clips: np.ndarray) -> None:
    maad_features = pytest.importorskip("maad.features")
    librosa = pytest.importorskip("librosa")
    for i, x in enumerate(clips):
        s = np.abs(librosa.stft(x, n_fft=512, hop_length=256, center=False)).astype(np.float64)
        _, per_ref, total_ref = maad_features.acoustic_complexity_index(s)
        per, total = quality.acoustic_complexity_index(s)
        # The same sums in f64: 1e-12 relative.
        np.testing.assert_allclose(per, per_ref, rtol=1e-12)
        assert total == pytest.approx(total_ref, rel=1e-12)
        # The clip-level metric takes the same spectrogram from the Rust STFT
        # (float32): 1e-4 relative. Not for the pure tone: its bins away from
        # 440 Hz hold only float32 round-off, whose relative fluctuations (what
        # ACI sums) differ between FFT libraries.
        if i == 2:
            continue
        assert quality.quality_metrics(x, SR)["aci"][0] == pytest.approx(total_ref, rel=1e-4)


def test_paper_complexity_is_aci_of_the_power_spectrogram(clips: np.ndarray) -> None:
    librosa = pytest.importorskip("librosa")
    x = clips[1]
    e = np.abs(librosa.stft(x, n_fft=512, hop_length=256, center=False)).astype(np.float64) ** 2
    expected = sum(np.abs(np.diff(row)).sum() / row.sum() for row in e)
    assert quality.quality_metrics(x, SR)["complexity"][0] == pytest.approx(expected, rel=1e-4)


# --- analytic ----------------------------------------------------------------
def test_white_noise_is_flat_and_a_tone_is_not(clips: np.ndarray) -> None:
    m = quality.quality_metrics(clips, SR)
    assert m["flatness"][0] > 0.95
    assert m["flatness"][2] < 1e-3
    assert m["rms"][2] == pytest.approx(0.5 / np.sqrt(2), rel=1e-4)


def test_clipped_sine_clipping_ratios() -> None:
    t = np.arange(SR) / SR
    x = np.clip(2.0 * np.sin(2 * np.pi * 50 * t), -1.0, 1.0).astype(np.float32)
    # |2 sin| >= 1 where |sin| >= 1/2: two thirds of each period.
    expected = np.mean(np.abs(x) == 1.0)
    assert expected == pytest.approx(2 / 3, abs=0.01)
    m = quality.quality_metrics(x, SR)
    assert m["clipping_ratio"][0] == expected
    assert m["full_scale_ratio"][0] == np.mean(np.abs(x) >= 0.999)
    # Scaled down, the peak plateau remains (paper form) but nothing is at
    # full scale.
    m = quality.quality_metrics(0.5 * x, SR)
    assert m["clipping_ratio"][0] == expected
    assert m["full_scale_ratio"][0] == 0.0


# --- the filter --------------------------------------------------------------
def test_filter_table_and_reasons(clips: np.ndarray) -> None:
    t = np.arange(2 * SR) / SR
    items = [
        clips[1],  # passes
        clips[0],  # white noise
        np.zeros(SR, np.float32),  # silent
        np.full(SR, 0.2, np.float32),  # constant
        np.array([0.3], np.float32),  # one sample
        np.zeros(0, np.float32),  # empty
        np.clip(3 * np.sin(2 * np.pi * 200 * t), -1, 1).astype(np.float32),  # clipped
    ]
    table = agl_fast.quality_filter(items, SR, ids=list("abcdefg"))
    assert isinstance(table, pa.Table)
    assert table.num_rows == len(items)
    assert set(quality.METRICS) <= set(table.column_names)
    rows = table.to_pylist()
    assert [r["passed"] for r in rows] == [True] + [False] * 6
    reasons = {r["id"]: set(r["reasons"]) for r in rows}
    assert reasons["a"] == set()
    assert "noise_like" in reasons["b"]
    assert {"low_rms", "low_complexity"} <= reasons["c"]
    assert {"clipped", "low_complexity"} <= reasons["d"]
    assert {"too_short", "clipped"} <= reasons["e"]
    assert {"empty", "low_rms"} <= reasons["f"]
    assert {"clipped", "full_scale"} <= reasons["g"]
    for r in rows:
        for name in quality.METRICS:
            assert np.isfinite(r[name]), (r["id"], name)


def test_filter_thresholds_are_applied(clips: np.ndarray) -> None:
    table = quality.quality_filter(clips[:2], SR, flatness_ceiling=1.1)
    assert table.column("passed").to_pylist() == [True, True]
    table = quality.quality_filter(clips[:2], SR, rms_floor=10.0)
    assert table.column("passed").to_pylist() == [False, False]


def test_batch_forms_and_threads_agree(clips: np.ndarray) -> None:
    a = quality.quality_metrics(clips, SR, n_threads=1)
    b = quality.quality_metrics(list(clips), SR, n_threads=2)
    c = quality.quality_metrics(pa.array(list(clips), pa.list_(pa.float32())), SR)
    for k in quality.METRICS:
        np.testing.assert_array_equal(a[k], b[k])
        np.testing.assert_array_equal(a[k], c[k])


@pytest.mark.skipif(not (SHARED / "agl1k").is_dir(), reason="shared data not present")
def test_real_aporee_recording_passes_the_default_filter() -> None:
    sf = pytest.importorskip("soundfile")
    path = SHARED / "agl1k" / "AmselanDietersFensterJuni2003Edit.mp3"
    try:
        y, sr = sf.read(str(path), frames=44100 * 20, dtype="float32", always_2d=True)
    except Exception as exc:  # libsndfile built without MP3
        pytest.skip(f"cannot decode MP3 here: {exc}")
    table = quality.quality_filter(y.mean(axis=1), sr)
    assert table.column("passed").to_pylist() == [True], table.to_pylist()


# --- bad input ---------------------------------------------------------------
def test_bad_input() -> None:
    x = np.ones(100, np.float32)
    with pytest.raises(ParameterError, match="sr must be a positive"):
        quality.quality_metrics(x, 0)
    with pytest.raises(NonFiniteError, match="first NaN or Inf at sample 3"):
        quality.quality_metrics(np.array([0, 0, 0, np.nan], np.float32), SR)
    with pytest.raises(ShapeError, match="empty"):
        quality.rms(np.zeros(0, np.float32))
    with pytest.raises(ParameterError, match="amin"):
        quality.spectral_flatness(x, n_fft=64, amin=0.0)
    with pytest.raises(ParameterError, match="unknown argument"):
        quality.quality_filter(x, SR, bogus=1)
    with pytest.raises(ShapeError, match="2-D"):
        quality.acoustic_complexity_index(np.ones(4))
    with pytest.raises(ParameterError, match="non-negative"):
        quality.acoustic_complexity_index(-np.ones((2, 4)))


def test_levels_match_numpy() -> None:
    rng = np.random.default_rng(3)
    clips = [
        np.clip(1.2 * rng.standard_normal(5000), -1, 1).astype(np.float32),
        (0.1 * rng.standard_normal((2, 3001))).astype(np.float32).reshape(-1),
        np.zeros(0, np.float32),
    ]
    got = quality.levels(clips)
    for i, x in enumerate(clips[:2]):
        a = np.abs(x)
        assert got["peak"][i] == a.max()
        # float64 square sums on both sides, other summation order: 1e-12.
        rms = np.sqrt(np.mean(x.astype(np.float64) ** 2))
        assert got["rms"][i] == pytest.approx(rms, rel=1e-12)
        assert got["clipped_fraction"][i] == np.mean(a >= 0.999)
    assert got["clipped_fraction"][0] > 0.3
    assert [got[k][2] for k in ("peak", "rms", "clipped_fraction")] == [0.0, 0.0, 0.0]
    with pytest.raises(NonFiniteError):
        quality.levels([np.array([0.1, np.nan], np.float32)])
    with pytest.raises(ParameterError):
        quality.levels(clips, threshold=0.0)


def test_given_clip_stats_are_taken_as_measured() -> None:
    rng = np.random.default_rng(3)
    y = np.clip(1.5 * rng.standard_normal((2, 9000)), -1, 1).astype(np.float32)
    full = quality.quality_metrics(y, 16000)
    stats = np.column_stack([full["rms"], full["clipping_ratio"], full["full_scale_ratio"]])
    given = quality.quality_metrics(y, 16000, clip_stats=stats)
    for name in quality.METRICS:
        np.testing.assert_array_equal(given[name], full[name])
    # Only the spectra are computed from the clips: the statistics are as given.
    odd = quality.quality_metrics(y, 16000, clip_stats=stats + 1.0)
    np.testing.assert_array_equal(odd["rms"], full["rms"] + 1.0)
    np.testing.assert_array_equal(odd["flatness"], full["flatness"])
    with pytest.raises(ShapeError, match=r"clip_stats must have shape \(2, 3\)"):
        quality.quality_metrics(y, 16000, clip_stats=stats[:1])


@pytest.mark.parametrize("n_fft", [512, 400])
def test_frame_flatness_is_the_same_for_any_thread_count(n_fft: int) -> None:
    # Power-of-two n_fft runs sixteen frames per block of the frame-batched
    # FFT (blocks start at multiples of sixteen within a clip, whatever the
    # threads); other lengths one frame at a time.
    rng = np.random.default_rng(12)
    clips = np.asarray(0.1 * rng.standard_normal((5, 7777)), np.float32)
    one = quality.spectral_flatness(clips, n_fft=n_fft, n_threads=1)
    two = quality.spectral_flatness(clips, n_fft=n_fft, n_threads=2)
    np.testing.assert_array_equal(one, two)
    each = np.stack([quality.spectral_flatness(c, n_fft=n_fft, n_threads=1) for c in clips])
    np.testing.assert_array_equal(one, each)
