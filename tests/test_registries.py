"""A feature recipe, a quality filter and a stage added at run time by a
plugin module reach ``curate`` and ``features`` with no other change; the
registries refuse malformed entries with a typed error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from agl_fast import presets, quality, quality_filters
from agl_fast.exceptions import ParameterError
from agl_fast.pipeline.stages import FnStage
from agl_fast.tagging import registry as taggers

SR = 16000

PLUGIN = '''
import numpy as np
import pyarrow as pa
from agl_fast.pipeline import register_stage
from agl_fast.pipeline.stages import FnStage
from agl_fast.presets import Recipe, register_recipe
from agl_fast.quality_filters import Filter, register_filter


def toy_rms(batch, *, sr, n_threads=None, output="list"):
    """Per clip a [1, 2] array: its RMS and its sample count."""
    return [np.array([[np.sqrt(np.mean(np.square(y, dtype=np.float64))), y.size]], np.float32)
            for y in batch]


def peak(clips, sr):
    return np.array([float(np.max(np.abs(c))) if len(c) else 0.0 for c in clips])


def toy_stage():
    def run(clips):
        long = [y.shape[-1] >= 2 * clips.sr for y in clips.audio]
        return {"toy_long_enough": pa.array(long, pa.bool_())}

    return FnStage("toy_length", run, ("toy_long_enough",), "toy_long_enough")


register_recipe(Recipe("toy_rms", "mono", toy_rms, "RMS and length per clip"))
register_filter(Filter("toy_peak_ceiling", "toy_peak", "max", 0.9,
                       "reject clips whose peak is above this", "toy_loud", compute=peak))
register_stage("toy_length", toy_stage)
'''


def _wav(path: Path, amplitude: float, seconds: float) -> None:
    t = np.arange(int(seconds * SR)) / SR
    rng = np.random.default_rng(int(amplitude * 100))
    y = amplitude * np.sin(2 * np.pi * 440 * t) * (0.6 + 0.4 * rng.random(t.size))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((y * 32767).astype("<i2").tobytes())


def _run(args: list[str], plugin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), env.get("PYTHONPATH", "")])
    env.pop("AGL_FAST_PLUGINS", None)
    cmd = [sys.executable, "-m", "agl_fast", "--plugin", "toy_plugin", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("plugin")
    (d / "toy_plugin.py").write_text(PLUGIN)
    return d


def test_a_plugin_recipe_runs_through_features(plugin_dir: Path, tmp_path: Path) -> None:
    _wav(tmp_path / "a.wav", 0.5, 3.0)
    r = _run(["features", "--preset", "toy_rms", "--sr", str(SR), str(tmp_path / "a.wav")],
             plugin_dir)  # fmt: skip
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout.splitlines()[0])
    assert row["preset"] == "toy_rms" and row["shape"] == [1, 2]
    # without the plugin the name is unknown: argparse lists the registered ones
    plain = subprocess.run(
        [sys.executable, "-m", "agl_fast", "features", "--preset", "toy_rms", "--demo"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert plain.returncode == 2 and "invalid choice: 'toy_rms'" in plain.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_plugin_recipe_filter_and_stage_run_through_curate(
    plugin_dir: Path, tmp_path: Path, workers: str
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _wav(src / "quiet.wav", 0.3, 3.0)
    _wav(src / "loud.wav", 0.98, 3.0)
    _wav(src / "brief.wav", 0.3, 1.5)
    out = tmp_path / "out"
    r = _run(
        ["curate", "-q", str(src), "--out", str(out), "--sr", str(SR), "--features", "toy_rms",
         "--toy-peak-ceiling", "0.95", "--workers", workers],
        plugin_dir,
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    rows = {Path(x["path"]).stem: x for x in pq.read_table(out / "curated.parquet").to_pylist()}
    assert set(rows) == {"quiet", "loud", "brief"}
    # the recipe: its arrays in the features table, by key
    feats = pq.read_table(out / "features").to_pylist()
    key_of = {x["key"]: Path(x["path"]).stem for x in rows.values()}
    assert {key_of[f["key"]] for f in feats} == set(rows)
    for f in feats:
        name = key_of[f["key"]]
        assert rows[name]["features_shape"] == [1, 2], name
        rms, n = np.asarray(f["features"], np.float32)[0]
        assert n == pytest.approx(SR * (1.5 if name == "brief" else 3.0), abs=2)
        assert 0.1 < rms < 0.9
    # the filter: its metric column, its threshold flag and its reason
    assert rows["loud"]["toy_peak"] > 0.95 > rows["quiet"]["toy_peak"]
    assert "toy_loud" in rows["loud"]["reasons"] and not rows["loud"]["passed"]
    assert "toy_loud" not in rows["quiet"]["reasons"]
    # the stage: its pass column fails the short clip
    assert rows["brief"]["toy_long_enough"] is False and not rows["brief"]["passed"]
    assert rows["quiet"]["toy_long_enough"] is True and rows["quiet"]["passed"]


def test_registered_filter_defaults_are_the_quality_defaults() -> None:
    names = [f.name for f in quality_filters.filters()][:5]
    assert names == [
        "rms_floor", "flatness_ceiling", "clipping_ceiling", "full_scale_ceiling",
        "complexity_floor",
    ]  # fmt: skip
    assert dict(quality.DEFAULT_THRESHOLDS) == quality_filters.defaults()
    assert quality.DEFAULT_THRESHOLDS["rms_floor"] == 1e-3


def test_a_filter_applies_its_own_op_and_reason() -> None:
    f = quality_filters.Filter("x_floor", "x", "min", 1.0, "h", "low_x")
    assert f.fails(np.array([0.5, 1.0, 2.0]), 1.0).tolist() == [True, False, False]
    g = quality_filters.Filter("x_ceiling", "x", "max", 1.0, "h", "high_x")
    assert g.fails(np.array([0.5, 1.0, 2.0]), 1.0).tolist() == [False, False, True]


@pytest.mark.parametrize(
    "bad",
    [
        {"rms": 0.1},
        {"rms_floor": "low"},
        {"rms_floor": True},
        {"rms_floor": float("nan")},
    ],
)
def test_threshold_tables_get_one_validation(bad: dict) -> None:
    with pytest.raises(ParameterError, match="quality threshold"):
        quality_filters.check_thresholds(bad)


def test_registries_refuse_malformed_entries() -> None:
    with pytest.raises(ParameterError, match="registered already"):
        presets.register_recipe(presets.get_recipe("bat"))
    with pytest.raises(ParameterError, match="identifier"):
        presets.register_recipe(presets.Recipe("no name", "mono", len, "h"))
    with pytest.raises(ParameterError, match="'mono' or 'binaural'"):
        presets.register_recipe(presets.Recipe("odd", "stereo", len, "h"))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="op must be"):
        quality_filters.register_filter(quality_filters.Filter("a", "m", "eq", 1, "h", "r"))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="must be a number"):
        quality_filters.register_filter(quality_filters.Filter("a", "m", "min", "x", "h", "r"))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="registered already"):
        taggers.register_tagger(taggers.get_tagger("speech"))
    with pytest.raises(ParameterError, match="needs model"):
        taggers.build_tagger("efficientat")


def test_recipe_input_follows_its_channels() -> None:
    stereo = np.stack([np.ones(8, np.float32), np.zeros(8, np.float32)])
    mono = presets.get_recipe("efficientat").prepare(stereo)
    assert mono.shape == (8,) and np.all(mono == 0.5)
    assert presets.get_recipe("bat").prepare(stereo) is stereo
    with pytest.raises(Exception, match="two-channel"):
        presets.get_recipe("bat").prepare(stereo[:1])
    both = presets.get_recipe("bat").prepare(stereo[:1], "mono-to-binaural")
    assert both.shape == (2, 8)


def test_fn_stage_declares_its_columns() -> None:
    st = FnStage("s", lambda clips: {}, ("a",), "a")
    assert st.columns == ("a",) and st.pass_column == "a"
