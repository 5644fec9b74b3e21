"""The curation pipeline: bad inputs, resume after SIGKILL, manifests, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from agl_fast.cli import main
from agl_fast.exceptions import ParameterError
from agl_fast.pipeline import (
    Clips,
    CurateConfig,
    curate,
    discover,
    feature_array,
    read_manifest,
)

AGL1K = Path(__file__).resolve().parents[2] / "shared" / "agl1k"
MP3S = sorted(AGL1K.glob("*.mp3"))


def _tone(sr: int, seconds: float, ch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(sr * seconds)
    t = np.arange(n) / sr
    y = 0.3 * np.sin(2 * np.pi * rng.uniform(200, 2000) * t)[:, None] * np.ones(ch)
    return (y + 0.01 * rng.standard_normal((n, ch))).astype(np.float32)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    for i in range(5):
        sf.write(d / f"good{i}.flac", _tone(44100, 1.5, 2, i), 44100, subtype="PCM_16")
    (d / "sub").mkdir()
    sf.write(d / "sub" / "good0.flac", _tone(22050, 1.0, 1, 9), 22050)  # same name, other key
    (d / "empty.wav").write_bytes(b"")
    (d / "not_audio.mp3").write_bytes(b"<html>not audio</html>" * 50)
    sf.write(d / "full.wav", _tone(16000, 1.0, 2, 7), 16000)
    (d / "truncated.flac").write_bytes((d / "full.wav").read_bytes()[:40])
    sf.write(d / "cut.wav", _tone(16000, 1.0, 2, 8), 16000)
    (d / "cut.wav").write_bytes((d / "cut.wav").read_bytes()[:20000])  # data cut short
    sf.write(d / "silent.wav", np.zeros((16000, 2), np.float32), 16000)
    sf.write(d / "nan.wav", np.full((800, 1), np.nan, np.float32), 8000, subtype="FLOAT")
    sf.write(d / "eight.wav", _tone(48000, 0.5, 8, 3), 48000)
    sf.write(d / "one.wav", np.array([[0.5, -0.5]], np.float32), 8000)
    # Three hours at 1 kHz mono: cut at max_duration, flagged truncated.
    sf.write(d / "long.wav", np.zeros((3 * 3600 * 1000, 1), np.int16), 1000, subtype="PCM_16")
    return d


EXPECTED_ERRORS = {
    "empty.wav": "AudioDecodeError",
    "not_audio.mp3": "AudioDecodeError",
    "truncated.flac": "AudioDecodeError",
    "nan.wav": "NonFiniteError",
    # decodes 0.31 s of the 1 s its header declares
    "cut.wav": "TruncatedSource",
}


def test_bad_inputs_give_rows_not_crashes(corpus: Path, tmp_path: Path) -> None:
    inputs = discover(str(corpus))
    cfg = CurateConfig(sr=16000, batch_size=4, max_duration=60.0, workers=2)
    summary = curate(inputs, tmp_path / "out", cfg)
    t = pq.read_table(tmp_path / "out" / "curated.parquet")
    rows = {r["key"]: r for r in t.to_pylist()}
    assert sorted(rows) == sorted(inputs.keys)  # every row present, once
    assert "sub/good0.flac" in rows and "good0.flac" in rows
    for key, r in rows.items():
        assert r["error_type"] == EXPECTED_ERRORS.get(key), key
        if r["error_type"] is None:
            assert r["sr"] == 16000 and r["duration"] > 0
            assert r["error_message"] is None
            # Decoded rows pass or fail on the quality filters and the
            # minimum duration (1 s by default) alone.
            short = r["duration"] < 1.0
            assert r["passed"] == (r["quality_pass"] and not short), key
            assert ("too_short" in (r["reasons"] or [])) == short, key
        else:
            assert key in r["error_message"] and not r["passed"]
    assert not rows["silent.wav"]["passed"] and rows["silent.wav"]["reasons"]
    assert rows["eight.wav"]["channels"] == 8
    assert rows["one.wav"]["frames"] == 2  # ceil(1 * 16000 / 8000)
    assert rows["long.wav"]["truncated"] and rows["long.wav"]["duration"] == pytest.approx(60.0)
    assert rows["silent.wav"]["rms_dbfs"] == -np.inf
    assert rows["good1.flac"]["rms_dbfs"] == pytest.approx(20 * np.log10(0.3 / np.sqrt(2)), abs=0.2)
    assert summary["counts"]["failed"] == len(EXPECTED_ERRORS)
    assert summary["counts"]["rows"] == len(inputs.keys)
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary


def test_features_are_sharded(corpus: Path, tmp_path: Path) -> None:
    inputs = discover(str(corpus / "good*.flac"))
    assert len(inputs.keys) == 5
    curate(inputs, tmp_path / "o", CurateConfig(features="bat", batch_size=2, part_rows=2))
    shards = sorted((tmp_path / "o" / "features").glob("part-*.parquet"))
    assert len(shards) == 3
    f = pa.concat_tables(pq.read_table(s) for s in shards)
    assert sorted(f.column("key").to_pylist()) == sorted(inputs.keys)
    n = int(np.ceil(1.5 * 32000))
    shape = (4, 1 + n // 320, 128)
    for i in range(f.num_rows):
        a = feature_array(f.column("features"), i)
        assert a is not None and a.shape == shape and a.dtype == np.float32
    rows = pq.read_table(tmp_path / "o" / "curated.parquet")
    assert rows.column("features_shape").to_pylist() == [list(shape)] * 5


def test_existing_run_needs_resume(corpus: Path, tmp_path: Path) -> None:
    inputs = discover(str(corpus / "good*.flac"))
    curate(inputs, tmp_path / "o", CurateConfig())
    with pytest.raises(ParameterError, match="resume"):
        curate(inputs, tmp_path / "o", CurateConfig())
    again = curate(inputs, tmp_path / "o", CurateConfig(resume=True))
    assert again["this_run"]["files"] == 0 and again["counts"]["rows"] == 5


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "agl_fast.cli", "curate", *args]


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        sf.write(src / f"c{i:02d}.flac", _tone(44100, 4.0, 2, i), 44100, subtype="PCM_16")
    (src / "bad.mp3").write_bytes(b"junk" * 100)
    common = [str(src), "--batch-size", "2", "--part-rows", "2", "--workers", "1", "--quiet"]
    common += ["--features", "efficientat"]
    ref = subprocess.run(_cli([*common, "--out", str(tmp_path / "ref")]), capture_output=True)
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "killed"
    parts = out / "parts"
    with subprocess.Popen(_cli([*common, "--out", str(out)]), stderr=subprocess.DEVNULL) as proc:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(parts.glob("part-*.parquet"))) < 3:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    n_parts = len(list(parts.glob("part-*.parquet")))
    assert 3 <= n_parts < 21, "the kill must land mid-run"
    assert not (out / "curated.parquet").exists()
    res = subprocess.run(_cli([*common, "--out", str(out), "--resume"]), capture_output=True)
    assert res.returncode == 0, res.stderr
    a = pq.read_table(tmp_path / "ref" / "curated.parquet").sort_by("key")
    b = pq.read_table(out / "curated.parquet").sort_by("key")
    assert a.equals(b)
    fa = pq.read_table(tmp_path / "ref" / "features").sort_by("key")
    fb = pq.read_table(out / "features").sort_by("key")
    assert fa.equals(fb)


def test_cli_demo_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["curate", "--demo", "--quiet", "--out", str(tmp_path / "d")]) == 0
    t = pq.read_table(tmp_path / "d" / "curated.parquet")
    kinds = {
        k: e
        for k, e in zip(
            t.column("key").to_pylist(), t.column("error_type").to_pylist(), strict=True
        )
    }
    assert kinds["bad/nan.wav"] == "NonFiniteError"
    assert kinds["bad/empty.wav"] == "AudioDecodeError"
    assert sum(e is None for e in kinds.values()) >= 8


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["curate", "--out", str(tmp_path)]) == 2
    assert "INPUT" in capsys.readouterr().err
    assert main(["curate", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2


def test_manifest_with_duplicate_keys_is_refused(tmp_path: Path) -> None:
    m = tmp_path / "m.csv"
    m.write_text("key,path\na,x.wav\na,y.wav\n")
    with pytest.raises(ParameterError, match="unique"):
        read_manifest(m)


@pytest.mark.skipif(not MP3S, reason="../shared/agl1k is not available")
def test_agl1k_manifest(tmp_path: Path) -> None:
    inputs = read_manifest(AGL1K / "geoLocalization_schema.csv", AGL1K)
    assert len(inputs.keys) == 1444
    keep = {"aporee_26839_30948", "aporee_5201_6631", "aporee_43130_49161"}
    idx = [i for i, k in enumerate(inputs.keys) if k in keep]
    sub = type(inputs)(
        [inputs.keys[i] for i in idx],
        [inputs.paths[i] for i in idx],
        {c: [v[i] for i in idx] for c, v in inputs.extra.items()},
    )
    curate(sub, tmp_path / "o", CurateConfig(sr=16000, mono=True, workers=2))
    rows = {r["key"]: r for r in pq.read_table(tmp_path / "o" / "curated.parquet").to_pylist()}
    assert rows["aporee_26839_30948"]["duration"] == pytest.approx(128.1, abs=0.05)
    assert rows["aporee_26839_30948"]["country"] == "Morocco"
    assert isinstance(rows["aporee_5201_6631"]["latitude"], float)
    missing = [r for r in rows.values() if r["error_type"] is not None]
    assert all(r["error_type"] == "FileNotFound" for r in missing)


class _Loudest:
    """A tagging-like stage: one label per clip."""

    name = "loudest_channel"

    def __call__(self, clips: Clips) -> dict[str, list[int]]:
        return {"loudest_channel": [int(np.argmax(np.abs(y).max(axis=1))) for y in clips.audio]}


class _Broken:
    name = "broken"

    def __call__(self, clips: Clips) -> dict[str, list[int]]:
        raise RuntimeError("model file missing")


def test_custom_stages_add_columns_or_record_errors(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    y = _tone(16000, 0.5, 2, 0)
    y[:, 0] *= 0.1
    sf.write(d / "a.wav", y, 16000)
    (d / "b.wav").write_bytes(b"")
    curate(discover(str(d)), tmp_path / "o", CurateConfig(sr=16000), stages=[_Loudest(), _Broken()])
    rows = {r["key"]: r for r in pq.read_table(tmp_path / "o" / "curated.parquet").to_pylist()}
    assert rows["a.wav"]["loudest_channel"] == 1
    assert rows["b.wav"]["loudest_channel"] is None
    assert rows["a.wav"]["stage_error"] == "broken: RuntimeError: model file missing"
    assert rows["b.wav"]["stage_error"] is None
