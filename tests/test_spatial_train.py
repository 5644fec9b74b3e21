"""A few SAGE training steps on a tiny simulated dataset: the loss falls and a
resumed run continues exactly as an uninterrupted one."""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("pyroomacoustics")

import torch
from torch.nn import functional as F

from agl_fast.cli import main
from agl_fast.exceptions import ParameterError
from agl_fast.sage.model import SageConfig, SageEncoder
from agl_fast.sage.recipes import RECIPES, TrainConfig, learning_rate, recipe
from agl_fast.sage.train import evaluate, load_split, train
from agl_fast.spatial.dataset import build_dataset
from agl_fast.spatial.metrics import angular_error, mean_average_precision

pytestmark = pytest.mark.torch

TINY = SageConfig(embed_dim=32, depth=1, num_heads=2, target_frame=64)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("spatial_ds")
    build_dataset(root, 10, seed=3, seconds=0.5, receiver="two_mic", max_sources=1)
    return root


def _cfg(steps):
    return TrainConfig(steps=steps, batch_size=8, lr=3e-3, warmup=2, checkpoint_every=4,
                       log_every=100)  # fmt: skip


def test_loss_falls(data, tmp_path):
    tr = load_split(data, "train")
    assert tr["x"].shape == (8, 4, 51, 128)
    torch.manual_seed(0)
    before = evaluate(
        SageEncoder(SageConfig(**{**TINY.to_dict(), "num_classes": len(tr["vocab"])})), tr
    )["loss"]
    _, metrics = train(data, tmp_path / "run", model_config=TINY, config=_cfg(30), log=None)
    assert metrics["train"]["loss"] < 0.8 * before
    assert set(metrics["test"]) >= {"loss", "azimuth_error_deg", "distance_error_rate"}
    # OWL's Table 2 measures on held-out rooms, from the model's own outputs.
    model = SageEncoder(SageConfig(**{**TINY.to_dict(), "num_classes": len(tr["vocab"])}))
    model.load_state_dict(torch.load(tmp_path / "run" / "checkpoint.pt")["model"])
    model.eval()
    te = load_split(data, "test", tr["vocab"])
    with torch.no_grad():
        ev, _, az, el, _ = model(te["x"])
    err = angular_error(az.argmax(1).numpy(), el.argmax(1).numpy(),
                        te["azimuth"].numpy(), te["elevation"].numpy())  # fmt: skip
    assert metrics["test"]["er20"] == pytest.approx(float((err > 20).mean()))
    assert metrics["test"]["direction_error_deg"] == pytest.approx(float(err.mean()), rel=1e-6)
    ap = mean_average_precision(te["events"].numpy(), ev.numpy())
    assert metrics["test"]["map"] == pytest.approx(ap, nan_ok=True)
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["step"] == 30


def test_resume_matches_an_uninterrupted_run(data, tmp_path):
    cfg = dataclasses.replace(_cfg(8), log_every=2)
    full, _ = train(data, tmp_path / "a", model_config=TINY, config=cfg, log=None)
    train(data, tmp_path / "b", model_config=TINY, config=cfg, until=4, log=None)
    ckpt = torch.load(tmp_path / "b" / "checkpoint.pt", map_location="cpu")
    assert ckpt["step"] == 4
    resumed, m = train(data, tmp_path / "b", model_config=TINY, config=cfg, resume=True, log=None)
    assert m["step"] == 8
    for k, v in full.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[k], v, msg=k)
    # The training curve is written once per logged step, resumed or not.
    curves = [
        [json.loads(x) for x in (tmp_path / r / "history.jsonl").read_text().splitlines()]
        for r in ("a", "b")
    ]
    assert [c["step"] for c in curves[0]] == list(range(2, 9, 2))
    for got, want in zip(curves[1], curves[0], strict=True):
        assert got["step"] == want["step"] and got["lr"] == want["lr"]
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)


