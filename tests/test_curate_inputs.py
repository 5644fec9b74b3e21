"""What curation does with its inputs before decoding: files skipped by
extension or type are counted and listed, manifest coordinates are checked."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agl_fast.exceptions import ParameterError
from agl_fast.manifest import COORDINATE_PROBLEM, read_manifest
from agl_fast.pipeline import discover


def _wav(path: Path, seconds: float = 2.0, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    y = (rng.standard_normal(int(32000 * seconds)) * 3000).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(32000)
        w.writeframes(y.tobytes())
    return path


CURATE = [sys.executable, "-m", "agl_fast", "curate"]


def _curate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agl_fast", "curate", "-q", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_directory_mode_counts_and_lists_every_skipped_file(tmp_path: Path) -> None:
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    _wav(root / "a.wav")
    _wav(root / "sub" / "b.wav", seed=1)
    (root / "notes.txt").write_text("field notes")
    (root / "sub" / "c.xyz").write_bytes(b"\0" * 10)
    os.mkfifo(root / "pipe.wav")
    inputs = discover(str(root))
    assert inputs.keys == ["a.wav", "sub/b.wav"]
    assert inputs.skipped["count"] == 3
    assert inputs.skipped["by_extension"] == {".txt": 1, ".wav": 1, ".xyz": 1}
    assert sorted(inputs.skipped["files"]) == ["notes.txt", "pipe.wav", "sub/c.xyz"]

    widened = discover(str(root), ["XYZ"])
    assert sorted(widened.keys) == ["a.wav", "sub/b.wav", "sub/c.xyz"]
    assert widened.skipped["count"] == 2

    out = tmp_path / "out"
    r = _curate(str(root), "--out", str(out), "--extensions", "xyz")
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped"]["count"] == 2
    assert sorted(summary["skipped"]["files"]) == ["notes.txt", "pipe.wav"]
    rows = pq.read_table(out / "curated.parquet").column("key").to_pylist()
    assert sorted(rows) == ["a.wav", "sub/b.wav", "sub/c.xyz"]


def test_empty_extension_is_refused() -> None:
    with pytest.raises(ParameterError, match="extensions must be non-empty"):
        discover(".", [" "])


def test_manifest_coordinates_are_checked_and_named(tmp_path: Path) -> None:
    for i in range(4):
        _wav(tmp_path / f"c{i}.wav", seconds=3.0, seed=i)
    csv = tmp_path / "m.csv"
    csv.write_text(
        "key,path,latitude,longitude\n"
        "good,c0.wav,48.1,2.3\n"
        "wild,c1.wav,200,500\n"
        "text,c2.wav,east,10\n"
        "none,c3.wav,,\n"
    )
    table = read_manifest(csv)
    assert table.column("latitude").to_pylist() == [48.1, None, None, None]
    problems = table.column(COORDINATE_PROBLEM).to_pylist()
    assert problems[0] is None and problems[3] is None
    assert "latitude '200' is outside [-90, 90]" in problems[1]
    assert "longitude '500' is outside [-180, 180]" in problems[1]
    assert problems[2] == "latitude 'east' is not a number"

    out = tmp_path / "out"
    r = _curate("--manifest", str(csv), "--out", str(out))
    assert r.returncode in (0, 1), r.stderr
    t = pq.read_table(out / "curated.parquet").to_pylist()
    by_key = {row["key"]: row for row in t}
    assert len(t) == 4
    for key in ("wild", "text"):
        assert by_key[key]["error_type"] == "InvalidCoordinates"
        assert by_key[key]["passed"] is False
        assert by_key[key]["latitude"] is None
    assert "east" in by_key["text"]["error_message"]
    for key in ("good", "none"):
        assert by_key[key]["error_type"] != "InvalidCoordinates"
    assert by_key["good"]["latitude"] == 48.1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["errors_by_reason"].get("InvalidCoordinates") == 2


def test_duration_rules_reject_short_and_optionally_long_clips(tmp_path: Path) -> None:
    from agl_fast.pipeline import CurateConfig, curate

    root = tmp_path / "in"
    root.mkdir()
    _wav(root / "blip.wav", seconds=0.2)
    _wav(root / "ok.wav", seconds=3.0, seed=1)
    _wav(root / "long.wav", seconds=6.0, seed=2)
    inputs = discover(str(root))

    def rows(**kw: object) -> dict[str, dict]:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        cfg = CurateConfig(workers=0, max_duration=5.0, **kw)  # type: ignore[arg-type]
        summary = curate(inputs, out, cfg)
        table = pq.read_table(out / "curated.parquet").to_pylist()
        rows = {r["key"]: r for r in table}
        rows["summary"] = summary
        return rows

    default = rows()
    assert default["blip.wav"]["passed"] is False
    assert "too_short" in default["blip.wav"]["reasons"]
    assert default["blip.wav"]["error_type"] is None  # decoded; rejected by a rule
    assert "too_short" not in (default["ok.wav"]["reasons"] or [])
    assert default["long.wav"]["truncated"] is True
    assert "too_long" not in (default["long.wav"]["reasons"] or [])
    assert default["summary"]["counts"]["rejected_by_reason"]["too_short"] == 1

    relaxed = rows(min_duration=0.0, long_clips="fail")
    assert "too_short" not in (relaxed["blip.wav"]["reasons"] or [])
    assert "too_long" in relaxed["long.wav"]["reasons"]
    assert relaxed["long.wav"]["passed"] is False


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"min_duration": -1.0}, "min_duration must be a finite number >= 0"),
        ({"min_duration": float("nan")}, "min_duration must be a finite number >= 0"),
        ({"min_duration": True}, "min_duration must be a finite number >= 0"),
        ({"long_clips": "keep"}, "long_clips must be one of"),
    ],
)
def test_duration_options_are_validated(kw: dict, match: str, tmp_path: Path) -> None:
    from agl_fast.pipeline import CurateConfig, curate

    _wav(tmp_path / "a.wav")
    with pytest.raises(ParameterError, match=match):
        curate(discover(str(tmp_path)), tmp_path / "out", CurateConfig(workers=0, **kw))


def _multi(path: Path, channels: int, seconds: float = 2.0) -> Path:
    rng = np.random.default_rng(channels)
    y = (rng.standard_normal((int(32000 * seconds), channels)) * 3000).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(32000)
        w.writeframes(y.tobytes())
    return path


def test_binaural_recipe_follows_one_channel_rule_everywhere(tmp_path: Path) -> None:
    from agl_fast.pipeline import CurateConfig, curate

    root = tmp_path / "in"
    root.mkdir()
    _wav(root / "mono.wav")
    _multi(root / "stereo.wav", 2)
    _multi(root / "six.wav", 6)
    inputs = discover(str(root))

    def rows(policy: str) -> dict[str, dict]:
        out = tmp_path / policy
        cfg = CurateConfig(workers=0, features="bat", channels_policy=policy, min_duration=0.0)
        curate(inputs, out, cfg)
        return {r["key"]: r for r in pq.read_table(out / "curated.parquet").to_pylist()}

    refused = rows("refuse")
    for key, n in (("mono.wav", 1), ("six.wav", 6)):
        assert refused[key]["passed"] is False
        assert f"has {n} channel(s)" in refused[key]["stage_error"]
        assert refused[key]["features_shape"] is None
    assert refused["stereo.wav"]["stage_error"] is None
    assert refused["stereo.wav"]["channels_policy"] == "as-is"
    assert refused["stereo.wav"]["features_shape"][:2] == [4, 201]

    converted = rows("mono-to-binaural")
    assert converted["mono.wav"]["stage_error"] is None
    assert converted["mono.wav"]["channels_policy"] == "mono-to-binaural"
    assert converted["mono.wav"]["features_shape"][:2] == [4, 201]
    assert "has 6 channel(s)" in converted["six.wav"]["stage_error"]

    # the features command applies the same rule
    cmd = [sys.executable, "-m", "agl_fast", "features", str(root / "mono.wav")]
    r = subprocess.run([*cmd, "--out", str(tmp_path / "f.npy")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "has 1 channel(s) (--mono-to-binaural duplicates a mono clip)" in r.stderr
    r = subprocess.run(
        [*cmd, "--mono-to-binaural", "--out", str(tmp_path / "f.npy")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "f.npy").shape[:2] == (4, 201)


def test_unreadable_inputs_are_rows_before_any_decoding(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    _wav(root / "ok.wav", seconds=2.0)
    os.mkfifo(root / "fifo.mp3")
    (root / "zl.mp3").symlink_to("/dev/zero")
    (root / "dir.wav").mkdir()
    (root / "empty.flac").write_bytes(b"")
    n_missing = 20_000
    # zl.mp3 leads outside --audio-dir: refused; /dev/zero named as written is checked
    lines = ["key,path", "ok,ok.wav", "fifo,fifo.mp3", "zero,/dev/zero", "dir,dir.wav"]
    lines.append("zlink,zl.mp3")
    lines.append("empty,empty.flac")
    lines += [f"m{i},missing/{i}.mp3" for i in range(n_missing)]
    csv = tmp_path / "m.csv"
    csv.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    # a FIFO or /dev/zero handed to a decoder would block or never end:
    # the bound proves they never reach one
    r = subprocess.run(
        [
            *CURATE,
            "-v",
            "--manifest",
            str(csv),
            "--audio-dir",
            str(root),
            "--out",
            str(out),
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode in (0, 1), r.stderr
    assert f"{n_missing + 5} of {n_missing + 6} inputs cannot be read" in r.stderr
    assert "zlink: zl.mp3 leads outside" in r.stderr
    rows = {row["key"]: row for row in pq.read_table(out / "curated.parquet").to_pylist()}
    assert len(rows) == n_missing + 6
    assert rows["zlink"]["path"] is None
    assert rows["zlink"]["error_type"] == "RefusedPath"
    assert rows["ok"]["error_type"] is None
    assert rows["fifo"]["error_type"] == "NotARegularFile"
    assert "not a regular file (a FIFO)" in rows["fifo"]["error_message"]
    assert rows["zero"]["error_type"] == "NotARegularFile"
    assert "a character device" in rows["zero"]["error_message"]
    assert rows["dir"]["error_type"] == "NotARegularFile"
    assert "a directory" in rows["dir"]["error_message"]
    assert rows["empty"]["error_type"] == "AudioDecodeError"
    assert rows["empty"]["error_message"].endswith("empty.flac: empty file (0 bytes)")
    assert all(rows[f"m{i}"]["error_type"] == "FileNotFound" for i in range(n_missing))
    assert rows["m7"]["error_message"].endswith("file not found: " + str(root / "missing/7.mp3"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["errors_by_type"] == {
        "FileNotFound": n_missing,
        "NotARegularFile": 3,
        "AudioDecodeError": 1,
        "RefusedPath": 1,
    }


def test_refused_audio_is_a_row_with_its_reason(tmp_path: Path) -> None:
    """A clip that ``resolve_audio`` refuses (a link leading outside
    ``--audio-dir``, a file its fetch folder does not vouch for) is a
    ``RefusedPath`` row that says why, also when ``-q`` hides the warning."""
    from agl_fast.cli import main
    from agl_fast.dataset import FetchRecord

    outside = tmp_path / "outside"
    outside.mkdir()
    _wav(outside / "secret.wav", seed=3)
    plain = tmp_path / "plain"
    plain.mkdir()
    _wav(plain / "in.wav")
    (plain / "link.wav").symlink_to(outside / "secret.wav")
    (plain / "inner.wav").symlink_to(plain / "in.wav")  # stays inside: read
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    _wav(fetched / "vouched.wav", seed=1)
    _wav(fetched / "stray.wav", seed=2)
    size = (fetched / "vouched.wav").stat().st_size
    rec = FetchRecord(key="vouched", mp3name="vouched.wav", url="u", status="ok",
                      path="vouched.wav", bytes=size)  # fmt: skip
    (fetched / "fetch.jsonl").write_text(rec.to_json() + "\n")

    def curate(audio_dir: Path, lines: list[str]) -> dict[str, dict]:
        csv = tmp_path / f"{audio_dir.name}.csv"
        csv.write_text("\n".join(["key,path", *lines]) + "\n")
        out = tmp_path / f"out-{audio_dir.name}"
        argv = ["curate", "-q", "--manifest", str(csv), "--audio-dir", str(audio_dir)]
        assert main([*argv, "--out", str(out), "--workers", "0"]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["counts"]["errors_by_type"] == {"RefusedPath": 1}
        return {r["key"]: r for r in pq.read_table(out / "curated.parquet").to_pylist()}

    rows = curate(plain, ["kin,in.wav", "kinner,inner.wav", "klink,link.wav"])
    assert rows["kin"]["error_type"] is None and rows["kinner"]["error_type"] is None
    assert rows["klink"]["error_type"] == "RefusedPath"
    assert rows["klink"]["error_message"] == f"klink: audio refused: link.wav leads outside {plain}"
    assert rows["klink"]["path"] is None and rows["klink"]["passed"] is False

    rows = curate(fetched, ["vouched,x.wav", "stray,y.wav"])
    assert rows["vouched"]["error_type"] is None
    assert rows["stray"]["error_type"] == "RefusedPath"
    assert rows["stray"]["error_message"] == (
        "stray: audio refused: stray.wav has no line in its fetch.jsonl"
    )


def test_missing_files_are_reported_at_file_system_speed(tmp_path: Path) -> None:
    n = 100_000
    csv = tmp_path / "m.csv"
    with csv.open("w") as fh:
        fh.write("key,path\n")
        fh.writelines(f"k{i},{tmp_path}/gone/{i}.wav\n" for i in range(n))
    out = tmp_path / "out"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [*CURATE, "-v", "--manifest", str(csv), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the run (its workers included), which a busy machine
    # does not stretch as it stretches the wall clock
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert r.returncode == 0, r.stderr
    counts = json.loads((out / "summary.json").read_text())["counts"]
    assert counts["rows"] == n and counts["errors_by_type"] == {"FileNotFound": n}
    found = re.search(
        rf"{n} of {n} inputs cannot be read \(FileNotFound: {n}\), found in "
        r"([0-9.]+) s before decoding",
        r.stderr,
    )
    assert found is not None, r.stderr
    # the metadata pass itself, and the whole run (process start and the
    # written table included) within a tenth of the 2 minutes for 1 M rows
    assert n / max(float(found.group(1)), 1e-3) >= 10_000, found.group(0)
    assert cpu < 12.0, f"{n / cpu:,.0f} rows per CPU second end to end"


def test_a_file_gone_after_the_metadata_pass_is_still_file_not_found(tmp_path: Path) -> None:
    from agl_fast.pipeline.batch import BatchConfig, process_batch

    ok = _wav(tmp_path / "ok.wav")
    gone = tmp_path / "gone.wav"
    table = pa.table({"key": ["ok", "gone"], "path": [str(ok), str(gone)]})
    rows = process_batch(table, BatchConfig(sr=16000, threads=1)).to_pylist()
    assert rows[0]["error_type"] is None
    assert rows[1]["error_type"] == "FileNotFound"
    assert "file not found" in rows[1]["error_message"] and not rows[1]["passed"]
