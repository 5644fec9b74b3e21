"""SAGE's RIR branch (shapes, L_geo, checkpoints, ONNX) and training-only masks."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

import torch

from agl_fast import room
from agl_fast.exceptions import ParameterError
from agl_fast.sage.model import SageConfig, SageEncoder, load_checkpoint
from agl_fast.sage.recipes import GEO_LAMBDA
from agl_fast.sage.rir import GEOMETRY_DIM, ResNet18, RirDecoder, geo_loss
from agl_fast.torch import edc_loss

pytestmark = pytest.mark.torch

TINY = SageConfig(embed_dim=32, depth=1, num_heads=4, num_classes=5, target_frame=64)
# OWL's branch (ResNet-18 depth encoder and decoder), narrow for the tests.
BRANCH = SageConfig(**{**TINY.to_dict(), "rir_length": 512, "rir_width": 4})
ABLATION = SageConfig(**{**TINY.to_dict(), "rir_length": 512, "rir_width": 4,
                         "rir_depth": False, "rir_geometry_dim": GEOMETRY_DIM})  # fmt: skip


def _depth(batch: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(5)
    return 1.0 + 4.0 * torch.rand(batch, 16, 32, generator=g)


def _features(batch: int = 3, frames: int = 51, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 4, frames, 128, generator=g)
    x[:, :2] = x[:, :2] * 10 - 40
    return x


def _decaying(seed: int, shape: tuple[int, ...], t60: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(shape[-1]) / 16000
    return (rng.standard_normal(shape) * np.exp(-6.9 / t60 * t)).astype(np.float32)


def test_resnet18_layout():
    net = ResNet18(1, 64)
    # torchvision's resnet18 without its fc layer: 11,176,512 parameters with
    # three input channels; one input channel saves 2 * 64 * 7 * 7.
    assert sum(p.numel() for p in net.parameters()) == 11_176_512 - 2 * 64 * 49
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3)]
    assert len(convs) == 16  # 8 basic blocks of two 3x3 convolutions
    assert ResNet18(1, 4)(torch.rand(2, 1, 16, 32)).shape == (2, 32)


def test_branch_shapes_and_input_checks():
    torch.manual_seed(0)
    model = SageEncoder(BRANCH).eval()
    x = _features()
    tokens = model.encode(x)
    assert tokens.shape == (3, 3 + (64 // 16) * (128 // 16), 32)
    assert model.predict_rir(tokens, _depth()).shape == (3, 2, 512)
    assert model.predict_rir(tokens, _depth()[:, None]).shape == (3, 2, 512)
    with pytest.raises(ParameterError, match="depth must be"):
        model.predict_rir(tokens)
    ablation = SageEncoder(ABLATION).eval()
    assert ablation.rir_decoder.depth_encoder is None
    assert ablation.predict_rir(tokens, None, torch.randn(3, GEOMETRY_DIM)).shape == (3, 2, 512)
    with pytest.raises(ParameterError, match="geometry must be"):
        ablation.predict_rir(tokens)
    audio_only = RirDecoder(32, 256, width=4, depth=False)
    assert audio_only(tokens).shape == (3, 2, 256)
    with pytest.raises(ParameterError, match="multiple of 32"):
        RirDecoder(32, 100)
    with pytest.raises(ParameterError, match="no RIR branch"):
        SageEncoder(TINY).predict_rir(tokens)
    # The heads do not depend on the branch.
    for a, b in zip(model(x), model.heads(tokens), strict=True):
        torch.testing.assert_close(a, b)


def test_geo_loss_is_l1_plus_lambda_edc():
    pred = _decaying(1, (4, 2, 2000), 0.2)
    ref = _decaying(2, (4, 2, 2000), 0.35)
    got = float(geo_loss(torch.from_numpy(pred).double(), torch.from_numpy(ref).double()))
    # Independent figures: numpy for the L1 norm of Eq. 3 (summed over ears and
    # samples, averaged over the 4 examples), the Rust EDC distance for L_EDC.
    l1 = float(np.sum(np.abs(pred.astype(np.float64) - ref))) / 4
    edc = float(np.mean(room.edc_distance(pred, ref, 16000, method="none", floor_db=-60.0)))
    assert edc > 1.0
    assert got == pytest.approx(l1 + GEO_LAMBDA * edc, rel=1e-4)
    tp, tr = torch.from_numpy(pred), torch.from_numpy(ref)
    assert float(geo_loss(tp, tr, lam=0.0)) == pytest.approx(l1, rel=1e-5)
    mean = float(np.mean(np.abs(pred.astype(np.float64) - ref)))
    assert float(geo_loss(tp, tr, lam=0.0, reduction="mean")) == pytest.approx(mean, rel=1e-5)
    want = (tp - tr).abs().mean() + 0.5 * edc_loss(tp, tr)
    torch.testing.assert_close(geo_loss(tp, tr, lam=0.5, reduction="mean"), want)
    with pytest.raises(ParameterError, match="same shape"):
        geo_loss(tp, tr[..., :100])
    with pytest.raises(ParameterError, match="reduction"):
        geo_loss(tp, tr, reduction="max")


def test_geo_loss_gradient_reaches_the_encoder():
    torch.manual_seed(0)
    model = SageEncoder(BRANCH).train()
    ref = torch.from_numpy(_decaying(3, (3, 2, 512), 0.01))
    loss = geo_loss(model.predict_rir(model.encode(_features()), _depth()), ref)
    loss.backward()
    assert model.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
    assert model.patch_embed.proj.weight.grad.abs().sum() > 0
    assert model.rir_decoder.proj.weight.grad.abs().sum() > 0
    assert model.rir_decoder.depth_encoder.stem[0].weight.grad.abs().sum() > 0


def test_released_encoder_loads_into_a_model_with_the_branch():
    torch.manual_seed(1)
    released = SageEncoder(TINY)
    ckpt = {"model": {"module." + k: v for k, v in released.state_dict().items()}}
    torch.manual_seed(2)
    model = SageEncoder(BRANCH)
    init = {k: v.clone() for k, v in model.state_dict().items() if k.startswith("rir_decoder.")}
    assert init and not any(k.startswith("rir_decoder.") for k in released.state_dict())
    load_checkpoint(model, ckpt)  # strict: only the branch may be missing
    for k, v in released.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    for k, v in init.items():
        assert torch.equal(model.state_dict()[k], v), k
    # A full state with the branch round-trips; into a model without one it is
    # unexpected unless strict=False.
    full = SageEncoder(BRANCH)
    load_checkpoint(full, model.state_dict())
    with pytest.raises(RuntimeError, match="rir_decoder"):
        load_checkpoint(SageEncoder(TINY), model.state_dict())
    load_checkpoint(SageEncoder(TINY), model.state_dict(), strict=False)
    missing = {k: v for k, v in released.state_dict().items() if k != "doa_norm.weight"}
    with pytest.raises(RuntimeError, match=r"doa_norm\.weight"):
        load_checkpoint(SageEncoder(BRANCH), missing)


def test_onnx_export_leaves_the_branch_out(tmp_path):
    # The audio encoder exported from a model with OWL's branch: the same
    # outputs and shapes as without it, and the same values as torch.
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from agl_fast.sage.infer import OUTPUT_NAMES, export_onnx

    torch.manual_seed(0)
    model = SageEncoder(BRANCH).eval()
    path = tmp_path / "branch.onnx"
    export_onnx(model, str(path), frames=51)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == list(OUTPUT_NAMES)
    x = _features()
    got = sess.run(None, {"features": x.numpy()})
    with torch.no_grad():
        ref = model(x)
    for a, b in zip(got, ref, strict=True):
        assert a.shape == tuple(b.shape)
        np.testing.assert_allclose(a, b.numpy(), atol=1e-4, rtol=1e-4)
    plain = tmp_path / "plain.onnx"
    torch.manual_seed(0)
    export_onnx(SageEncoder(TINY).eval(), str(plain), frames=51)
    other = ort.InferenceSession(str(plain), providers=["CPUExecutionProvider"])
    assert [o.shape for o in other.get_outputs()] == [o.shape for o in sess.get_outputs()]
    assert path.stat().st_size == pytest.approx(plain.stat().st_size, rel=0.01)


def test_masks_only_in_training_mode():
    cfg = SageConfig(**{**TINY.to_dict(), "freq_mask": 24, "time_mask": 12, "token_mask": 0.5})
    torch.manual_seed(0)
    masked = SageEncoder(cfg)
    plain = SageEncoder(TINY)
    plain.load_state_dict(masked.state_dict())
    x = _features()
    masked.eval()
    plain.eval()
    with torch.no_grad():
        for a, b in zip(masked(x), plain(x), strict=True):
            torch.testing.assert_close(a, b)
        # Training mode: fewer tokens (half the patches dropped), and the
        # feature masks zero whole bands and frames in all four channels.
        masked.train()
        assert masked.encode(x).shape[1] == 3 + 16
        z = masked._spec_mask(torch.ones(2, 4, 51, 128))
    band_hit = (z == 0).all(dim=2).all(dim=1)  # [batch, mels]
    frame_hit = (z == 0).all(dim=3).all(dim=1)  # [batch, frames]
    assert bool(band_hit.any()) and bool(frame_hit.any())
    assert int(band_hit.sum(dim=1).max()) <= 2 * 24
    assert int(frame_hit.sum(dim=1).max()) <= 2 * 12
    assert torch.equal((z == 0).all(dim=1), (z == 0).any(dim=1))  # same mask per channel
    with torch.no_grad():
        assert plain.train().encode(x).shape[1] == 3 + 32  # no masks configured


def test_ipd_scale_multiplies_the_ipd_channels():
    torch.manual_seed(0)
    scaled = SageEncoder(SageConfig(**{**TINY.to_dict(), "ipd_scale": 31.25})).eval()
    plain = SageEncoder(TINY).eval()
    plain.load_state_dict(scaled.state_dict())
    x = _features()
    y = x.clone()
    y[:, 2:] *= 31.25
    with torch.no_grad():
        for a, b in zip(scaled(x), plain(y), strict=True):
            torch.testing.assert_close(a, b)
