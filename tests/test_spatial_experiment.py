"""The CPU localisation experiment's parts: source bank splits, a tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("pyroomacoustics")
from scipy.io import wavfile

from agl_fast.exceptions import ParameterError
from agl_fast.sage.experiment import brir_pool, run_experiment
from agl_fast.sage.recipes import ExperimentConfig, experiment_config
from agl_fast.spatial.sources import SourceBank

pytestmark = pytest.mark.torch


def test_source_bank_keeps_train_and_test_recordings_apart(tmp_path):
    # A recording whose sample values give their position: train segments must
    # come from the first 80 %, test segments from the last 20 %.
    n = 16000 * 10
    ramp = (np.arange(n) / n * 0.9 + 0.05).astype(np.float32)
    wavfile.write(tmp_path / "ramp.wav", 16000, ramp)
    bank = SourceBank(0.5, sr=16000, recordings=[tmp_path / "ramp.wav"], speech=False)
    assert bank.kinds[-1] == "recording" and "speech" not in bank.kinds
    rng = np.random.default_rng(0)
    seen = {"train": [], "test": []}
    for split in seen:
        for _ in range(60):
            y, kind = bank.draw(rng, split)
            assert y.shape == (8000,) and y.dtype == np.float32
            if kind == "recording":
                seen[split].append(y)
    assert seen["train"] and seen["test"]
    assert max(float(y.max()) for y in seen["train"]) <= 0.05 + 0.9 * 0.8 + 1e-3
    assert min(float(y.min()) for y in seen["test"]) >= 0.05 + 0.9 * 0.8 - 1e-3
    with pytest.raises(ValueError, match="split must be"):
        bank.draw(rng, "valid")


def test_brir_pool_labels_follow_rooms():
    brirs, labels = brir_pool([5, 6], positions=3, receiver="two_mic")
    assert len(brirs) == len(labels) == 6
    assert [lab["room"] for lab in labels] == [5] * 3 + [6] * 3
    assert all(h.shape[0] == 2 and h.dtype == np.float32 for h in brirs)
    assert len({lab["azimuth"] for lab in labels}) > 1


def test_tiny_experiment_runs_and_reports(tmp_path):
    cfg = ExperimentConfig(
        minutes=5, train_rooms=3, test_rooms=1, positions=2, receiver="two_mic",
        embed_dim=32, depth=1, num_heads=2, batch_size=4, steps=3, warmup=1,
        workers=1, speech=False, clip_seconds=0.5,
    )  # fmt: skip
    m = run_experiment(cfg, tmp_path, log=None)
    assert m["steps"] == 3 and m["brirs"] == {"train": 6, "test": 2}
    for part in ("held_out_rooms", "training_rooms"):
        assert m[part]["clips"] == 2
        assert 0 <= m[part]["azimuth_error_deg"] <= 180
        assert set(m[part]) >= {"direction_error_deg", "lateral_error_deg", "distance_error_rate"}
    assert json.loads((tmp_path / "metrics.json").read_text())["steps"] == 3
    assert (tmp_path / "checkpoint.pt").stat().st_size > 0
    assert "geo_loss" not in m["held_out_rooms"] and m["stage1_steps"] == 0


def test_owl_recipe_comes_from_the_training_recipes():
    from agl_fast.sage.recipes import RECIPES

    owl, base = experiment_config("owl", lr=3e-4), experiment_config()
    r = RECIPES["owl"]
    assert (owl.alpha, owl.eta, owl.betas, owl.grad_clip) == (r.alpha, r.eta, r.betas, r.grad_clip)
    assert (owl.stage1_share, owl.geo_reduction, owl.batch_size) == (0.4, "sum", 64)
    assert owl.lr == 3e-4 and owl.recipe == "owl"
    assert base == ExperimentConfig() and base.stage1_share == 0
    with pytest.raises(ParameterError, match="recipe must be one of"):
        experiment_config("sage")


def test_tiny_experiment_trains_the_rir_branch_in_two_stages(tmp_path):
    import torch

    cfg = experiment_config(
        "owl", minutes=5, train_rooms=3, test_rooms=1, positions=2, receiver="two_mic",
        embed_dim=32, depth=1, num_heads=2, batch_size=4, steps=5, warmup=1,
        workers=1, speech=False, clip_seconds=0.5, rir_length=256, rir_width=2,
    )  # fmt: skip
    m = run_experiment(cfg, tmp_path, log=None)
    # Steps 0 and 1 (40 % of 5) are the first stage: no L_geo there.
    assert m["steps"] == 5 and m["stage1_steps"] == 2
    assert m["first_train_geo_loss"] > 0 and m["final_train_geo_loss"] > 0
    for part in ("held_out_rooms", "training_rooms"):
        assert m[part]["clips"] == 2 and m[part]["geo_loss"] > 0
    state = torch.load(tmp_path / "checkpoint.pt")
    assert state["model_config"]["rir_length"] == 256
    assert "rir_decoder.depth_encoder.stem.0.weight" in state["model"]
    log = (tmp_path / "log.txt").read_text()
    assert "RIR branch" in log and "recipe owl" in log


def test_experiment_refuses_a_bad_rir_length(tmp_path):
    cfg = ExperimentConfig(rir_length=100, train_rooms=1, test_rooms=1, workers=1)
    with pytest.raises(ParameterError, match="rir_length must be 0 or a positive multiple"):
        run_experiment(cfg, tmp_path, log=None)


def test_cli_reports_a_bad_rir_length_in_one_line(tmp_path, capsys):
    import torch

    from agl_fast.cli import main

    argv = ["spatial", "experiment", "--out", str(tmp_path), "--rir-length", "100",
            "--threads", str(torch.get_num_threads())]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: rir_length must be 0 or a positive multiple of 32, got rir_length=100"]


def test_owl_warm_up_ends_with_the_first_stage_at_the_latest():
    from agl_fast.sage.experiment import _warmup

    owl, base = experiment_config("owl"), experiment_config()
    assert owl.warmup == 5000
    # 5000 steps are more than a CPU run makes: the first stage (40 %) ends it.
    assert _warmup(10, 0.2, owl) == pytest.approx(0.5)
    assert _warmup(10, 0.4, owl) == 1.0
    assert _warmup(4999, 0.1, owl) == 1.0
    # One stage: the warm-up counts steps only.
    assert _warmup(49, 0.9, base) == pytest.approx(0.5)
    assert _warmup(99, 0.0, base) == 1.0
