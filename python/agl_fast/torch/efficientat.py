"""EfficientAT ``mn`` models (MobileNetV3 for audio tagging) in PyTorch.

The architecture follows Schmid, Koutini and Widmer, "Efficient Large-Scale
Audio Tagging via Transformer-to-CNN Knowledge Distillation" (ICASSP 2023):
MobileNetV3-Large blocks with a width multiplier, channel squeeze-excitation,
BatchNorm ``eps=1e-3``, and an MLP head (pool, linear to ``1280 * width``,
hard-swish, dropout, linear to 527). Module names match the released
checkpoints (``features.0.0.weight``, ``features.4.block.2.conc_se_layers.0.fc1.weight``,
``classifier.5.bias``, ...), so ``mn10_as_mAP_471.pt`` loads unchanged.

Input: the log-mel of :func:`agl_fast.presets.efficientat` with a channel
axis, ``[batch, 1, 128, frames]``. Output: 527 logits (AudioSet order).

``torch`` is imported when this module is; the rest of agl-fast never
imports it.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .checkpoint import read_checkpoint

__all__ = [
    "MN",
    "MODEL_WIDTHS",
    "count_parameters",
    "export_onnx",
    "get_model",
    "load_checkpoint",
]

MODEL_WIDTHS: dict[str, float] = {
    "mn01": 0.1,
    "mn02": 0.2,
    "mn04": 0.4,
    "mn05": 0.5,
    "mn10": 1.0,
    "mn20": 2.0,
    "mn30": 3.0,
    "mn40": 4.0,
}

# MobileNetV3-Large body: kernel, expanded, out, squeeze-excitation,
# hard-swish, stride (input channels follow from the previous row; the
# stem has 16 channels).
_BODY: tuple[tuple[int, int, int, bool, bool, int], ...] = (
    (3, 16, 16, False, False, 1),
    (3, 64, 24, False, False, 2),
    (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2),
    (5, 120, 40, True, False, 1),
    (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2),
    (3, 200, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 480, 112, True, True, 1),
    (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2),
    (5, 960, 160, True, True, 1),
    (5, 960, 160, True, True, 1),
)


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of ``divisor``, never more than
    10 % below ``v`` (the MobileNet rule)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBN(nn.Sequential):
    """Conv (no bias), BatchNorm, optional activation: children ``0, 1, 2``."""

    def __init__(
        self,
        c_in: int,
        c_out: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        act: type[nn.Module] | None = None,
    ) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(c_in, c_out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(c_out, eps=0.001, momentum=0.01),
        ]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Channel squeeze-excitation: mean over (freq, time), two linears."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(channels, squeeze)
        self.fc2 = nn.Linear(squeeze, channels)

    def forward(self, x: Tensor) -> Tensor:
        s = x.mean(dim=(2, 3))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s[:, :, None, None]


class ConcurrentSE(nn.Module):
    """Container kept for checkpoint names (``conc_se_layers.0``); with the
    released channel-only configuration it holds one layer."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conc_se_layers = nn.ModuleList(
            [SqueezeExcitation(channels, make_divisible(channels // 4, 8))]
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.conc_se_layers[0](x)


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise (k x k), optional SE, project (1x1)."""

    def __init__(
        self, c_in: int, kernel: int, expanded: int, c_out: int, se: bool, hs: bool, stride: int
    ) -> None:
        super().__init__()
        act: type[nn.Module] = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if expanded != c_in:
            layers.append(ConvBN(c_in, expanded, 1, act=act))
        layers.append(ConvBN(expanded, expanded, kernel, stride, groups=expanded, act=act))
        if se:
            layers.append(ConcurrentSE(expanded))
        layers.append(ConvBN(expanded, c_out, 1))
        self.block = nn.Sequential(*layers)
        self.use_res_connect = stride == 1 and c_in == c_out

    def forward(self, x: Tensor) -> Tensor:
        y = self.block(x)
        return y + x if self.use_res_connect else y


class MN(nn.Module):
    """EfficientAT ``mn`` model.

    Parameters
    ----------
    width_mult : float
        Width multiplier (``mn10``: 1.0, ``mn40``: 4.0).
    num_classes : int
    dropout : float
    """

    def __init__(self, width_mult: float = 1.0, num_classes: int = 527, dropout: float = 0.2):
        super().__init__()
        ch = [make_divisible(c * width_mult) for c in (16,)]
        c_prev = ch[0]
        layers: list[nn.Module] = [ConvBN(1, c_prev, 3, 2, act=nn.Hardswish)]
        for kernel, exp, out, se, hs, stride in _BODY:
            e = make_divisible(exp * width_mult)
            o = make_divisible(out * width_mult)
            layers.append(InvertedResidual(c_prev, kernel, e, o, se, hs, stride))
            c_prev = o
        last_conv = 6 * c_prev
        layers.append(ConvBN(c_prev, last_conv, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        hidden = make_divisible(1280 * width_mult)
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(start_dim=1),
            nn.Linear(last_conv, hidden),
            nn.Hardswish(),
            nn.Dropout(p=dropout),
            nn.Linear(hidden, num_classes),
        )
        self.width_mult = width_mult
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        """``[batch, 1, n_mels, frames]`` log-mel to ``[batch, num_classes]`` logits."""
        return self.classifier(self.features(x))


class _Probabilities(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(self.model(x))


class _Half(nn.Module):
    """``model`` in float16 between a float32 input and a float32 output."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x.half()).float()


def get_model(name: str = "mn10_as", *, num_classes: int = 527) -> MN:
    """Model by its EfficientAT name (``'mn10_as'``, ``'mn40_as'``, ...)."""
    key = name.split("_")[0]
    if key not in MODEL_WIDTHS:
        from ..exceptions import ParameterError

        raise ParameterError(f"unknown model {name!r}; choose one of {sorted(MODEL_WIDTHS)}")
    return MN(MODEL_WIDTHS[key], num_classes=num_classes)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def load_checkpoint(path: str | Path, name: str | None = None) -> MN:
    """Build the model and load a released state dict (strict).

    The width is read from ``name`` if given, else from the file name
    (``mn10_as_mAP_471.pt`` -> ``mn10``), else from the stem's channel count.
    """
    state: Any = read_checkpoint(path, own_format=False)
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    key = name or Path(path).name
    width = next((w for k, w in MODEL_WIDTHS.items() if key.startswith(k)), None)
    if width is None:
        stem = int(state["features.0.0.weight"].shape[0])
        width = next(w for w in MODEL_WIDTHS.values() if make_divisible(16 * w) == stem)
    n_cls = int(state["classifier.5.bias"].shape[0])
    model = MN(width, num_classes=n_cls)
    model.load_state_dict(state, strict=True)
    return model.eval()


def export_onnx(
    model: nn.Module,
    out: str | Path,
    *,
    frames: int = 1000,
    n_mels: int = 128,
    probabilities: bool = True,
    opset: int = 17,
    half: bool = False,
) -> Path:
    """Export to ONNX with a dynamic batch axis.

    Input ``mel`` ``[batch, 1, n_mels, frames]``; output ``probabilities``
    (sigmoid of the logits, the default) or ``logits`` ``[batch, classes]``,
    both float32. With ``half`` the weights and every operation inside are
    float16 (a copy of ``model`` is converted; ``model`` is left as it is):
    for GPUs, where it is faster; the outputs then differ from the float32
    export by float16 rounding.
    """
    net = _Probabilities(model) if probabilities else model
    if half:
        net = _Half(copy.deepcopy(net).half())
    net = net.eval()
    out = Path(out)
    dummy = torch.zeros(2, 1, n_mels, frames)
    out_name = "probabilities" if probabilities else "logits"
    # The TorchScript exporter: one static graph with a symbolic batch axis,
    # no extra packages. Its deprecation notices (about itself and its
    # internals) are not for our users; they are silenced for this call only.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=DeprecationWarning)
        torch.onnx.export(
            net,
            (dummy,),
            str(out),
            input_names=["mel"],
            output_names=[out_name],
            dynamic_axes={"mel": {0: "batch"}, out_name: {0: "batch"}},
            opset_version=opset,
            dynamo=False,
        )
    return out