def test_cli_train_and_export(data, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    onnx_path = tmp_path / "m.onnx"
    args = ["spatial", "train", "--data", str(data), "--out", str(tmp_path / "r")]
    args += ["--steps", "2", "--dim", "32", "--depth", "1", "--heads", "2"]
    args += ["--target-frame", "64", "--export", str(onnx_path)]
    # The RIR branch, the paper's loss weights and the masks from the command line.
    args += ["--rir-length", "256", "--rir-width", "4", "--eta", "1", "0.5", "--geo-lambda", "0.2"]
    args += ["--recipe", "owl", "--batch-size", "8", "--warmup", "1"]
    args += ["--freq-mask", "8", "--time-mask", "4", "--sigma-azimuth", "5"]
    assert main(args) == 0
    metrics = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert metrics["step"] == 2 and metrics["test"]["geo_loss"] > 0
    ckpt = torch.load(tmp_path / "r" / "checkpoint.pt", map_location="cpu")
    assert ckpt["model_config"]["rir_length"] == 256 and ckpt["model_config"]["freq_mask"] == 8
    assert ckpt["model_config"]["rir_depth"] and ckpt["model_config"]["rir_width"] == 4
    # The recipe's optimizer settings, with the command line's batch size.
    group = ckpt["optimizer"]["param_groups"][0]
    assert group["betas"] == (0.9, 0.95) and group["weight_decay"] == 0.01
    assert onnx_path.stat().st_size > 0


GEO = SageConfig(**{**TINY.to_dict(), "rir_length": 512, "rir_width": 4,
                    "freq_mask": 16, "time_mask": 8})  # fmt: skip


def test_rir_branch_loss_falls_and_resumes_exactly(data, tmp_path):
    cfg = TrainConfig(steps=14, batch_size=8, lr=3e-3, warmup=2, checkpoint_every=7,
                      log_every=100, eta=(1.0, 1.0), geo_reduction="sum")  # fmt: skip
    tr = load_split(data, "train", rir_length=512)
    assert tr["rir"].shape == (8, 2, 512) and tr["geometry"].shape == (8, 10)
    assert tr["depth"].shape == (8, 64, 256) and float(tr["depth"].min()) > 0
    torch.manual_seed(0)
    mcfg = SageConfig(**{**GEO.to_dict(), "num_classes": len(tr["vocab"])})
    before = evaluate(SageEncoder(mcfg), tr, cfg)
    full, m = train(data, tmp_path / "a", model_config=GEO, config=cfg, log=None)
    assert m["train"]["geo_loss"] < 0.8 * before["geo_loss"]
    assert m["train"]["loss"] < 0.8 * before["loss"]
    assert "geo_loss" in m["test"]
    train(data, tmp_path / "b", model_config=GEO, config=cfg, until=7, log=None)
    resumed, _ = train(data, tmp_path / "b", model_config=GEO, config=cfg, resume=True, log=None)
    sd = resumed.state_dict()
    assert any(k.startswith("rir_decoder.") for k in sd)
    for k, v in full.state_dict().items():
        torch.testing.assert_close(sd[k], v, msg=k)


def test_paper_loss_weights_are_the_defaults():
    cfg = TrainConfig()
    assert cfg.alpha == (1.0, 1.0, 2.0) and cfg.eta == (1.0, 0.01)
    assert cfg.geo_lambda == 0.1
    assert RECIPES["agl-fast"] == cfg


def test_owl_recipe_is_appendix_c1():
    owl = recipe("owl", steps=1000)
    assert (owl.lr, owl.weight_decay, owl.betas, owl.grad_clip) == (1e-4, 0.01, (0.9, 0.95), 1.0)
    assert owl.batch_size == 64 and owl.alpha == (1250.0, 1.0, 2.0) and owl.eta == (1.0, 0.01)
    assert owl.stage1_steps == 400 and owl.alpha_stage1 == (1.0, 0.0, 0.0)
    assert owl.geo_reduction == "sum"
    # Warm-up within stage 1 (5000 steps at most), then half-cycle cosine.
    assert learning_rate(0, owl) == pytest.approx(1e-4 / 400) and learning_rate(
        399, owl
    ) == pytest.approx(1e-4)
    assert (
        learning_rate(700, owl) == pytest.approx(0.5e-4, rel=0.01)
        and learning_rate(999, owl) < 1e-8
    )
    assert recipe("owl", lr=None).lr == 1e-4 and recipe("owl", lr=3e-4).lr == 3e-4
    with pytest.raises(ParameterError, match="recipe"):
        recipe("bat")


def test_stage1_trains_the_event_loss_only(data):
    tr = load_split(data, "train", rir_length=512)
    torch.manual_seed(0)
    mcfg = SageConfig(**{**GEO.to_dict(), "num_classes": len(tr["vocab"])})
    model = SageEncoder(mcfg).eval()  # no random masks: the same forward twice
    cfg = recipe("owl", steps=10)
    from agl_fast.sage.train import _losses

    idx = torch.arange(4)
    first = _losses(model, tr, idx, cfg, step=0)
    assert "geo" not in first
    torch.testing.assert_close(
        first["loss"],
        F.binary_cross_entropy_with_logits(model(tr["x"][idx])[0], tr["events"][idx]),
        rtol=1e-4, atol=1e-5,
    )  # fmt: skip
    assert "geo" in _losses(model, tr, idx, cfg, step=cfg.stage1_steps)


def test_soft_targets_wrap_around_the_circle():
    from agl_fast.sage.train import soft_cross_entropy, soft_targets

    t = soft_targets(torch.tensor([0, 180]), 360, 10.0, circular=True)
    torch.testing.assert_close(t.sum(1), torch.ones(2))
    assert t[0, 359] == t[0, 1] and t[0, 10] == t[0, 350] and int(t[0].argmax()) == 0
    torch.testing.assert_close(t[1], torch.roll(t[0], 180))
    line = soft_targets(torch.tensor([0]), 21, 1.0)
    assert line[0, 20] < 1e-40 and line[0, 1] > line[0, 2]
    hard = soft_targets(torch.tensor([3]), 21, 0.0)
    assert hard.sum() == 1 and hard[0, 3] == 1
    logits = torch.randn(4, 21)
    y = torch.tensor([0, 5, 9, 20])
    torch.testing.assert_close(
        soft_cross_entropy(logits, soft_targets(y, 21, 0.0)), F.cross_entropy(logits, y)
    )


def test_evaluation_in_batches_equals_one_batch(data):
    tr = load_split(data, "train", rir_length=512)
    torch.manual_seed(2)
    model = SageEncoder(SageConfig(**{**GEO.to_dict(), "num_classes": len(tr["vocab"])}))
    cfg = TrainConfig(eta=(1.0, 1.0))
    whole = evaluate(model, tr, cfg, batch_size=len(tr["x"]))
    parts = evaluate(model, tr, cfg, batch_size=3)  # 3 + 3 + 2 rows
    assert set(parts) == set(whole) and "geo_loss" in parts
    for k, v in whole.items():
        assert parts[k] == pytest.approx(v, rel=1e-5, abs=1e-6, nan_ok=True), k
