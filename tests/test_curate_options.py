"""Quality thresholds and the fraction scheme: from ``agl-fast curate`` flags and
the benchmark TOML down to the stages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sf = pytest.importorskip("soundfile")

import agl_fast  # noqa: E402
import agl_fast.quality  # noqa: E402
from agl_fast.cli import main  # noqa: E402
from agl_fast.exceptions import ParameterError  # noqa: E402
from agl_fast.localizability.benchmark import curate_filter_args as _filter_args  # noqa: E402
from agl_fast.pipeline import BatchConfig, process_batch  # noqa: E402
from agl_fast.pipeline.batch import build_stages  # noqa: E402
from agl_fast.quality import DEFAULT_THRESHOLDS  # noqa: E402

SR = 16000


@pytest.fixture
def noise_dir(tmp_path: Path) -> Path:
    """One second of white noise at 0.1 RMS: noise-like (flatness about 0.99)."""
    d = tmp_path / "in"
    d.mkdir()
    y = 0.1 * np.random.default_rng(5).standard_normal(SR)
    sf.write(d / "noise.wav", y.astype(np.float32), SR, subtype="FLOAT")
    return d


def _row(out: Path) -> dict:
    return pq.read_table(out / "curated.parquet").to_pylist()[0]


def test_curate_thresholds_from_flags(noise_dir: Path, tmp_path: Path) -> None:
    base = ["curate", str(noise_dir), "--quiet", "--workers", "0", "--sr", str(SR)]
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    r = _row(tmp_path / "a")
    assert r["reasons"] == ["noise_like"] and r["flatness"] > 0.9 and not r["quality_pass"]
    assert main([*base, "--out", str(tmp_path / "b"), "--flatness-ceiling", "1.0"]) == 0
    assert _row(tmp_path / "b")["quality_pass"]
    args = ["--out", str(tmp_path / "c"), "--flatness-ceiling", "1", "--rms-floor", "0.2"]
    assert main([*base, *args]) == 0
    assert _row(tmp_path / "c")["reasons"] == ["low_rms"]
    params = json.loads((tmp_path / "c" / "summary.json").read_text())["parameters"]
    assert params["quality_thresholds"] == {
        **DEFAULT_THRESHOLDS, "flatness_ceiling": 1.0, "rms_floor": 0.2}  # fmt: skip
    assert params["fraction_scheme"] == "segments10"


def test_curate_help_shows_the_library_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["curate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name, v in DEFAULT_THRESHOLDS.items():
        assert f"--{name.replace('_', '-')} " in out
        assert f"(default: {v})" in out
    assert "--fraction-scheme {segments10,time}" in out and "(default: segments10)" in out


def test_batch_config_passes_thresholds_and_scheme(noise_dir: Path) -> None:
    table = pa.table({"path": [str(noise_dir / "noise.wav")]})
    loose = BatchConfig(sr=SR, quality_thresholds={"flatness_ceiling": 1.0})
    assert loose.thresholds()["rms_floor"] == DEFAULT_THRESHOLDS["rms_floor"]
    assert process_batch(table, loose).column("quality_pass").to_pylist() == [True]
    assert process_batch(table, BatchConfig(sr=SR)).column("quality_pass").to_pylist() == [False]
    with pytest.raises(ParameterError, match="unknown quality threshold 'rms'"):
        BatchConfig(quality_thresholds={"rms": 0.1}).validate()
    with pytest.raises(ParameterError, match="fraction_scheme must be one of"):
        BatchConfig(fraction_scheme="segments5").validate()
    stages = build_stages(BatchConfig(sr=32000, tag=("speech",), fraction_scheme="time"))
    (speech,) = [s for s in stages if s.name == "tagging_speech"]
    assert speech.tagger.fraction_scheme == "time"  # type: ignore[attr-defined]
    stages = build_stages(BatchConfig(sr=32000, tag=("speech",)))
    (speech,) = [s for s in stages if s.name == "tagging_speech"]
    assert speech.tagger.fraction_scheme == "segments10"  # type: ignore[attr-defined]


def test_benchmark_config_filter_section() -> None:
    cur = {"fraction_scheme": "time", "thresholds": {"rms_floor": 0.002, "complexity_floor": 50}}
    want = ["--fraction-scheme", "time", "--rms-floor", "0.002", "--complexity-floor", "50.0"]
    assert _filter_args(cur) == want
    assert _filter_args({}) == []
    with pytest.raises(ParameterError, match=r"unknown \[curate\.thresholds\] 'rms'"):
        _filter_args({"thresholds": {"rms": 1}})
    with pytest.raises(ParameterError, match="must be a number"):
        _filter_args({"thresholds": {"rms_floor": "low"}})


def test_curate_reads_manifests_with_the_manifest_module(noise_dir: Path, tmp_path: Path) -> None:
    from agl_fast.pipeline import read_manifest

    m = tmp_path / "m.csv"
    m.write_text("id,audio,latitude,city\nn1,noise.wav,48.5,Paris\nn2,,,\n")
    inputs = read_manifest(m, noise_dir)
    assert inputs.keys == ["n1", "n2"]  # the 'id' alias, as everywhere else
    assert inputs.paths == [str(noise_dir / "noise.wav"), ""]
    assert inputs.extra == {"latitude": [48.5, None], "city": ["Paris", None]}
    out = tmp_path / "o"
    base = ["curate", "--manifest", str(m), "--audio-dir", str(noise_dir), "--out", str(out)]
    assert main([*base, "--quiet", "--workers", "0", "--sr", str(SR)]) == 0
    rows = {r["key"]: r for r in pq.read_table(out / "curated.parquet").to_pylist()}
    assert rows["n1"]["latitude"] == 48.5 and rows["n1"]["city"] == "Paris"
    assert rows["n1"]["error_type"] is None and rows["n2"]["error_type"] is not None
    (tmp_path / "m.txt").write_text("key,path\na,b.wav\n")
    with pytest.raises(ParameterError, match=r"unknown format '\.txt'"):
        read_manifest(tmp_path / "m.txt")


def test_quality_stage_runs_on_the_batch_threads(
    noise_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A curate worker has one native thread: the quality filters run on the
    # batch's thread count too (spied through, not replaced), with the same
    # rows whatever that count.
    import agl_fast.quality as quality

    seen: list[int | None] = []
    real = quality.quality_filter

    def spy(*args: object, n_threads: int | None = None, **kw: object) -> pa.Table:
        seen.append(n_threads)
        return real(*args, n_threads=n_threads, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(quality, "quality_filter", spy)
    table = pa.table({"path": [str(noise_dir / "noise.wav")] * 3})
    one = process_batch(table, BatchConfig(sr=SR, threads=1))
    two = process_batch(table, BatchConfig(sr=SR, threads=2))
    assert seen == [1, 2]
    assert one.equals(two)


@pytest.mark.parametrize("mono", [True, False])
def test_quality_columns_equal_the_filter_on_the_decoded_audio(
    tmp_path: Path, mono: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With mono output the quality stage takes rms, clipping_ratio and
    # full_scale_ratio from the decoder's levels instead of scanning the
    # clips again: every column must be what the filter gives on its own.
    rng = np.random.default_rng(8)
    clipped = np.clip(1.6 * rng.standard_normal((2 * SR, 2)), -1, 1).astype(np.float32)
    clipped[5, 0] = 0.9995  # at or above 0.999 but below the peak
    quiet = (0.01 * rng.standard_normal((SR + 123, 2))).astype(np.float32)
    silent = np.zeros((SR, 2), np.float32)
    paths = []
    for name, y in (("clipped", clipped), ("quiet", quiet), ("silent", silent)):
        paths.append(str(tmp_path / f"{name}.wav"))
        sf.write(paths[-1], y, SR, subtype="FLOAT")
    real = agl_fast.quality.quality_filter
    reused: list[bool] = []

    def spy(*args: object, **kw: object) -> pa.Table:
        reused.append("clip_stats" in kw)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(agl_fast.quality, "quality_filter", spy)
    out = process_batch(pa.table({"path": paths}), BatchConfig(sr=SR, mono=mono))
    monkeypatch.undo()
    assert reused == [mono]
    arrays, _ = agl_fast.load_arrays(paths, sr=SR, mono=mono)
    clips = [a.mean(axis=0, dtype=np.float32) if a.shape[0] > 1 else a[0] for a in arrays]
    want = agl_fast.quality.quality_filter(clips, sr=SR)
    assert out.column("clipping_ratio")[0].as_py() > 0.1
    for name in (*agl_fast.quality.METRICS, "passed"):
        got = out.column("quality_pass" if name == "passed" else name)
        assert got.equals(want.column(name)), name
