"""SAGE encoder: checkpoint names, torch vs ONNX Runtime, inference input checks."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnxruntime
import torch

from agl_fast import bat
from agl_fast._internal.onnx import BackendError
from agl_fast.cli import main
from agl_fast.exceptions import AglError, NonFiniteError, ParameterError, ShapeError
from agl_fast.sage import infer
from agl_fast.sage.model import SageConfig, SageEncoder, load_checkpoint, sincos_pos_embed

HAS_CUDA = "CUDAExecutionProvider" in onnxruntime.get_available_providers()

pytestmark = pytest.mark.torch

TINY = SageConfig(embed_dim=32, depth=2, num_heads=4, num_classes=7)
FRAMES = 101  # 1 s at hop 320


def _spatial_ast_names(depth: int) -> set[str]:
    """Parameter and buffer names of the public Spatial-AST model (its
    ``VisionTransformer`` in ``spatial_ast.py`` on timm's ViT blocks), less the
    in-model STFT / mel weights."""
    names = {"cls_tokens", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias"}
    names |= {"conv_downsample.0.weight"}
    names |= {f"conv_downsample.1.{k}" for k in ("weight", "bias")}
    for bn in ("conv_downsample.1", "bn"):
        names |= {f"{bn}.{k}" for k in ("running_mean", "running_var", "num_batches_tracked")}
    for i in range(depth):
        for sub in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"):
            names |= {f"blocks.{i}.{sub}.weight", f"blocks.{i}.{sub}.bias"}
    for m in ("dis_norm", "doa_norm", "fc_norm", "head", "distance_head"):
        names |= {f"{m}.weight", f"{m}.bias"}
    names |= {"azimuth_head.weight", "azimuth_head.bias"}
    names |= {"elevation_head.weight", "elevation_head.bias"}
    return names


def _tiny_model(seed: int = 0) -> SageEncoder:
    torch.manual_seed(seed)
    m = SageEncoder(TINY)
    with torch.no_grad():  # non-trivial batch-norm statistics
        m.bn.running_mean.copy_(torch.tensor([-30.0, -25.0]))
        m.bn.running_var.copy_(torch.tensor([200.0, 150.0]))
        m.conv_downsample[1].running_mean.fill_(0.3)
        m.conv_downsample[1].running_var.fill_(2.0)
    return m.eval()


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("sage") / "sage.onnx"
    model = _tiny_model()
    infer.export_onnx(model, str(path), frames=FRAMES)
    return model, path


def test_state_dict_names_match_spatial_ast():
    model = SageEncoder(TINY)
    assert set(model.state_dict()) == _spatial_ast_names(TINY.depth)
    full = SageEncoder(SageConfig(depth=1))
    sd = full.state_dict()
    assert sd["pos_embed"].shape == (1, 64 * 8 + 1, 768)
    assert sd["cls_tokens"].shape == (1, 3, 768)
    assert sd["distance_head.weight"].shape == (21, 768)
    assert sd["azimuth_head.weight"].shape == (360, 768)
    assert sd["elevation_head.weight"].shape == (180, 768)


def test_load_checkpoint_accepts_released_layout():
    src = _tiny_model(1)
    ckpt = {"model": {"module." + k: v for k, v in src.state_dict().items()}}
    ckpt["model"]["module.logmel_extractor.melW"] = torch.zeros(513, 128)
    ckpt["model"]["module.spectrogram_extractor.stft.conv_real.weight"] = torch.zeros(1)
    dst = SageEncoder(TINY)
    load_checkpoint(dst, ckpt)
    for k, v in src.state_dict().items():
        assert torch.equal(dst.state_dict()[k], v), k
    bad = {k: v for k, v in src.state_dict().items() if k != "azimuth_head.bias"}
    with pytest.raises(RuntimeError, match=r"azimuth_head\.bias"):
        load_checkpoint(SageEncoder(TINY), bad)


def test_sincos_pos_embed_rows_are_distinct_and_bounded():
    pe = sincos_pos_embed(32, 64, 8)
    assert pe.shape == (513, 32)
    assert torch.all(pe[0] == 0)
    assert torch.all(pe.abs() <= 1)
    body = pe[1:]
    d = torch.cdist(body, body) + torch.eye(512) * 10
    assert float(d.min()) > 1e-3


@pytest.mark.parametrize("frames", [50, 101, 1001, 1024, 1100])
def test_time_resize_equals_torch_bicubic(frames):
    x = torch.randn(2, 4, frames, 128)
    ref = torch.nn.functional.interpolate(x, (1024, 128), mode="bicubic", align_corners=True)
    torch.testing.assert_close(SageEncoder(TINY)._resize_time(x), ref, atol=1e-5, rtol=1e-5)


def test_forward_shapes_and_gradients():
    model = SageEncoder(TINY).train()
    x = torch.randn(3, 4, 50, 128)
    outs = model(x)
    assert [tuple(o.shape) for o in outs] == [(3, 7), (3, 21), (3, 360), (3, 180), (3, 3, 32)]
    sum(o.sum() for o in outs[:4]).backward()
    assert model.cls_tokens.grad is not None and model.pos_embed.grad is None


def test_torch_and_onnxruntime_agree(onnx_model, rng):
    model, path = onnx_model
    session = infer.SageSession(str(path), allow_cpu=True)
    assert session.provider == "CPUExecutionProvider"
    assert session.frames == FRAMES
    clips = [0.1 * rng.standard_normal((2, 32000 - 37 * k)).astype(np.float32) for k in range(3)]
    feats = session.features(clips)
    assert feats.shape == (3, 4, FRAMES, 128)
    # The same Rust features as a direct call on the padded batch.
    padded = np.zeros((3, 2, 32000), dtype=np.float32)
    for i, c in enumerate(clips):
        padded[i, :, : c.shape[1]] = c
    np.testing.assert_array_equal(feats, bat(padded))
    ort_out = session.run_features(feats)  # batch 3, exported with batch 2
    with torch.no_grad():
        ref = model(torch.from_numpy(feats))
    for name, a, b in zip(infer.OUTPUT_NAMES, ort_out, ref, strict=True):
        np.testing.assert_allclose(a, b.numpy(), atol=1e-4, rtol=1e-4, err_msg=name)
    res = session.predict(clips, batch_size=2)
    assert len(res) == 3
    assert res[0].azimuth == int(np.argmax(ref[2][0].numpy()))
    assert res[0].elevation == int(np.argmax(ref[3][0].numpy())) - 90
    assert res[0].distance_m == 0.5 * int(np.argmax(ref[1][0].numpy()))
    assert res[0].event_probs.shape == (7,) and res[0].embedding.shape == (3, 32)


@pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only behaviour")
def test_session_from_the_shared_factory(onnx_model, caplog):
    path = str(onnx_model[1])
    with caplog.at_level(logging.WARNING, logger="agl_fast.onnx"):
        session = infer.SageSession(path)  # device="auto"
    assert session.provider == "CPUExecutionProvider"
    assert "running on the CPU" in caplog.text
    with pytest.raises(BackendError, match="allow_cpu"):
        infer.SageSession(path, device="cuda")
    assert infer.SageSession(path, device="cuda", allow_cpu=True).provider == (
        "CPUExecutionProvider"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agl_fast.onnx"):
        cpu = infer.SageSession(path, providers=["CPUExecutionProvider"])
    assert cpu.provider == "CPUExecutionProvider" and caplog.text == ""
    with pytest.raises(AglError, match="model file not found"):
        infer.SageSession("missing.onnx", device="cpu")


def test_bad_input(onnx_model, rng):
    session = infer.SageSession(str(onnx_model[1]), allow_cpu=True)
    good = rng.standard_normal((2, 4000)).astype(np.float32)
    with pytest.raises(ShapeError, match="binaural"):
        session.predict([good[0]])
    with pytest.raises(ShapeError, match="binaural"):
        session.predict([good[:1]])
    with pytest.raises(ShapeError, match=r"expected shape \[2, n\]"):
        session.predict([np.zeros((4, 4000), dtype=np.float32)])
    with pytest.raises(ParameterError, match=r"sr must be 32000.*sr=44100"):
        session.predict([good], sr=44100)
    with pytest.raises(ShapeError, match="too short, got 500 samples"):
        session.predict([good[:, :500]])
    bad = good.copy()
    bad[1, 17] = np.nan
    with pytest.raises(NonFiniteError, match="clip 1: contains NaN"):
        session.predict([good, bad])
    with pytest.raises(ShapeError, match="takes 101 frames"):
        session.run_features(np.zeros((1, 4, 50, 128), dtype=np.float32))


def test_cli_infer(onnx_model, tmp_path, rng, capsys):
    sf = pytest.importorskip("soundfile")
    wav = tmp_path / "clip.wav"
    sf.write(wav, 0.1 * rng.standard_normal((32000, 2)), 32000, subtype="FLOAT")
    npy = tmp_path / "clip2.npy"
    np.save(npy, 0.1 * rng.standard_normal((2, 20000)).astype(np.float32))
    model = str(onnx_model[1])
    emb = str(tmp_path / "emb")
    args = ["spatial", "infer", str(wav), str(npy), "--model", model, "--allow-cpu"]
    rc = main([*args, "--embeddings", emb])
    assert rc == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["file"] for r in rows] == [str(wav), str(npy)]
    for r in rows:
        assert 0 <= r["azimuth"] < 360 and -90 <= r["elevation"] < 90
        assert r["provider"] == "CPUExecutionProvider" and len(r["events"]) == 5
        assert np.load(r["embedding"]).shape == (3, 32)
    mono = tmp_path / "mono.npy"
    np.save(mono, np.zeros(32000, dtype=np.float32))
    rc = main(["spatial", "infer", str(mono), "--model", str(onnx_model[1]), "--device", "cpu"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "binaural" in err[0]


def test_fused_attention_equals_the_explicit_softmax():
    torch.manual_seed(3)
    blk = SageEncoder(TINY).blocks[0].attn.eval()
    x = torch.randn(2, 19, TINY.embed_dim)
    b, n, c = x.shape
    h = TINY.num_heads
    qkv = blk.qkv(x).reshape(b, n, 3, h, c // h).permute(2, 0, 3, 1, 4)
    attn = torch.softmax(qkv[0] @ qkv[1].transpose(-2, -1) * (c // h) ** -0.5, dim=-1)
    explicit = blk.proj((attn @ qkv[2]).transpose(1, 2).reshape(b, n, c))
    with torch.no_grad():
        torch.testing.assert_close(blk(x), explicit, rtol=1e-5, atol=1e-6)
