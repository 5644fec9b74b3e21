"""The CPU localisation experiment's parts: source bank splits, a tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("pyroomacoustics")
from scipy.io import wavfile

from agl_fast.spatial.experiment import ExperimentConfig, brir_pool, run_experiment
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
