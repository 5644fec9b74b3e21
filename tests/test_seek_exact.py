"""Sample-exact ``offset``/``duration`` for every format (see
``docs/robustness.md``, "Seeking").

``load(path, sr=None, offset=a / sr, duration=n / sr)`` must be frames
``[a, a + n)`` of the same file's full decode: random windows, windows on and
beside packet and Ogg page boundaries, at the pre-roll thresholds, at the end
of the stream and past it. The files are encoded here by ffmpeg from a
signal with tones, a chirp, noise bursts and silence.

Tolerances, by format (the largest difference from the full decode's slice):

* WAV, AIFF, AIFF-C, FLAC: 0 (bit for bit);
* MP3, Ogg Vorbis (also one whose granule positions start at 10 s), AAC
  in M4A, Vorbis and FLAC in Matroska/WebM: 0 (MP3 and Vorbis decode the
  frames the target needs from a pre-roll, so the output is the same; AAC
  and Matroska Vorbis/FLAC are decoded from the start);
* Ogg Opus, WebM Opus: ``OPUS_TOL`` (after the 400 ms pre-roll the decoder
  lands within one or two steps of its 16-bit output, 3.1e-5 each, of the
  decode from the start; the full decode's own distance to libopus is about
  3.6e-5).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import agl_fast
from agl_fast.compat import librosa as compat

FFMPEG = shutil.which("ffmpeg")
pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")

SECONDS = 2.5
SR = 44100
OPUS_TOL = 1e-4

# name -> (extension, ffmpeg output arguments, tolerance)
FORMATS: dict[str, tuple[str, list[str], float]] = {
    "wav": ("wav", ["-c:a", "pcm_s16le"], 0.0),
    "aiff": ("aiff", ["-c:a", "pcm_s16be"], 0.0),
    "aifc": ("aifc", ["-c:a", "pcm_f32be", "-f", "aiff"], 0.0),
    "flac": ("flac", ["-c:a", "flac"], 0.0),
    "mp3": ("mp3", ["-c:a", "libmp3lame", "-b:a", "128k"], 0.0),
    "ogg_vorbis": ("ogg", ["-c:a", "libvorbis", "-q:a", "4"], 0.0),
    # an Ogg stream cut from a longer one: its granule positions start at 10 s
    "ogg_vorbis_cut": ("ogg", ["-c:a", "libvorbis", "-output_ts_offset", "10"], 0.0),
    "ogg_opus": ("opus", ["-c:a", "libopus", "-b:a", "96k", "-ar", "48000"], OPUS_TOL),
    "webm_opus": ("webm", ["-c:a", "libopus", "-b:a", "64k", "-ar", "48000"], OPUS_TOL),
    "webm_vorbis": ("webm", ["-c:a", "libvorbis", "-q:a", "3"], 0.0),
    "mka_vorbis": ("mka", ["-c:a", "libvorbis"], 0.0),
    "mka_flac": ("mka", ["-c:a", "flac"], 0.0),
    "m4a": ("m4a", ["-c:a", "aac", "-b:a", "128k"], 0.0),
}


def _signal() -> np.ndarray:
    """``[n, 2]`` float32: a tone pair, a chirp, decaying noise bursts and
    a stretch of silence, the channels different."""
    t = np.arange(int(SECONDS * SR)) / SR
    rng = np.random.default_rng(46)
    x = 0.25 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 3150 * t)
    x += 0.2 * np.sin(2 * np.pi * (150 + 900 * t) * t)
    x += 0.15 * rng.standard_normal(t.size) * np.exp(-8 * (t % 0.5))
    x[(t > 1.2) & (t < 1.35)] = 0.0
    right = 0.7 * np.roll(x, 37) + 0.05 * np.sin(2 * np.pi * 97 * t)
    return np.stack([x, right], axis=1).astype(np.float32)


def _encode(tmp: Path, name: str) -> Path:
    src = tmp / "source.wav"
    if not src.exists():
        import soundfile as sf

        sf.write(src, _signal(), SR, subtype="PCM_24")
    ext, args, _ = FORMATS[name]
    out = tmp / f"{name}.{ext}"
    cmd = [FFMPEG or "ffmpeg", "-v", "error", "-y", "-i", str(src), *args, str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def _packet_starts(path: Path, sr: int) -> list[int]:
    """Where ffmpeg's packets start, in frames of the decoded timeline
    (within a frame or two: Matroska stamps are rounded to milliseconds)."""
    res = subprocess.run(
        [FFMPEG or "ffmpeg", "-hide_banner", "-i", str(path), "-map", "0:a", "-c", "copy",
         "-f", "framecrc", "-"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    starts = []
    tb = None
    for line in res.stdout.splitlines():
        if line.startswith("#tb 0:"):
            num, den = line.split(":", 1)[1].strip().split("/")
            tb = int(num) / int(den)
        elif tb and line[:1].isdigit():
            pts = int(line.split(",")[2])
            starts.append(round(pts * tb * sr))
    return starts


def _page_ends(data: bytes, pre_skip: int) -> list[int]:
    """The granule positions of an Ogg stream's pages, less the pre-skip:
    the frames each page's packets end at."""
    out, at = [], data.find(b"OggS")
    while at >= 0:
        (granule,) = struct.unpack_from("<q", data, at + 6)
        if granule > 0:
            out.append(granule - pre_skip)
        at = data.find(b"OggS", at + 27)
    return out


