"""Hostile files and parameters: a typed error or a valid decode, never a dead process.

Each case runs in a child process with a 4 GiB address-space cap and a 20 s
limit: the child must exit normally, with the call either returning or
raising an ``agl_fast.exceptions`` error.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import agl_fast
from agl_fast.exceptions import AudioDecodeError, ParameterError, ResourceLimitError

FFMPEG = shutil.which("ffmpeg")
needs_ffmpeg = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")

CAP_BYTES = 4 << 30
TIME_LIMIT = 20.0


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def run_child(code: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """Run ``code`` (which sets ``result``) in a capped child; return what it reported."""
    prog = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        import agl_fast
        from agl_fast import exceptions
        try:
        {body}
            out = {{"outcome": "ok", "result": repr(result)}}
        except exceptions.AglError as e:
            out = {{"outcome": "error", "type": type(e).__name__, "message": str(e)}}
        except BaseException as e:
            out = {{"outcome": "foreign", "type": type(e).__name__, "message": str(e)}}
        print(json.dumps(out))
        """
    ).format(body=textwrap.indent(textwrap.dedent(code), "    "))
    proc = subprocess.run(
        [sys.executable, "-c", prog],
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT,
        preexec_fn=_cap,
        env=env,
    )
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-2000:]}"
    out: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["outcome"] != "foreign", out
    return out


def wav_bytes(
    sr: int, ch: int = 1, frames: int = 1000, riff: int | None = None, data_size: int | None = None
) -> bytes:
    """A 16-bit PCM WAV whose header fields can be set to anything."""
    pcm = (np.sin(np.arange(frames * ch) * 0.05) * 12000).astype("<i2").tobytes()
    n = len(pcm) if data_size is None else data_size
    fmt = struct.pack("<HHIIHH", 1, ch, sr & 0xFFFFFFFF, (sr * ch * 2) & 0xFFFFFFFF, ch * 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", n) + pcm
    size = len(body) if riff is None else riff
    return b"RIFF" + struct.pack("<I", size) + body


def _ogg_crc(page: bytes) -> int:
    crc = 0
    for byte in page:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
            crc &= 0xFFFFFFFF
    return crc


def ogg_with_rate(path: Path, rate: int) -> Path:
    """An Ogg Vorbis file whose identification header claims ``rate`` Hz
    (page checksum recomputed, so only the field is wrong)."""
    x = (0.3 * np.sin(np.arange(16000) * 0.05)).astype(np.float32)
    sf.write(path, x, 16000, format="OGG", subtype="VORBIS")
    data = bytearray(path.read_bytes())
    at = data.index(b"\x01vorbis") + 7 + 4 + 1  # version, channels
    data[at : at + 4] = struct.pack("<I", rate)
    # The first page holds the identification header alone.
    n_seg = data[26]
    page_len = 27 + n_seg + sum(data[27 : 27 + n_seg])
    data[22:26] = b"\0\0\0\0"
    data[22:26] = struct.pack("<I", _ogg_crc(bytes(data[:page_len])))
    path.write_bytes(bytes(data))
    return path


def m4a_with_count(src: Path, out: Path, box: bytes) -> Path:
    """An ffmpeg-encoded M4A whose ``box`` table claims 2**32 - 1 entries."""
    data = bytearray(src.read_bytes())
    at = data.index(box) + 4  # after the type: version/flags, then the count
    count_at = at + (8 if box == b"stsz" else 4)
    data[count_at : count_at + 4] = b"\xff\xff\xff\xff"
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("rate", [2**31 - 1, 2**32 - 1])
@pytest.mark.parametrize("sr", [32000, None])
def test_wav_with_an_absurd_rate(tmp_path: Path, rate: int, sr: int | None) -> None:
    p = tmp_path / "rate.wav"
    p.write_bytes(wav_bytes(rate))
    out = run_child(f"result = agl_fast.load({str(p)!r}, sr={sr!r})")
    assert out["type"] == "AudioDecodeError", out
    assert f"sample_rate={rate}" in out["message"]


def test_ogg_with_an_absurd_rate(tmp_path: Path) -> None:
    p = ogg_with_rate(tmp_path / "rate.ogg", 2**31 - 1)
    out = run_child(f"result = agl_fast.load({str(p)!r})")
    assert out["type"] == "AudioDecodeError", out
    assert str(2**31 - 1) in out["message"]


@needs_ffmpeg
@pytest.mark.parametrize("box", [b"stsz", b"stsc", b"stts", b"stco"])
def test_m4a_with_a_huge_sample_table_count(tmp_path: Path, box: bytes) -> None:
    src = tmp_path / "src.wav"
    sf.write(src, (0.2 * np.sin(np.arange(22050) * 0.03)).astype(np.float32), 22050)
    enc = tmp_path / "enc.m4a"
    res = subprocess.run(
        [FFMPEG or "ffmpeg", "-v", "error", "-y", "-i", str(src), "-c:a", "aac", str(enc)],
        capture_output=True,
    )
    if res.returncode != 0:
        pytest.skip("this ffmpeg has no aac encoder")
    assert len(enc.read_bytes()) < 64_000
    bad = m4a_with_count(enc, tmp_path / f"bad-{box.decode()}.m4a", box)
    out = run_child(f"result = agl_fast.load({str(bad)!r})")
    assert out["type"] == "AudioDecodeError", out
    assert "4294967295 entries" in out["message"]
    assert box.decode() in out["message"]


def test_one_hertz_wav_and_huge_target_rates(tmp_path: Path) -> None:
    p = tmp_path / "one-hz.wav"
    p.write_bytes(wav_bytes(1, frames=10_000))  # 20 kB
    out = run_child(f"result = agl_fast.load({str(p)!r})")
    assert out["type"] == "AudioDecodeError", out
    assert "factor of at most 1024" in out["message"]
    # Kept at its own rate it is just 10,000 samples.
    y, sr = agl_fast.load(p, sr=None)
    assert (sr, y.shape) == (1, (10_000,))
    good = tmp_path / "good.wav"
    good.write_bytes(wav_bytes(16000))
    for bad_sr in (2**31 - 1, 0, -1, 2**64, 1.5, True):
        with pytest.raises(ParameterError, match="sr"):
            agl_fast.load(good, sr=bad_sr)
    with pytest.raises(ParameterError, match="orig_sr"):
        agl_fast.resample(np.zeros(10, np.float32), orig_sr=2**31 - 1, target_sr=1)
    with pytest.raises(ParameterError, match="factor"):
        agl_fast.resample(np.zeros(10, np.float32), orig_sr=1_000_000, target_sr=100)


def test_a_bad_rate_never_costs_the_batch(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.wav", tmp_path / "bad.wav"
    good.write_bytes(wav_bytes(16000, ch=2))
    bad.write_bytes(wav_bytes(2**32 - 1))
    t = agl_fast.load_many([good, bad], sr=None)
    assert t.num_rows == 2
    for name in ("sr", "channels", "frames", "source_sr", "source_channels", "corrupt_frames"):
        assert t.schema.field(name).type == "int64", name
    rows = t.to_pylist()
    assert rows[0]["error_type"] is None and rows[0]["sr"] == 16000 and rows[0]["frames"] == 1000
    assert rows[1]["error_type"] == "AudioDecodeError"
    assert "sample_rate=4294967295" in rows[1]["error_message"]


def test_a_single_path_is_not_a_sequence_of_paths(tmp_path: Path) -> None:
    p = tmp_path / "one.wav"
    p.write_bytes(wav_bytes(16000))
    for wrong in (str(p), p, p.read_bytes()):
        with pytest.raises(ParameterError, match="wrap it in a list"):
            agl_fast.load_many(wrong)  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [0, -1, 17 * os.cpu_count(), 100_000, 2**62, 2**64, 2.0, True])
def test_thread_counts_are_validated(n: object) -> None:
    y = np.zeros((2, 4000), np.float32)
    with pytest.raises(ParameterError, match="n_threads"):
        agl_fast.melspectrogram(y, sr=16000, n_threads=n)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="n_threads"):
        agl_fast.set_num_threads(n)  # type: ignore[arg-type]
    assert agl_fast.get_num_threads() >= 1


