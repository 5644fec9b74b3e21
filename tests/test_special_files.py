"""Special files never block the loader, and every way a file can be unusable
has its own message: a missing file, an empty one, unknown bytes, a device,
a FIFO, a directory (through ``load``, ``load_many`` and ``curate``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import agl_fast
from agl_fast.exceptions import AglError, AudioDecodeError, AudioFileNotFoundError
from conftest import REAL_MP3

FFMPEG = ["ffmpeg", "-loglevel", "error", "-y"]
CURATE = [sys.executable, "-m", "agl_fast", "curate", "-q", "--workers", "1"]
SUFFIXES = (".mp3", ".wav", ".flac", ".ogg", ".m4a", ".opus", "")

#: Each special input is loaded in a child process (a blocked read cannot be
#: interrupted from Python); the child reports each call's time and error.
_CHILD = r"""
import json, sys, time
import agl_fast
out = []
for path in sys.argv[1:]:
    t0 = time.monotonic()
    try:
        agl_fast.load(path)
        kind, msg = None, None
    except Exception as exc:
        kind, msg = type(exc).__name__, str(exc)
    t1 = time.monotonic()
    table = agl_fast.load_many([path], n_threads=1)
    t2 = time.monotonic()
    out.append({
        "path": path, "load_s": t1 - t0, "load_error": kind, "load_message": msg,
        "many_s": t2 - t1, "many_error": table.column("error_type")[0].as_py(),
        "many_message": table.column("error_message")[0].as_py(),
    })
