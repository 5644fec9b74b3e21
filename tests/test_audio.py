"""Decoding parity (soundfile, ffmpeg), resampling parity (soxr) and errors."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

import agl_fast
from agl_fast.exceptions import (
    AudioDecodeError,
    AudioFileNotFoundError,
    NonFiniteError,
    ParameterError,
)

MP3S = sorted((Path(__file__).resolve().parents[2] / "shared" / "agl1k").glob("*.mp3"))

FFMPEG = shutil.which("ffmpeg")
needs_ffmpeg = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


def _noise(n: int, ch: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-0.9, 0.9, size=(n, ch))).astype(np.float32)


@pytest.mark.parametrize(
    ("fmt", "subtype"),
    [
        ("WAV", "PCM_U8"),
        ("WAV", "PCM_16"),
        ("WAV", "PCM_24"),
        ("WAV", "PCM_32"),
        ("WAV", "FLOAT"),
        ("FLAC", "PCM_16"),
        ("FLAC", "PCM_24"),
    ],
)
@pytest.mark.parametrize("channels", [1, 2, 6])
def test_round_trip_matches_soundfile(
    tmp_path: Path, fmt: str, subtype: str, channels: int
) -> None:
    path = tmp_path / f"x.{fmt.lower()}"
    sf.write(path, _noise(4801, channels), 24000, format=fmt, subtype=subtype)
    ref, ref_sr = sf.read(path, dtype="float32", always_2d=True)
    y, sr = agl_fast.load(path, sr=None)
    assert sr == ref_sr == 24000
    y2 = np.atleast_2d(y)
    assert y2.shape == ref.T.shape
    # Integer PCM converts exactly; 8-bit uses the same 1/128 scale.
    np.testing.assert_allclose(y2, ref.T, rtol=0, atol=1e-7)


def test_mono_channel_offset_duration(tmp_path: Path) -> None:
    path = tmp_path / "st.wav"
    x = _noise(16000, 2, seed=1)
    sf.write(path, x, 16000, subtype="FLOAT")
    y, _ = agl_fast.load(path, sr=None, mono=True)
    np.testing.assert_allclose(y, x.mean(axis=1), atol=1e-7)
    y, _ = agl_fast.load(path, sr=None, channel=1)
    np.testing.assert_array_equal(y, x[:, 1])
    y, _ = agl_fast.load(path, sr=None, offset=0.25, duration=0.5)
    np.testing.assert_array_equal(y, x[4000:12000].T)
    y, _ = agl_fast.load(path, sr=None, max_duration=0.1)
    assert y.shape == (2, 1600)
    with pytest.raises(ParameterError, match="channel"):
        agl_fast.load(path, channel=2)
    with pytest.raises(ParameterError, match="offset"):
        agl_fast.load(path, offset=-1.0)
    with pytest.raises(ParameterError, match="res_type"):
        agl_fast.load(path, res_type="best")


def test_flac_seek_equals_full_decode(tmp_path: Path) -> None:
    path = tmp_path / "long.flac"
    x = _noise(48000 * 5, 2, seed=2)
    sf.write(path, x, 48000, subtype="PCM_24")
    full, _ = agl_fast.load(path, sr=None)
    part, _ = agl_fast.load(path, sr=None, offset=3.3, duration=1.0)
    np.testing.assert_array_equal(part, full[:, 158400:206400])


def _sine_mix(sr: int, n: int, fmax: float) -> np.ndarray:
    t = np.arange(n) / sr
    freqs = np.linspace(50.0, fmax, 12)
    return (sum(np.sin(2 * np.pi * f * t + i) for i, f in enumerate(freqs)) / 12).astype(np.float32)


RATES = [(44100, 32000), (48000, 32000), (22050, 32000), (16000, 32000), (44100, 16000)]


def _rel_db(y: np.ndarray, ref: np.ndarray, edge: int) -> float:
    n = min(len(y), len(ref))
    err = y[edge : n - edge] - ref[edge : n - edge]
    return float(
        20 * np.log10(np.sqrt(np.mean(err**2)) / np.sqrt(np.mean(ref[edge : n - edge] ** 2)))
    )


@pytest.mark.parametrize(("orig", "target"), RATES)
@pytest.mark.parametrize(("band", "bound_db"), [(0.6, -80.0), (0.85, -60.0)])
def test_resampler_matches_soxr(orig: int, target: int, band: float, bound_db: float) -> None:
    """Bound vs soxr VHQ: -80 dB re. the signal below 0.6 of the lower Nyquist
    frequency, -60 dB below 0.85 (soxr's own pass band allows 0.01 dB ripple)."""
    x = _sine_mix(orig, orig * 2, band * min(orig, target) / 2)
    ref = soxr.resample(x, orig, target, quality="VHQ")
    y = agl_fast.resample(x, orig_sr=orig, target_sr=target)
    assert abs(len(y) - len(ref)) <= 1
    db = _rel_db(y, ref, target // 20)  # both ends left out (start-up differs)
    assert db < bound_db, f"{orig}->{target}: {db:.1f} dB"


@pytest.mark.parametrize(("orig", "target"), RATES)
@pytest.mark.parametrize(
    ("res_type", "bound_db"), [("fast", -40.0), ("hq", -95.0), ("vhq", -120.0)]
)
def test_resampled_sine_matches_analytic(
    orig: int, target: int, res_type: str, bound_db: float
) -> None:
    """A sine at 0.8 of the lower Nyquist frequency (0.5 for ``fast``), against
    the same sine computed at the target rate."""
    f = (0.5 if res_type == "fast" else 0.8) * min(orig, target) / 2
    x = np.sin(2 * np.pi * f * np.arange(orig * 2) / orig)
    ideal = np.sin(2 * np.pi * f * np.arange(target * 2) / target)
    y = agl_fast.resample(x, orig_sr=orig, target_sr=target, res_type=res_type)
    assert len(y) == len(ideal)
    db = _rel_db(y.astype(np.float64), ideal, target // 20)
    assert db < bound_db, f"{res_type} {orig}->{target}: {db:.1f} dB"


def test_resampler_length_and_quality_presets() -> None:
    x = _sine_mix(44100, 44100 + 7, 12000.0)
    for q in ("fast", "hq", "vhq"):
        y = agl_fast.resample(np.stack([x, -x]), orig_sr=44100, target_sr=32000, res_type=q)
        assert y.shape == (2, int(np.ceil((44100 + 7) * 32000 / 44100)))
        np.testing.assert_array_equal(y[0], -y[1])


def test_decode_then_resample_equals_resample_of_decode(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    x = _noise(44100 * 3 + 17, 2, seed=3)
    sf.write(path, x, 44100, subtype="FLOAT")
    streamed, sr = agl_fast.load(path, sr=32000)
    whole = agl_fast.resample(x.T, orig_sr=44100, target_sr=32000)
    assert sr == 32000
    np.testing.assert_allclose(streamed, whole, atol=1e-6)


def test_bad_files_raise_with_path(tmp_path: Path) -> None:
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.mp3"
    junk.write_bytes(b"hello, this is text" * 100)
    for p in (empty, junk):
        with pytest.raises(AudioDecodeError, match=p.name):
            agl_fast.load(p)
    with pytest.raises(AudioFileNotFoundError, match=r"file not found: .*missing\.flac"):
        agl_fast.load(tmp_path / "missing.flac")
    nan = tmp_path / "nan.wav"
    sf.write(nan, np.full(1000, np.nan, np.float32), 8000, subtype="FLOAT")
    with pytest.raises(NonFiniteError, match=r"nan\.wav"):
        agl_fast.load(nan)


def test_load_many_rows_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.flac"
    x = _noise(8000, 2, seed=4)
    sf.write(good, x, 8000, subtype="PCM_16")
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF\x00\x00")
    t = agl_fast.load_many([good, bad, good], keys=["a", "b", "c"], sr=None, n_threads=2)
    assert t.column("key").to_pylist() == ["a", "b", "c"]
    assert t.column("error_type").to_pylist() == [None, "AudioDecodeError", None]
    assert t.column("channels").to_pylist() == [2, None, 2]
    first = np.asarray(t.column("samples")[0].as_py(), np.float32)
    ref, _ = sf.read(good, dtype="float32")
    np.testing.assert_array_equal(first, ref.T)
    m = agl_fast.load_many([good], mono=True, sr=16000)
    assert len(m.column("samples")[0]) == 16000
    with pytest.raises(ParameterError, match="keys"):
        agl_fast.load_many([good], keys=["a", "b"])


@pytest.mark.parametrize("mono", [False, True])
def test_load_arrays_equal_load_many_and_load(tmp_path: Path, mono: bool) -> None:
    good = tmp_path / "good.flac"
    sf.write(good, _noise(9000, 2, seed=5), 44100, subtype="PCM_24")
    other = tmp_path / "other.wav"
    sf.write(other, _noise(5000, 1, seed=6), 22050, subtype="FLOAT")
    bad = tmp_path / "bad.mp3"
    bad.write_bytes(b"ID3\x03\x00" + bytes(64))
    paths = [good, bad, other]
    arrays, meta = agl_fast.load_arrays(paths, keys=["a", "b", "c"], mono=mono, n_threads=2)
    t = agl_fast.load_many(paths, keys=["a", "b", "c"], mono=mono, n_threads=2)
    levels = ["peak", "rms", "clipped_fraction", "peak_fraction"]
    assert meta.drop_columns(levels).equals(t.drop_columns(["samples"]))
    assert arrays[1] is None and meta.column("error_type")[1].as_py() == "AudioDecodeError"
    assert [meta.column(c)[1].as_py() for c in levels] == [None] * 4
    for i in (0, 2):
        a = arrays[i]
        assert a is not None and a.dtype == np.float32 and a.flags.c_contiguous
        assert a.shape == (meta.column("channels")[i].as_py(), meta.column("frames")[i].as_py())
        # The decoder's levels: over every sample of every channel.
        v = a.astype(np.float64).ravel()
        peak = np.abs(v).max()
        want = [
            peak,
            np.sqrt(np.mean(v**2)),
            np.mean(np.abs(a.ravel()) >= 0.999),
            np.mean(np.abs(v) == peak),
        ]
        got = [meta.column(c)[i].as_py() for c in levels]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        row = np.asarray(t.column("samples")[i].as_py(), np.float32)
        np.testing.assert_array_equal(a, row.reshape(a.shape))
        y, _ = agl_fast.load(paths[i], mono=mono)
        np.testing.assert_array_equal(a, y.reshape(a.shape))


def _ffmpeg_decode(path: Path) -> np.ndarray:
    raw = subprocess.run(
        [
            FFMPEG or "ffmpeg",
            "-v",
            "error",
            "-i",
            str(path),
            "-f",
            "f32le",
            "-acodec",
            "pcm_f32le",
            "-",
        ],
        capture_output=True,
        check=True,
    ).stdout
    return np.frombuffer(raw, np.float32)


@needs_ffmpeg
@pytest.mark.skipif(not MP3S, reason="../shared/agl1k is not available")
@pytest.mark.parametrize("path", MP3S, ids=lambda p: p.name)
def test_real_mp3_matches_ffmpeg(path: Path) -> None:
    y, sr = agl_fast.load(path, sr=None)
    assert sr == 44100
    ref = _ffmpeg_decode(path).reshape(-1, 2).T
    assert y.shape == ref.shape  # gapless trimming: same sample count
    # Both decoders are float implementations of the same standard.
    assert np.max(np.abs(y - ref)) < 1e-4
    part, _ = agl_fast.load(path, sr=None, offset=60.0, duration=2.0)
    assert np.max(np.abs(part - ref[:, 60 * 44100 : 62 * 44100])) < 1e-4


@needs_ffmpeg
@pytest.mark.parametrize("codec", ["libmp3lame", "flac", "libvorbis", "aac"])
def test_ffmpeg_encoded_files(tmp_path: Path, codec: str) -> None:
    src = tmp_path / "src.wav"
    t = np.arange(22050 * 2 + 333) / 22050
    x = (0.3 * np.sin(2 * np.pi * (200 * t + 1500 * t**2))).astype(np.float32)  # chirp
    sf.write(src, np.stack([x, 0.5 * x], axis=1), 22050, subtype="PCM_16")
    ext = {"libmp3lame": "mp3", "flac": "flac", "libvorbis": "ogg", "aac": "m4a"}[codec]
    out = tmp_path / f"enc.{ext}"
    res = subprocess.run(
        [FFMPEG or "ffmpeg", "-v", "error", "-y", "-i", str(src), "-c:a", codec, str(out)],
        capture_output=True,
    )
    if res.returncode != 0:
        pytest.skip(f"this ffmpeg has no {codec} encoder")
    y, sr = agl_fast.load(out, sr=None)
    ref = _ffmpeg_decode(out).reshape(-1, 2).T
    assert sr == 22050
    # Gapless MP3, FLAC and Vorbis, and AAC with the MP4 edit list's
    # priming trimmed: the same length as ffmpeg's decode.
    assert y.shape == ref.shape
    assert np.max(np.abs(y - ref)) < 1e-4
    # Decoding the same bytes from memory gives the same result.
    data = out.read_bytes()
    for src_mem in (data, bytearray(data), memoryview(data), io.BytesIO(data)):
        ym, srm = agl_fast.load(src_mem, sr=None)
        assert srm == sr
        np.testing.assert_array_equal(ym, y)
    ym, _ = agl_fast.load(data, sr=None, format=ext)
    np.testing.assert_array_equal(ym, y)


def _chirp_wav(path: Path, sr: int, seconds: float) -> None:
    t = np.arange(int(sr * seconds)) / sr
    x = (0.4 * np.sin(2 * np.pi * (150 * t + 700 * t**2))).astype(np.float32)
    sf.write(path, np.stack([x, -0.6 * x], axis=1), sr, subtype="PCM_16")


def _encode(src: Path, out: Path, args: list[str]) -> Path:
    res = subprocess.run(
        [FFMPEG or "ffmpeg", "-v", "error", "-y", "-i", str(src), "-c:a", "libmp3lame", *args],
        capture_output=True,
    )
    if res.returncode != 0:
        pytest.skip("this ffmpeg has no libmp3lame encoder")
    return out


@needs_ffmpeg
@pytest.mark.parametrize(
    ("args", "sr", "ch"),
    [
        (["-b:a", "128k"], 44100, 2),  # CBR, LAME Info tag
        (["-q:a", "4"], 44100, 2),  # VBR, Xing tag
        (["-b:a", "48k", "-ac", "1", "-ar", "22050"], 22050, 1),  # MPEG-2 mono
        (["-b:a", "128k", "-ar", "48000"], 48000, 2),
        (["-b:a", "128k", "-write_xing", "0"], 44100, 2),  # no tag: nothing to trim
    ],
    ids=["cbr", "vbr", "mpeg2-mono", "48k", "no-tag"],
)
def test_mp3_encodings_match_ffmpeg(tmp_path: Path, args: list[str], sr: int, ch: int) -> None:
    src = tmp_path / "src.wav"
    _chirp_wav(src, 44100, 3.3)
    out = _encode(src, tmp_path / "x.mp3", [*args, str(tmp_path / "x.mp3")])
    ref = _ffmpeg_decode(out).reshape(-1, ch).T
    y, got_sr = agl_fast.load(out, sr=None)
    assert got_sr == sr
    y2 = np.atleast_2d(y)
    assert y2.shape == ref.shape  # gapless trimming as ffmpeg does it
    assert np.max(np.abs(y2 - ref)) < 1e-4


@pytest.mark.skipif(shutil.which("lame") is None, reason="lame is not installed")
@needs_ffmpeg
@pytest.mark.parametrize("args", [["-V2"], ["--abr", "96"], ["-b", "320"]])
def test_lame_files_match_ffmpeg(tmp_path: Path, args: list[str]) -> None:
    src = tmp_path / "src.wav"
    _chirp_wav(src, 44100, 2.7)
    out = tmp_path / "lame.mp3"
    subprocess.run(["lame", "--quiet", *args, str(src), str(out)], check=True)
    ref = _ffmpeg_decode(out).reshape(-1, 2).T
    y, _ = agl_fast.load(out, sr=None)
    assert y.shape == ref.shape
    assert np.max(np.abs(y - ref)) < 1e-4


@needs_ffmpeg
def test_mp3_window_channels_and_resampling(tmp_path: Path) -> None:
    src = tmp_path / "src.wav"
    _chirp_wav(src, 44100, 6.0)
    out = _encode(src, tmp_path / "x.mp3", ["-b:a", "160k", str(tmp_path / "x.mp3")])
    full, _ = agl_fast.load(out, sr=None)
    # Sample-accurate seek: the frames before the target are decoded again
    # for the bit reservoir, so the samples agree with the full decode.
    for offset, duration in [(0.0, 0.5), (2.5, 1.0), (0.013, 0.2), (5.9, 1.0)]:
        part, _ = agl_fast.load(out, sr=None, offset=offset, duration=duration)
        a = round(offset * 44100)
        want = full[:, a : a + round(duration * 44100)]
        assert part.shape == want.shape
        assert np.max(np.abs(part - want)) < 1e-4
    mono, _ = agl_fast.load(out, sr=None, mono=True)
    np.testing.assert_allclose(mono, full.mean(axis=0), atol=1e-7)
    right, _ = agl_fast.load(out, sr=None, channel=1)
    np.testing.assert_array_equal(right, full[1])
    t = agl_fast.load_many([out, out], sr=None, max_duration=1.5, n_threads=2)
    assert t.column("truncated").to_pylist() == [True, True]
    assert t.column("frames").to_pylist() == [66150, 66150]
    # Streaming resampling equals resampling the whole decode.
    y32, sr = agl_fast.load(out, sr=32000)
    assert sr == 32000
    np.testing.assert_allclose(
        y32, agl_fast.resample(full, orig_sr=44100, target_sr=32000), atol=1e-6
    )
    with pytest.raises(ParameterError, match="channel"):
        agl_fast.load(out, channel=2)


@needs_ffmpeg
def test_damaged_and_misnamed_mp3(tmp_path: Path) -> None:
    src = tmp_path / "src.wav"
    _chirp_wav(src, 44100, 4.0)
    good = _encode(src, tmp_path / "x.mp3", ["-b:a", "128k", str(tmp_path / "x.mp3")])
    full, _ = agl_fast.load(good, sr=None)
    data = good.read_bytes()
    # Cut short (mid-frame, shorter than its tag says): the frames before
    # the cut, as in the full decode.
    cut = tmp_path / "cut.mp3"
    cut.write_bytes(data[: len(data) // 2 + 77])
    y, _ = agl_fast.load(cut, sr=None)
    assert 0.4 * full.shape[1] < y.shape[1] < 0.6 * full.shape[1]
    assert np.max(np.abs(y - full[:, : y.shape[1]])) < 1e-4
    # Garbage in the middle: the damaged frames are skipped, the rest decodes.
    rng = np.random.default_rng(5)
    bad = bytearray(data)
    bad[len(data) // 2 : len(data) // 2 + 3000] = rng.integers(0, 256, 3000, np.uint8).tobytes()
    hurt = tmp_path / "hurt.mp3"
    hurt.write_bytes(bytes(bad))
    y, _ = agl_fast.load(hurt, sr=None)
    assert 0.8 * full.shape[1] < y.shape[1] <= full.shape[1]
    assert np.all(np.isfinite(y))
    # Too short to hold a frame, random bytes, an empty file: typed errors.
    for name, payload in [
        ("stub.mp3", data[:300]),
        ("noise.mp3", rng.integers(0, 256, 50_000, np.uint8).tobytes()),
        ("empty.mp3", b""),
    ]:
        p = tmp_path / name
        p.write_bytes(payload)
        with pytest.raises(AudioDecodeError, match=name):
            agl_fast.load(p)
    # Another format behind an .mp3 name is probed and decoded as what it is.
    wav_named = tmp_path / "really_wav.mp3"
    x = _noise(3000, 2, seed=6)
    sf.write(wav_named, x, 16000, format="WAV", subtype="FLOAT")
    y, _ = agl_fast.load(wav_named, sr=None)
    np.testing.assert_array_equal(y, x.T)
    # And an MP3 behind another name goes through the general decoder.
    renamed = tmp_path / "x.bin"
    renamed.write_bytes(data)
    y, _ = agl_fast.load(renamed, sr=None)
    assert y.shape == full.shape
    assert np.max(np.abs(y - full)) < 1e-4
