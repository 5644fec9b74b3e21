"""The curator's acceptance run: a mixed corpus made with ffmpeg from the
real recordings (every common format, 8-96 kHz, 1/2/6 channels, cut
copies, a 0.2 s clip, broken files, a missing file, bad manifest
coordinates) through ``agl-fast curate``: every input has exactly one row,
every deliberately bad input fails with the reason a curator can act on,
and every good file decodes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import REAL_MP3

pytestmark = [
    pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg"),
    pytest.mark.skipif(len(REAL_MP3) < 2, reason="needs the real recordings in ../shared/agl1k"),
]

FFMPEG = ["ffmpeg", "-loglevel", "error", "-y"]

#: Good files: name -> (source recording, ffmpeg output options). The
#: ``.aifc`` file is AIFF-C (little-endian ``sowt`` samples, as macOS writes).
GOOD = {
    "pcm_8k_mono.wav": (0, ["-ar", "8000", "-ac", "1"]),
    "flac_48k.flac": (1, ["-ar", "48000", "-c:a", "flac"]),
    "mp3_44k.mp3": (0, ["-c:a", "libmp3lame", "-b:a", "128k"]),
    "vorbis_22k.ogg": (1, ["-ar", "22050", "-c:a", "libvorbis"]),
    "aac_44k.m4a": (0, ["-c:a", "aac"]),
    "opus.opus": (1, ["-c:a", "libopus"]),
    "opus.webm": (0, ["-c:a", "libopus"]),
    "vorbis.webm": (1, ["-c:a", "libvorbis"]),
    "pcm_96k.aiff": (0, ["-ar", "96000", "-c:a", "pcm_s16be"]),
    "pcm_16k.aifc": (1, ["-ar", "16000", "-ac", "1", "-c:a", "pcm_s16le", "-f", "aiff"]),
    "six.wav": (0, ["-af", "pan=5.1|c0=c0|c1=c1|c2=c0|c3=c1|c4=c0|c5=c1"]),
}
#: Files cut to a third of their bytes (the header declares the whole).
CUT = {
    "cut.flac": ["-c:a", "flac"],
    "cut.mp3": ["-c:a", "libmp3lame", "-b:a", "128k", "-write_xing", "1"],
    "cut.wav": ["-c:a", "pcm_s16le"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("mixed")
    for name, (src, opts) in GOOD.items():
        cmd = [*FFMPEG, "-i", str(REAL_MP3[src]), "-t", "8", *opts, str(d / name)]
        subprocess.run(cmd, check=True)
    for name, opts in CUT.items():
        whole = d / f"whole-{name}"
        subprocess.run([*FFMPEG, "-i", str(REAL_MP3[0]), "-t", "9", *opts, str(whole)], check=True)
        data = whole.read_bytes()
        (d / name).write_bytes(data[: len(data) // 3])
        whole.unlink()
    short = [*FFMPEG, "-i", str(REAL_MP3[1]), "-ss", "5", "-t", "0.2", str(d / "blip.wav")]
    subprocess.run(short, check=True)
    (d / "empty.mp3").write_bytes(b"")
    (d / "noise.ogg").write_bytes(bytes(range(256)) * 40)
    rows = [f"{n},{n},48.85,2.35" for n in [*GOOD, *CUT, "blip.wav", "empty.mp3", "noise.ogg"]]
    rows += [
        "gone,gone.flac,10,10",
        "wild,wild.wav,200,500",
        "east,east.wav,12.5,east",
    ]
    for bad in ("wild.wav", "east.wav"):
        shutil.copy(d / "pcm_8k_mono.wav", d / bad)
    (d / "manifest.csv").write_text("key,path,latitude,longitude\n" + "\n".join(rows) + "\n")
    return d


@pytest.fixture(scope="module")
def curated(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    out = tmp_path_factory.mktemp("curated")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agl_fast",
            "curate",
            "-q",
            "--manifest",
            str(corpus / "manifest.csv"),
            "--out",
            str(out),
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode in (0, 1), r.stderr
    rows = {x["key"]: x for x in pq.read_table(out / "curated.parquet").to_pylist()}
    return rows, json.loads((out / "summary.json").read_text())


def test_every_input_has_exactly_one_row(corpus: Path, curated: tuple[dict, dict]) -> None:
    rows, summary = curated
    keys = [line.split(",")[0] for line in (corpus / "manifest.csv").read_text().splitlines()[1:]]
    assert sorted(rows) == sorted(keys)
    assert summary["counts"]["rows"] == len(keys) == summary["counts"]["inputs"]


@pytest.mark.parametrize("name", sorted(GOOD))
def test_every_common_format_decodes(curated: tuple[dict, dict], name: str) -> None:
    row = curated[0][name]
    assert row["error_type"] is None, row["error_message"]
    assert row["duration"] == pytest.approx(8.0, abs=0.05)
    assert row["decoded_fraction"] is None or row["decoded_fraction"] > 0.99
    assert "too_short" not in (row["reasons"] or [])
    assert (row["latitude"], row["longitude"]) == (48.85, 2.35)


def test_channels_and_rates_are_the_sources(curated: tuple[dict, dict]) -> None:
    rows = curated[0]
    assert rows["six.wav"]["source_channels"] == 6
    assert rows["pcm_8k_mono.wav"]["source_sr"] == 8000
    assert rows["pcm_96k.aiff"]["source_sr"] == 96000
    assert rows["opus.opus"]["source_sr"] == 48000


@pytest.mark.parametrize("name", sorted(CUT))
def test_cut_files_fail_as_truncated_sources(curated: tuple[dict, dict], name: str) -> None:
    row = curated[0][name]
    assert row["error_type"] == "TruncatedSource"
    assert "stream ends early after" in row["error_message"]
    assert row["passed"] is False


@pytest.mark.parametrize(
    ("key", "error_type", "words"),
    [
        ("empty.mp3", "AudioDecodeError", "empty.mp3: empty file (0 bytes)"),
        ("noise.ogg", "AudioDecodeError", "unrecognised format"),
        ("gone", "FileNotFound", "file not found"),
        (
            "wild",
            "InvalidCoordinates",
            "latitude '200' is outside [-90, 90] degrees; "
            "longitude '500' is outside [-180, 180] degrees",
        ),
        ("east", "InvalidCoordinates", "longitude 'east' is not a number"),
    ],
)
def test_broken_inputs_fail_with_a_reason(
    curated: tuple[dict, dict], key: str, error_type: str, words: str
) -> None:
    row = curated[0][key]
    assert row["error_type"] == error_type
    assert words in row["error_message"]
    assert row["passed"] is False
    if error_type == "InvalidCoordinates":  # never stored as 200.0 or as a silent null
        assert row["latitude"] is None and row["longitude"] is None


def test_a_short_clip_is_rejected_by_the_duration_rule(curated: tuple[dict, dict]) -> None:
    row = curated[0]["blip.wav"]
    assert row["error_type"] is None
    assert row["duration"] == pytest.approx(0.2, abs=0.01)
    assert "too_short" in row["reasons"] and row["passed"] is False
    assert curated[1]["counts"]["rejected_by_reason"]["too_short"] == 1


def test_directory_mode_reads_every_format_and_counts_the_rest(
    corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "agl_fast", "curate", "-q", str(corpus), "--out", str(out)]
    r = subprocess.run([*cmd, "--workers", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stderr
    keys = pq.read_table(out / "curated.parquet").column("key").to_pylist()
    audio = sorted(p.name for p in corpus.iterdir() if p.suffix != ".csv")
    assert sorted(keys) == audio
    assert json.loads((out / "summary.json").read_text())["skipped"] == {
        "count": 1,
        "by_extension": {".csv": 1},
        "files": ["manifest.csv"],
    }