print(json.dumps(out))
"""


def _special_inputs(d: Path) -> dict[str, tuple[Path, str]]:
    """Special files under every suffix, with the kind the message names."""
    made: dict[str, tuple[Path, str]] = {}
    for suffix in SUFFIXES:
        stem = suffix.lstrip(".") or "bare"
        for target in ("/dev/zero", "/dev/urandom"):
            link = d / f"{Path(target).name}_{stem}{suffix}"
            link.symlink_to(target)
            made[link.name] = (link, "character device")
        fifo = d / f"fifo_{stem}{suffix}"
        os.mkfifo(fifo)
        made[fifo.name] = (fifo, "FIFO")
        folder = d / f"dir_{stem}{suffix}"
        folder.mkdir()
        made[folder.name] = (folder, "directory")
    return made


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_special_files_fail_at_once_under_any_suffix(tmp_path: Path) -> None:
    made = _special_inputs(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, *(str(p) for p, _ in made.values())],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert len(results) == len(made) == 4 * len(SUFFIXES)
    for res in results:
        name = Path(res["path"]).name
        kind = made[name][1]
        assert res["load_s"] < 1.0, res
        assert res["many_s"] < 1.0, res
        assert res["load_error"] == "AudioDecodeError", res
        assert res["load_message"].endswith(f"not a regular file ({kind})"), res
        assert res["many_error"] == "AudioDecodeError", res
        assert res["many_message"].endswith(f"not a regular file ({kind})"), res


def test_missing_file_is_its_own_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone.mp3"
    with pytest.raises(AudioFileNotFoundError, match=r"^file not found: .*gone\.mp3$") as info:
        agl_fast.load(gone)
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, AglError)
    assert not isinstance(info.value, AudioDecodeError)
    table = agl_fast.load_many([gone])
    assert table.column("error_type").to_pylist() == ["AudioFileNotFoundError"]
    assert table.column("error_message")[0].as_py().endswith(f"file not found: {gone}")


@pytest.mark.parametrize("name", ["empty.mp3", "empty.flac", "empty.wav", "empty"])
def test_empty_file_says_so(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"")
    with pytest.raises(AudioDecodeError, match=r"empty file \(0 bytes\)$"):
        agl_fast.load(path)
    with pytest.raises(AudioDecodeError, match=r"empty file \(0 bytes\)$"):
        agl_fast.load(b"")
    table = agl_fast.load_many([path])
    assert table.column("error_message")[0].as_py().endswith("empty file (0 bytes)")


@pytest.mark.parametrize("name", ["noise.ogg", "noise.flac", "noise.wav", "noise"])
def test_unknown_bytes_name_their_first_bytes(tmp_path: Path, name: str) -> None:
    data = bytes([0x3F, 0x2A, 0x10, 0x99, 0x00, 0xFE, 0x11, 0x22]) + bytes(range(256)) * 64
    path = tmp_path / name
    path.write_bytes(data)
    expected = r"unrecognised format \(first bytes 3f 2a 10 99 00 fe 11 22\)$"
    with pytest.raises(AudioDecodeError, match=expected):
        agl_fast.load(path)
    with pytest.raises(AudioDecodeError, match=expected):
        agl_fast.load(data)
    table = agl_fast.load_many([path])
    assert table.column("error_type")[0].as_py() == "AudioDecodeError"
    message = table.column("error_message")[0].as_py()
    assert "unrecognised format (first bytes 3f 2a 10 99" in message


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
@pytest.mark.skipif(not REAL_MP3, reason="needs the real recordings in ../shared/agl1k")
def test_file_objects_and_bytes_are_still_read(tmp_path: Path) -> None:
    wav = tmp_path / "clip.wav"
    subprocess.run(
        [*FFMPEG, "-i", str(REAL_MP3[0]), "-t", "2", "-ac", "1", "-ar", "16000", str(wav)],
        check=True,
    )
    y_path, sr = agl_fast.load(wav, sr=None)
    with wav.open("rb") as f:
        y_obj, sr_obj = agl_fast.load(f, sr=None)
    y_bytes, _ = agl_fast.load(wav.read_bytes(), sr=None)
    assert sr == sr_obj == 16000
    assert y_path.shape == (32000,)
    np.testing.assert_array_equal(y_path, y_obj)
    np.testing.assert_array_equal(y_path, y_bytes)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_curate_names_each_unusable_input(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "empty.flac").write_bytes(b"")
    (d / "noise.wav").write_bytes(bytes([0x3F, 0x2A, 0x01, 0x02]) * 4096)
    os.mkfifo(d / "fifo.mp3")
    (d / "zero.mp3").symlink_to("/dev/zero")
    manifest = tmp_path / "m.csv"
    rows = [f"{p},{p}" for p in ("empty.flac", "noise.wav", "fifo.mp3", "zero.mp3")]
    manifest.write_text("key,path\n" + "\n".join(rows) + "\ngone,gone.mp3\ndev,/dev/zero\n")
    out = tmp_path / "out"
    r = subprocess.run(
        [*CURATE, "--manifest", str(manifest), "--audio-dir", str(d), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    got = {x["key"]: x for x in pq.read_table(out / "curated.parquet").to_pylist()}
    assert set(got) == {"empty.flac", "noise.wav", "fifo.mp3", "zero.mp3", "gone", "dev"}
    assert got["empty.flac"]["error_message"].endswith("empty file (0 bytes)")
    assert "unrecognised format (first bytes 3f 2a 01 02" in got["noise.wav"]["error_message"]
    assert got["gone"]["error_type"] == "FileNotFound"
    assert "file not found" in got["gone"]["error_message"]
    assert "not a regular file (a FIFO)" in got["fifo.mp3"]["error_message"]
    # a link leading out of --audio-dir is refused before anything opens it
    assert got["zero.mp3"]["path"] is None
    assert got["dev"]["error_type"] == "NotARegularFile"
    assert "a character device" in got["dev"]["error_message"]
    assert not any(x["passed"] for x in got.values())


_COMPAT_CHILD = r"""
import json, sys, time
import agl_fast.compat.librosa as librosa
out = []
for path in sys.argv[1:]:
    for call in ("load", "get_duration"):
        t0 = time.monotonic()
        try:
            librosa.load(path) if call == "load" else librosa.get_duration(path=path)
            kind, msg = None, None
        except Exception as exc:
            kind, msg = type(exc).__name__, str(exc)
        out.append({"path": path, "call": call, "s": time.monotonic() - t0,
                    "error": kind, "message": msg})
print(json.dumps(out))
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_the_librosa_drop_in_never_falls_back_on_a_special_file(tmp_path: Path) -> None:
    # librosa itself would block on these: the drop-in must refuse them, not
    # hand them over
    made = {n: v for n, v in _special_inputs(tmp_path).items() if n.endswith((".mp3", ".wav"))}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run(
        [sys.executable, "-c", _COMPAT_CHILD, *(str(p) for p, _ in made.values())],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert len(results) == 2 * len(made)
    for res in results:
        assert res["s"] < 1.0, res
        assert res["error"] == "AudioDecodeError", res
        assert res["message"].endswith(f"not a regular file ({made[Path(res['path']).name][1]})")
