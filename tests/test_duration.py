"""``audio.duration`` (and ``compat.librosa.get_duration(path=...)``) read
the length from the header, as libsndfile (librosa's reader) does, and
decode, counted and logged, only where the header does not state it."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from agl_fast import audio
from agl_fast.exceptions import AudioDecodeError, AudioFileNotFoundError

SR = 22050


def _write(path: Path, n: int, channels: int, fmt: str, subtype: str | None) -> Path:
    rng = np.random.default_rng(n)
    y = 0.1 * rng.standard_normal((n, channels))
    sf.write(path, y, SR, format=fmt, subtype=subtype)
    return path


CASES = [
    ("a.wav", "WAV", "PCM_16", 1),
    ("b.wav", "WAV", "PCM_24", 2),
    ("c.wav", "WAV", "FLOAT", 6),
    ("d.flac", "FLAC", "PCM_16", 2),
    ("e.ogg", "OGG", "VORBIS", 1),
    ("f.ogg", "OGG", "VORBIS", 2),
    ("g.mp3", "MP3", "MPEG_LAYER_III", 1),
    ("h.mp3", "MP3", "MPEG_LAYER_III", 2),
]


@pytest.mark.parametrize(("name", "fmt", "subtype", "channels"), CASES)
@pytest.mark.parametrize("n", [33333, 100000])
def test_header_length_equals_soundfile(
    tmp_path: Path, name: str, fmt: str, subtype: str, channels: int, n: int
) -> None:
    path = _write(tmp_path / name, n, channels, fmt, subtype)
    before = sum(audio.DURATION_DECODES.values())
    got = audio.duration(path)
    assert got == sf.info(str(path)).duration
    assert sum(audio.DURATION_DECODES.values()) == before  # the header said it
    # bytes with a hint give the same
    assert audio.duration(path.read_bytes(), format=path.suffix[1:]) == got


def test_compat_get_duration_equals_librosa(tmp_path: Path) -> None:
    librosa = pytest.importorskip("librosa")
    import agl_fast.compat.librosa as compat

    for name, fmt, subtype, channels in CASES:
        path = _write(tmp_path / name, 44444, channels, fmt, subtype)
        assert compat.get_duration(path=path) == librosa.get_duration(path=path), name


def _info_frame(data: bytes) -> int:
    at = max(data.find(b"Info"), data.find(b"Xing"))
    assert at > 0, "the encoder wrote no Info/Xing tag"
    return at


def test_the_header_is_read_not_the_stream(tmp_path: Path) -> None:
    # An MP3 cut to a third: its tag still counts every frame, as libsndfile
    # reports; decoding would give fewer samples.
    full = _write(tmp_path / "full.mp3", 200000, 1, "MP3", "MPEG_LAYER_III")
    cut = tmp_path / "cut.mp3"
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) // 3])
    got = audio.duration(cut)
    assert got == sf.info(str(cut)).duration == sf.info(str(full)).duration
    y, sr = audio.load(cut, sr=None, mono=True)
    assert y.shape[-1] / sr < 0.5 * got
    # WAV and FLAC whose stream is cut: the header's count for FLAC (its
    # STREAMINFO), the data the file holds for WAV (as libsndfile)
    for name in ("full.flac", "full.wav"):
        src = _write(tmp_path / name, 200000, 2, name[-4:].upper().lstrip("."), "PCM_16")
        short = tmp_path / ("cut" + src.suffix)
        short.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
        assert audio.duration(short) == sf.info(str(short)).duration, name


def test_mp3_without_a_length_tag_is_decoded_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = _write(tmp_path / "src.mp3", 50000, 1, "MP3", "MPEG_LAYER_III")
    data = bytearray(src.read_bytes())
    at = _info_frame(bytes(data))
    data[at : at + 4] = b"Junk"  # the tag frame is then an ordinary frame
    path = tmp_path / "untagged.mp3"
    path.write_bytes(bytes(data))
    before = audio.DURATION_DECODES["mp3"]
    with caplog.at_level(logging.INFO, logger="agl_fast.audio"):
        got = audio.duration(path)
    y, sr = audio.load(path, sr=None, mono=True)
    assert got == y.shape[-1] / sr
    assert audio.DURATION_DECODES["mp3"] == before + 1
    assert any("does not state its length" in r.message for r in caplog.records)


def test_a_tag_claiming_a_huge_length_is_only_a_number(tmp_path: Path) -> None:
    src = _write(tmp_path / "src.mp3", 30000, 1, "MP3", "MPEG_LAYER_III")
    data = bytearray(src.read_bytes())
    at = _info_frame(bytes(data))
    assert data[at + 7] & 1  # the frame count is present
    data[at + 8 : at + 12] = b"\xff\xff\xff\xff"
    path = tmp_path / "huge.mp3"
    path.write_bytes(bytes(data))
    got = audio.duration(path)
    assert math.isfinite(got) and got > 1e8
    assert got == sf.info(str(path)).duration


def test_hostile_and_missing_files_raise_typed_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.flac"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.mp3"
    junk.write_bytes(b"hello, this is text" * 100)
    riff = tmp_path / "riff.wav"
    riff.write_bytes(b"RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00" + b"\x00" * 16)
    flac = tmp_path / "bad.flac"
    flac.write_bytes(b"fLaC\x00\x00\x00\x22" + b"\xff" * 34)
    for p in (empty, junk, riff, flac, tmp_path):
        with pytest.raises(AudioDecodeError):
            audio.duration(p)
    with pytest.raises(AudioFileNotFoundError):
        audio.duration(tmp_path / "missing.wav")
    with pytest.raises(AudioDecodeError):
        audio.duration(b"\x00" * 5000, format="ogg")
