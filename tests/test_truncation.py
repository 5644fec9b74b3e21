"""Files cut short are found by comparing what decodes with what their
header declares (WAV data size, FLAC STREAMINFO, an MP3 Xing frame count),
on files ffmpeg makes from the real recordings."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agl_fast.audio import load_arrays
from conftest import REAL_MP3

pytestmark = [
    pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg"),
    pytest.mark.skipif(not REAL_MP3, reason="needs the real recordings in ../shared/agl1k"),
]

FFMPEG = ["ffmpeg", "-loglevel", "error"]
FFPROBE_RATE = ["ffprobe", "-v", "error", "-show_entries", "stream=sample_rate", "-of", "csv=p=0"]
CURATE = [sys.executable, "-m", "agl_fast", "curate", "-q"]

#: Encodings whose header declares the length, and ffmpeg's options.
DECLARING = {
    "flac": ["-c:a", "flac"],
    "wav": ["-c:a", "pcm_s16le"],
    "mp3": ["-c:a", "libmp3lame", "-b:a", "128k", "-write_xing", "1"],
}


@pytest.fixture(scope="module")
def cut_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cut")
    for ext, opts in DECLARING.items():
        whole = d / f"whole.{ext}"
        subprocess.run(
            [
                "ffmpeg",
                "-loglevel",
                "error",
                "-y",
                "-i",
                str(REAL_MP3[0]),
                "-t",
                "12",
                *opts,
                str(whole),
            ],
            check=True,
        )
        data = whole.read_bytes()
        (d / f"cut.{ext}").write_bytes(data[: len(data) // 3])
    return d


def _ffmpeg_seconds(path: Path) -> float:
    raw = subprocess.run(
        [*FFMPEG, "-i", str(path), "-f", "f32le", "-ac", "1", "-"],
        capture_output=True,
        check=True,
    ).stdout
    rate = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-show_entries",
            "stream=sample_rate",
            "-of",
            "csv=p=0",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(raw) / 4 / int(rate.strip().splitlines()[0])


@pytest.mark.parametrize("ext", sorted(DECLARING))
def test_decoded_fraction_of_whole_and_cut_files(cut_corpus: Path, ext: str) -> None:
    whole, cut = cut_corpus / f"whole.{ext}", cut_corpus / f"cut.{ext}"
    _, table = load_arrays([str(whole), str(cut)], sr=None)
    rows = table.to_pylist()
    assert rows[0]["decoded_fraction"] == pytest.approx(1.0, abs=0.01)
    assert rows[0]["duration"] == pytest.approx(_ffmpeg_seconds(whole), abs=0.05)
    # a third of the bytes: about a third of the declared 12 s
    assert rows[1]["error_type"] is None
    assert 0.2 < rows[1]["decoded_fraction"] < 0.45
    assert rows[1]["duration"] == pytest.approx(12.0 * rows[1]["decoded_fraction"], rel=0.02)


def test_curate_fails_cut_files_unless_allowed(cut_corpus: Path, tmp_path: Path) -> None:
    def run(*extra: str) -> dict[str, dict]:
        out = tmp_path / f"out{len(extra)}"
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "agl_fast",
                "curate",
                "-q",
                str(cut_corpus),
                "--out",
                str(out),
                "--workers",
                "1",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode in (0, 1), r.stderr
        return {x["key"]: x for x in pq.read_table(out / "curated.parquet").to_pylist()}

    rows = run()
    for ext in DECLARING:
        cut, whole = rows[f"cut.{ext}"], rows[f"whole.{ext}"]
        assert cut["error_type"] == "TruncatedSource", ext
        assert cut["passed"] is False
        assert "stream ends early after" in cut["error_message"]
        assert "of the 12.0" in cut["error_message"] or "of the 11.9" in cut["error_message"]
        assert whole["error_type"] is None, ext
        assert whole["decoded_fraction"] == pytest.approx(1.0, abs=0.01)
    kept = run("--allow-cut-sources")
    for ext in DECLARING:
        assert kept[f"cut.{ext}"]["error_type"] is None
        assert kept[f"cut.{ext}"]["decoded_fraction"] < 0.45