@pytest.mark.parametrize("value", ["100000", "0", "many", "-3"])
def test_thread_environment_variable_is_validated(value: str) -> None:
    env = dict(os.environ, AGL_FAST_NUM_THREADS=value)
    out = run_child(
        "result = agl_fast.melspectrogram(np.zeros((4, 40000), np.float32), sr=16000)", env=env
    )
    assert out["type"] == "ParameterError", out
    assert "AGL_FAST_NUM_THREADS" in out["message"]


def test_scheduler_thread_variables_set_the_default() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("NUM_THREADS")}
    for var, want in (("RAYON_NUM_THREADS", "3"), ("OMP_NUM_THREADS", "2")):
        out = run_child("result = agl_fast.get_num_threads()", env={**env, var: want})
        assert out["result"] == want, (var, out)
    both = {**env, "AGL_FAST_NUM_THREADS": "1", "RAYON_NUM_THREADS": "3"}
    assert run_child("result = agl_fast.get_num_threads()", env=both)["result"] == "1"


def test_fftconvolve_too_large_for_memory_is_a_memory_error() -> None:
    # 64 sources of 2**22 samples through one 8-channel IR: a 8.6 GB output,
    # above the child's 4 GiB cap; the inputs themselves take 1 GB.
    out = run_child(
        """
        x = np.ones((64, 2**22), np.float32)
        h = np.ones((8, 2048), np.float32) * 1e-3
        result = agl_fast.fftconvolve(x, h).shape
        """
    )
    assert out["type"] == "ResourceLimitError", out
    assert "bytes" in out["message"]
    assert issubclass(ResourceLimitError, MemoryError)


