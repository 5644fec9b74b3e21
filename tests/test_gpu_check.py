"""``scripts/gpu_check.py --tiny``: the GPU check's code runs on the CPU and
writes every figure it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")  # the OWL section's decoder
pytest.importorskip("peft")

import agl_fast

ROOT = Path(__file__).resolve().parents[1]
# the folder of the agl_fast under test (the installed wheel in CI, the
# source tree with a built module in development): what a child imports
PKG_ROOT = str(Path(agl_fast.__file__).resolve().parents[1])


def test_gpu_check_tiny_runs_on_the_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "PYTHONPATH": PKG_ROOT, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--tiny",
                        "--out", str(out)], capture_output=True, text=True, env=env,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rep = json.loads(out.read_text())
    assert rep["tiny"] and rep["device"] == "cpu"
    tag = rep["tagging"]
    assert tag["model"] == "mn10_as" and tag["features_included"]
    assert tag["provider"] == "CPUExecutionProvider"
    assert set(tag["windows_per_s"]) == {"1", "2", "4"}
    assert all(v > 0 for v in tag["windows_per_s"].values())
    train, ev = rep["sage"]["train"], rep["sage"]["eval"]
    assert train["batch"] == 8 and train["precision"] == "bf16" and train["steps"] == 6
    assert train["steps_per_s"] > 0 and train["model_only_steps_per_s"] > 0
    assert ev["clips"] == 16 and ev["clips_per_s"] > 0
    owl = rep["owl"]
    assert owl["batch"] == 2 and owl["steps"] == 3 and owl["steps_per_s"] > 0
    assert owl["tokens"] == 64 + 16  # the audio queries and the text
    assert 0 < owl["trainable"] < owl["total_parameters"]


def test_gpu_check_only_runs_the_sections_named(tmp_path):
    out = tmp_path / "only.json"
    env = {**os.environ, "PYTHONPATH": PKG_ROOT, "OMP_NUM_THREADS": "1"}
    script = str(ROOT / "scripts" / "gpu_check.py")
    r = subprocess.run([sys.executable, script, "--tiny", "--only", "owl", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rep = json.loads(out.read_text())
    assert "owl" in rep and "tagging" not in rep and "sage" not in rep
    bad = subprocess.run([sys.executable, script, "--tiny", "--only", "owl,gpu"],
                         capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert bad.returncode == 2 and "--only takes sections of" in bad.stderr