def _windows(name: str, path: Path, n_frames: int, sr: int) -> list[tuple[int, int]]:
    """``(start, length)`` pairs: boundaries and their neighbours, the
    pre-roll thresholds, the stream's end, and random ones."""
    rng = np.random.default_rng(sum(map(ord, name)))
    edges = _packet_starts(path, sr)
    data = path.read_bytes()
    if data.startswith(b"OggS"):
        pre_skip = struct.unpack_from("<H", data, data.find(b"OpusHead") + 10)[0]
        edges += _page_ends(data, pre_skip if b"OpusHead" in data[:200] else 0)
    edges = sorted({e for e in edges if 0 < e < n_frames})
    # fewer for Opus, whose decoder is the slowest
    k = 4 if "opus" in name else 8
    picked = [edges[i] for i in rng.choice(len(edges), size=min(k, len(edges)), replace=False)]
    starts = {0, 1}
    for e in picked:
        starts.update((e - 1, e, e + 1))
    # on and beside the pre-roll thresholds (Vorbis, Opus, MP3 in symphonia)
    starts.update((8_192, 8_193, 8_194, 24_960, 24_961, 24_962, 10_368, 10_369))
    starts.update(int(s) for s in rng.integers(0, n_frames, k))
    out = [(s, int(rng.integers(1, sr // 2))) for s in sorted(starts) if s < n_frames]
    # a window ending on a boundary, the last frames, past the end, none
    out += [(picked[0] - 500, 500), (n_frames - 700, 700), (n_frames - 300, 5_000)]
    out += [(n_frames // 2, 0), (n_frames + 10, 100)]
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("seek")
    return {name: _encode(tmp, name) for name in FORMATS}


@pytest.mark.parametrize("name", list(FORMATS))
def test_window_is_the_full_decodes_slice(files: dict[str, Path], name: str) -> None:
    path, tol = files[name], FORMATS[name][2]
    full, sr = agl_fast.load(path, sr=None, mono=False)
    assert full.shape[0] == 2 and full.shape[1] > SECONDS * sr * 0.99
    failures = []
    for start, n in _windows(name, path, full.shape[1], sr):
        y, _ = agl_fast.load(path, sr=None, mono=False, offset=start / sr, duration=n / sr)
        want = full[:, start : start + n]
        if y.shape != want.shape:
            failures.append(f"[{start}, +{n}): {y.shape[1]} frames, want {want.shape[1]}")
        elif want.size and (err := float(np.abs(y - want).max())) > tol:
            failures.append(f"[{start}, +{n}): max error {err:.2e} > {tol:.0e}")
    assert not failures, f"{name}: " + "; ".join(failures)


@pytest.mark.parametrize("name", ["ogg_vorbis", "ogg_opus", "webm_opus", "m4a"])
def test_float_offsets_and_open_ends(files: dict[str, Path], name: str) -> None:
    """An offset between frames starts at ``round(offset * sr)`` and a
    duration reads ``round(duration * sr)`` frames; without a duration the
    read goes to the end of the full decode (its end trimming included)."""
    path, tol = files[name], FORMATS[name][2]
    full, sr = agl_fast.load(path, sr=None, mono=False)
    rng = np.random.default_rng(7)
    for offset in rng.uniform(0.0, SECONDS, 4):
        a = round(offset * sr)
        y, _ = agl_fast.load(path, sr=None, mono=False, offset=offset, duration=0.2371)
        want = full[:, a : a + round(0.2371 * sr)]
        assert y.shape == want.shape and np.abs(y - want).max() <= tol, (offset, y.shape)
        y, _ = agl_fast.load(path, sr=None, mono=False, offset=offset)
        assert y.shape == full[:, a:].shape and np.abs(y - full[:, a:]).max() <= tol, offset


@pytest.mark.parametrize("name", ["wav", "flac", "mp3"])
def test_compat_loader_windows(files: dict[str, Path], name: str) -> None:
    """The drop-in (``sr=None``; mono by default) reads the same windows, on
    the containers it decodes natively (it hands Ogg, Matroska and MP4 to
    librosa: ``compat.librosa.NATIVE_EXTENSIONS``)."""
    assert str(files[name]).endswith(compat.NATIVE_EXTENSIONS)
    path, tol = files[name], FORMATS[name][2]
    full, sr = compat.load(path, sr=None)
    assert full.ndim == 1
    for start, n in [(2_048, 44_100), (30_001, 4_410), (int(sr) - 3, 777)]:
        y, _ = compat.load(path, sr=None, offset=start / sr, duration=n / sr)
        want = full[start : start + n]
        assert y.shape == want.shape and np.abs(y - want).max() <= tol, (start, n)


def test_ogg_vorbis_window_of_the_issue(files: dict[str, Path]) -> None:
    """``load(ogg, offset=2048/44100, duration=1)``: 44,100 frames from
    frame 2,048."""
    path = files["ogg_vorbis"]
    full, sr = agl_fast.load(path, sr=None, mono=True)
    y, _ = agl_fast.load(path, sr=None, mono=True, offset=2048 / 44100, duration=1)
    assert sr == 44100 and y.shape == (44100,)
    np.testing.assert_array_equal(y, full[2048 : 2048 + 44100])


@pytest.mark.parametrize("name", ["ogg_opus", "webm_opus"])
def test_full_opus_decode_matches_libopus(files: dict[str, Path], name: str) -> None:
    """The full decode drops the pre-skip at the start and the end padding
    (Ogg granule position, Matroska DiscardPadding) as libopus through
    ffmpeg does: same length, within ``OPUS_TOL``."""
    path = files[name]
    y, sr = agl_fast.load(path, sr=None, mono=False)
    cmd = [FFMPEG or "ffmpeg", "-v", "error", "-c:a", "libopus", "-i", str(path)]
    raw = subprocess.run([*cmd, "-f", "f32le", "-"], capture_output=True, check=True).stdout
    ref = np.frombuffer(raw, np.float32).reshape(-1, 2).T
    assert sr == 48000 and y.shape == ref.shape == (2, round(SECONDS * 48000))
    # Aligned to the frame: a shift of one would put most samples far off.
    # (The Opus decoder itself can stray on a few samples of a transient.)
    assert np.quantile(np.abs(y - ref).max(0), 0.999) <= OPUS_TOL
    if name == "ogg_opus":
        import soundfile as sf

        s, _ = sf.read(path, dtype="float32", always_2d=True)
        assert s.T.shape == y.shape
        assert np.quantile(np.abs(s.T - y).max(0), 0.999) <= OPUS_TOL
