"""Opus (Ogg, WebM), Vorbis in WebM and AIFF/AIFF-C decode natively and
match ffmpeg.

Files are encoded by ffmpeg from 6 s excerpts of the real recordings; the
reference is ffmpeg's own decode of the same file to float32 (with libopus
as the Opus decoder where ffmpeg has it). Every entry point (``load``,
``load_many``, ``compat.librosa.load``, directory-mode ``curate``) must
read them, with no librosa and no ffmpeg at run time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import agl_fast
from agl_fast.audio import AUDIO_EXTENSIONS
from agl_fast.compat import librosa as compat_librosa
from agl_fast.exceptions import AudioDecodeError
from conftest import REAL_MP3

FFMPEG = shutil.which("ffmpeg")
pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")

#: name -> (ffmpeg encoder arguments, True for Opus)
ENCODINGS: dict[str, tuple[list[str], bool]] = {
    "ogg_opus.opus": (["-c:a", "libopus", "-b:a", "96k"], True),
    "webm_opus.webm": (["-c:a", "libopus", "-b:a", "96k"], True),
    "webm_vorbis.webm": (["-c:a", "libvorbis", "-q:a", "4"], False),
    "matroska_flac.mka": (["-c:a", "flac"], False),
    "pcm16.aiff": (["-c:a", "pcm_s16be"], False),
    "pcm24.aif": (["-c:a", "pcm_s24be", "-f", "aiff"], False),
    # ffmpeg writes AIFF-C ("AIFC" form) for codecs AIFF cannot hold.
    "float32.aifc": (["-c:a", "pcm_f32be", "-f", "aiff"], False),
    "sowt.aifc": (["-c:a", "pcm_s16le", "-f", "aiff"], False),
}
TOL = 1e-4


def _has_encoder(name: str) -> bool:
    out = subprocess.run([str(FFMPEG), "-hide_banner", "-encoders"], capture_output=True, text=True)
    return f" {name} " in out.stdout


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not REAL_MP3:
        pytest.skip("the AGL1K recordings are not beside this checkout")
    if not (_has_encoder("libopus") and _has_encoder("libvorbis")):
        pytest.skip("ffmpeg lacks libopus or libvorbis")
    out = tmp_path_factory.mktemp("formats")
    files = {}
    for i, (name, (args, _)) in enumerate(ENCODINGS.items()):
        src = REAL_MP3[i % len(REAL_MP3)]
        path = out / name
        mono = ["-ac", "1"] if name.startswith(("pcm24", "sowt")) else []
        head = [str(FFMPEG), "-v", "error", "-y", "-ss", "20", "-t", "6", "-i", str(src)]
        subprocess.run([*head, *mono, *args, "-map_metadata", "-1", str(path)], check=True)
        files[name] = path
    return files


def _ffmpeg_decode(path: Path, channels: int, opus: bool) -> np.ndarray:
    dec = ["-c:a", "libopus"] if opus else []
    raw = subprocess.run(
        [
            str(FFMPEG),
            "-v",
            "error",
            *dec,
            "-i",
            str(path),
            "-f",
            "f32le",
            "-ac",
            str(channels),
            "-",
        ],
        capture_output=True,
        check=True,
    ).stdout
    return np.frombuffer(raw, np.float32).reshape(-1, channels).T


def test_one_extension_set_names_the_new_formats() -> None:
    assert {".opus", ".webm", ".mka", ".aiff", ".aif", ".aifc"} <= AUDIO_EXTENSIONS


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_matches_ffmpeg(corpus: dict[str, Path], name: str) -> None:
    path = corpus[name]
    y, sr = agl_fast.load(path, sr=None, mono=False)
    y = np.atleast_2d(y)
    ref = _ffmpeg_decode(path, y.shape[0], ENCODINGS[name][1])
    if ENCODINGS[name][1]:
        assert sr == 48000
    # (WebM Opus: the last block's DiscardPadding is trimmed, as ffmpeg does)
    assert y.shape == ref.shape
    assert float(np.abs(y - ref).max()) <= TOL


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_entry_points_agree(corpus: dict[str, Path], name: str) -> None:
    """load and load_many give the same samples; the librosa drop-in decodes
    the same samples and, at another rate, resamples them as librosa's loader
    does (its soxr_hq resample, to the bit)."""
    librosa = pytest.importorskip("librosa")
    path = corpus[name]
    y, sr = agl_fast.load(path, sr=22050, mono=True)
    t = agl_fast.load_many([path], sr=22050, mono=True)
    assert t.column("error_type").to_pylist() == [None]
    many = np.asarray(t.column("samples")[0].as_py(), dtype=np.float32)
    assert sr == 22050
    np.testing.assert_array_equal(y, many)
    native, native_sr = agl_fast.load(path, sr=None, mono=True)
    if not str(path).lower().endswith(compat_librosa.NATIVE_EXTENSIONS):
        # the drop-in hands this container to librosa (its own reader:
        # audioread until 0.11, none from 1.0): librosa's result or error
        _same_as_librosa(librosa, str(path))
        return
    c0, c0_sr = compat_librosa.load(str(path), sr=None, mono=True)
    assert c0_sr == native_sr
    np.testing.assert_array_equal(c0, native)
    c, c_sr = compat_librosa.load(str(path), sr=22050, mono=True)
    assert c_sr == 22050
    want = (
        native
        if native_sr == 22050
        else librosa.resample(native, orig_sr=native_sr, target_sr=22050)
    )
    np.testing.assert_array_equal(c, want)


def _same_as_librosa(librosa: Any, path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # librosa's notice that soundfile failed
        try:
            want, want_sr = librosa.load(path, sr=None, mono=True)
        except Exception as exc:
            with pytest.raises(type(exc)):
                compat_librosa.load(path, sr=None, mono=True)
            return
        got, got_sr = compat_librosa.load(path, sr=None, mono=True)
    assert got_sr == want_sr
    np.testing.assert_array_equal(got, want)


def test_no_librosa_or_ffmpeg_at_run_time(corpus: dict[str, Path]) -> None:
    """Decoding in a fresh interpreter imports no librosa and runs no
    subprocess (ffmpeg removed from PATH)."""
    code = (
        "import sys, agl_fast\n"
        "for p in sys.argv[1:]:\n"
        "    y, sr = agl_fast.load(p, sr=None)\n"
        "    assert y.size > 0, p\n"
        "assert 'librosa' not in sys.modules and 'audioread' not in sys.modules\n"
        "print('ok', len(sys.argv) - 1)\n"
    )
    env = {"PATH": "/nonexistent", "PYTHONPATH": ":".join(sys.path)}
    r = subprocess.run(
        [sys.executable, "-c", code, *map(str, corpus.values())],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"ok {len(ENCODINGS)}"


def test_directory_curate_takes_every_new_format(corpus: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    for p in corpus.values():
        shutil.copy(p, root / p.name)
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "agl_fast", "curate", "-q", str(root), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped"]["count"] == 0
    rows = pq.read_table(out / "curated.parquet").to_pylist()
    assert sorted(row["key"] for row in rows) == sorted(corpus)
    decode_errors = [row["key"] for row in rows if row.get("error_type") == "AudioDecodeError"]
    assert decode_errors == []


@pytest.mark.parametrize(
    ("name", "field", "value", "reason"),
    [
        ("ogg_opus.opus", "opushead.channels", 200, "cannot decode"),
        ("ogg_opus.opus", "opushead.family", 2, "cannot decode"),
        ("ogg_opus.opus", "opushead.streams", 0, "cannot decode"),
        ("webm_opus.webm", "opushead.channels", 0, "invalid OpusHead header"),
        ("webm_opus.webm", "opushead.family", 2, "invalid OpusHead header"),
        ("pcm16.aiff", "comm.channels", 0, "AIFF header declares 0 channels"),
        ("pcm16.aiff", "comm.bits", 65535, "bits per sample"),
        ("float32.aifc", "comm.rate_exp", 0x7FFF, "AIFF header declares an invalid sample rate"),
        ("float32.aifc", "comm.rate_mant", 0, "AIFF header declares a sample rate of 0"),
    ],
)
def test_hostile_header_counts_are_typed_errors(
    corpus: dict[str, Path], tmp_path: Path, name: str, field: str, value: int, reason: str
) -> None:
    """A header count out of range is an ``AudioDecodeError`` from ``load``
    and an error row from ``load_many``, never a crash or a huge buffer."""
    from fuzz.formats import FIELDS, fix_checksums

    fmt = {"opus": "opus", "webm": "webm"}.get(Path(name).suffix[1:], "aiff")
    orig = corpus[name].read_bytes()
    (f,) = [f for f in FIELDS[fmt](orig) if f.label == field]
    buf = bytearray(orig)
    f.set(buf, value)
    fix_checksums(fmt, orig, buf)
    bad = tmp_path / name
    bad.write_bytes(bytes(buf))
    with pytest.raises(AudioDecodeError, match=reason):
        agl_fast.load(bad, sr=None)
    t = agl_fast.load_many([bad, corpus[name]], sr=None)
    assert t.column("error_type").to_pylist() == ["AudioDecodeError", None]