def test_feature_output_too_large_for_memory_is_a_memory_error() -> None:
    # 2**20 samples, hop 1, n_fft 4096: a 8.6 GB spectrogram, above the
    # child's 4 GiB cap, for both frame engines (block FFT and per-frame).
    for n_fft in (4096, 4000):
        out = run_child(
            f"""
            x = np.ones(2**20, np.float32)
            result = agl_fast.spectrogram(x, n_fft={n_fft}, hop_length=1).shape
            """
        )
        assert out["type"] == "ResourceLimitError", (n_fft, out)
        assert "feature output" in out["message"]


def test_wav_with_zero_riff_and_data_sizes(tmp_path: Path) -> None:
    """What a recorder that died leaves: the samples are there, the sizes are 0."""
    whole = wav_bytes(16000, ch=2, frames=5000)
    ref, ref_sr = agl_fast.load(whole, sr=None)
    for riff, size in ((0, 0), (0xFFFFFFFF, 0xFFFFFFFF), (36, 0), (0, 10**9)):
        bad = wav_bytes(16000, ch=2, frames=5000, riff=riff, data_size=size)
        p = tmp_path / f"zero-{riff}-{size}.wav"
        p.write_bytes(bad)
        y, sr = agl_fast.load(p, sr=None)
        assert sr == ref_sr
        np.testing.assert_array_equal(y, ref)
        if FFMPEG:
            raw = subprocess.run(
                [FFMPEG, "-v", "error", "-i", str(p), "-f", "s16le", "-"],
                capture_output=True,
                check=True,
            ).stdout
            assert len(raw) // 4 == y.shape[1]


@needs_ffmpeg
def test_damaged_mp3_frames_stay_in_range(tmp_path: Path) -> None:
    src = tmp_path / "src.wav"
    t = np.arange(44100 * 4) / 44100
    x = 0.5 * np.sin(2 * np.pi * (300 * t + 400 * t**2))
    sf.write(src, np.stack([x, -x], axis=1).astype(np.float32), 44100)
    mp3 = tmp_path / "src.mp3"
    res = subprocess.run(
        [FFMPEG or "ffmpeg", "-v", "error", "-y", "-i", str(src), "-c:a", "libmp3lame", str(mp3)],
        capture_output=True,
    )
    if res.returncode != 0:
        pytest.skip("this ffmpeg has no libmp3lame encoder")
    data = mp3.read_bytes()
    rng = np.random.default_rng(7)
    corrupt_total = 0
    for case in range(40):
        d = bytearray(data)
        # Overwrite bytes inside the frames (past the tag), where the global
        # gain and the scale factors live.
        for at in rng.integers(2000, len(d) - 100, size=60):
            d[at] = int(rng.integers(0, 256))
        t_many = agl_fast.load_many([bytes(d)], sr=None, formats=["mp3"])
        row = t_many.to_pylist()[0]
        if row["error_type"] is not None:
            assert row["error_type"] == "AudioDecodeError", row
            continue
        y = np.asarray(row["samples"], np.float32)
        assert np.all(np.isfinite(y)), case
        assert np.max(np.abs(y)) <= agl_fast.audio.CORRUPT_LEVEL, case
        corrupt_total += row["corrupt_frames"]
    assert corrupt_total > 0  # the damage really produced out-of-range frames


def test_in_memory_sources_equal_files(tmp_path: Path) -> None:
    import io

    paths = []
    for fmt, ext in (("WAV", "wav"), ("FLAC", "flac"), ("OGG", "ogg")):
        p = tmp_path / f"clip.{ext}"
        x = (0.3 * np.sin(np.arange(2 * 24000) * 0.01)).reshape(-1, 2).astype(np.float32)
        sf.write(p, x, 24000, format=fmt)
        paths.append(p)
    from_disk = agl_fast.load_many(paths, sr=16000)
    mem = [p.read_bytes() for p in paths]
    sources = [mem[0], io.BytesIO(mem[1]), memoryview(mem[2])]
    from_mem = agl_fast.load_many(sources, sr=16000, keys=[str(p) for p in paths])
    assert from_mem.column("samples").to_pylist() == from_disk.column("samples").to_pylist()
    assert from_mem.column("path").null_count == 3
    arrays, _ = agl_fast.load_arrays(mem, sr=None)
    for a, p in zip(arrays, paths, strict=True):
        y, _ = agl_fast.load(p, sr=None)
        assert a is not None
        np.testing.assert_array_equal(a, y)
    with pytest.raises(ParameterError, match="binary mode"):
        agl_fast.load(io.StringIO("text"))
    with pytest.raises(ParameterError, match="path, bytes or a binary file-like"):
        agl_fast.load(12345)  # type: ignore[arg-type]
    with pytest.raises(AudioDecodeError, match="in-memory file"):
        agl_fast.load(b"not audio at all")
    for empty in (b"", bytearray(), io.BytesIO()):
        with pytest.raises(AudioDecodeError, match="0 bytes"):
            agl_fast.load(empty)
    with pytest.raises(ParameterError, match="format"):
        agl_fast.load(mem[0], format=123)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"formats\[1\]"):
        agl_fast.load_many(mem[:2], formats=["wav", 3])  # type: ignore[list-item]
    assert agl_fast.load_many([]).num_rows == 0
