"""EfficientAT mn models in PyTorch: size, checkpoint names, ONNX export parity."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from agl_fast.cli import main  # noqa: E402
from agl_fast.torch import efficientat as eat  # noqa: E402

pytestmark = pytest.mark.torch


def _randomize_bn(model, seed=0):
    """Random BatchNorm statistics and affine terms, so eval-mode BN is not
    the identity and the parity test exercises every layer."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(n, generator=g))
            m.running_var.copy_(0.5 + torch.rand(n, generator=g))
            m.weight.data.copy_(0.5 + torch.rand(n, generator=g))
            m.bias.data.copy_(0.1 * torch.randn(n, generator=g))
    return model


def test_mn10_size_matches_the_paper():
    model = eat.get_model("mn10_as")
    n = eat.count_parameters(model)
    assert round(n / 1e6, 2) == 4.88  # EfficientAT's published mn10 size
    assert model.classifier[-1].out_features == 527


def test_state_dict_names_follow_the_released_checkpoints():
    sd = eat.get_model("mn10_as").state_dict()
    # names and shapes as in the authors' MobileNetV3 code (stem conv, block
    # without expansion, expansion conv, channel SE, last conv, MLP head)
    expect = {
        "features.0.0.weight": (16, 1, 3, 3),
        "features.0.1.running_var": (16,),
        "features.1.block.0.0.weight": (16, 1, 3, 3),
        "features.2.block.0.0.weight": (64, 16, 1, 1),
        "features.4.block.2.conc_se_layers.0.fc1.weight": (24, 72),
        "features.4.block.2.conc_se_layers.0.fc2.bias": (72,),
        "features.15.block.3.1.weight": (160,),
        "features.16.0.weight": (960, 160, 1, 1),
        "classifier.2.weight": (1280, 960),
        "classifier.5.bias": (527,),
    }
    for name, shape in expect.items():
        assert tuple(sd[name].shape) == shape, name
    assert len([k for k in sd if k.startswith("features.")]) > 250
    assert not [k for k in sd if k.startswith("classifier.") and k[11] not in "25"]


@pytest.mark.parametrize("name", ["mn10_as", "mn04_as"])
def test_torch_and_onnxruntime_agree(tmp_path, name):
    torch.manual_seed(0)
    model = _randomize_bn(eat.get_model(name)).eval()
    path = eat.export_onnx(model, tmp_path / "m.onnx", frames=200, probabilities=False)
    x = torch.randn(3, 1, 128, 200)  # a batch size other than the export's
    with torch.no_grad():
        ref = model(x).numpy()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"mel": x.numpy()})[0]
    assert got.shape == (3, 527)
    assert np.std(ref) > 1e-3  # not a degenerate output
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=0)


def test_half_export_computes_in_float16_between_float32_edges(tmp_path):
    onnx = pytest.importorskip("onnx")
    torch.manual_seed(1)
    model = _randomize_bn(eat.get_model("mn10_as")).eval()
    path = eat.export_onnx(model, tmp_path / "h.onnx", frames=200, probabilities=False,
                           half=True)  # fmt: skip
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the caller's model
    graph = onnx.load(str(path)).graph
    f32, f16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    assert graph.input[0].type.tensor_type.elem_type == f32
    assert graph.output[0].type.tensor_type.elem_type == f32
    weights = [t for t in graph.initializer if len(t.dims) > 1]
    assert weights and all(t.data_type == f16 for t in weights)
    x = torch.randn(3, 1, 128, 200)
    with torch.no_grad():
        ref = model(x).numpy()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"mel": x.numpy()})[0]
    assert got.dtype == np.float32 and got.shape == (3, 527)
    # float16 rounding through 15 blocks: close to float32, but not equal
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert 0 < err < 2e-2, err


def test_checkpoint_roundtrip_and_export_cli(tmp_path, capsys):
    torch.manual_seed(1)
    model = _randomize_bn(eat.get_model("mn04_as")).eval()
    ckpt = tmp_path / "mn04_as_test.pt"
    torch.save(model.state_dict(), ckpt)
    back = eat.load_checkpoint(ckpt)
    x = torch.randn(2, 1, 128, 100)
    with torch.no_grad():
        np.testing.assert_array_equal(back(x).numpy(), model(x).numpy())
    out = tmp_path / "mn04.onnx"
    rc = main(["tagger", "export", "--checkpoint", str(ckpt), "--out", str(out), "--frames", "100"])
    assert rc == 0 and "parameters" in capsys.readouterr().out
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    probs = sess.run(None, {"mel": x.numpy()})[0]
    with torch.no_grad():
        np.testing.assert_allclose(probs, torch.sigmoid(model(x)).numpy(), atol=1e-5)


def test_unknown_model_name():
    from agl_fast.exceptions import ParameterError

    with pytest.raises(ParameterError, match="unknown model 'mn99_as'"):
        eat.get_model("mn99_as")
