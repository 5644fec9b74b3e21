"""SAGE's RIR-prediction branch and the geometric loss of OWL (section 4, B.2).

OWL trains SAGE with an auxiliary module that reconstructs the binaural room
impulse response: a ResNet-18 encoder ``phi_d`` of the panoramic depth image
gives ``h_d``, which is fused with the audio embedding ``h_a`` and decoded
by a ResNet-18 transposed-convolution head into ``R_hat = psi_d(h_d, h_a)``,
supervised by Eq. 3,

``L_geo = ||R - R_hat||_1 + lambda * L_EDC(R, R_hat)``

(:func:`geo_loss`: the L1 norm summed over ears and samples as written, and
averaged over the batch; :func:`agl_fast.torch.edc_loss` as ``L_EDC``), in
``L = eta1 * L_binaural + eta2 * L_geo``. The paper's weights are ``eta1 =
1``, ``eta2 = 0.01``; it gives no default for ``lambda`` (its ablation lists
``lambda = 0.1``), so :data:`agl_fast.sage.recipes.GEO_LAMBDA` is 0.1.

:class:`ResNet18` is the depth encoder (torchvision's layout, written here:
a 7x7 stride-2 stem, max pool, four stages of two basic blocks, global
average pool), on a one-channel depth image in metres. :class:`RirDecoder`
fuses ``h_a`` (the mean of the audio tokens, layer-normed) with ``h_d``
(concatenated, then a linear layer to the coarsest feature map) and mirrors
ResNet-18 in one dimension: four stages of two basic blocks whose first
block of stages two to four doubles the length with a transposed
convolution, then two transposed-convolution steps in place of the stem's
stride and pooling (``length / 32`` samples at the coarsest scale), and a
last convolution to the two ears.

The ablation ``geometry_dim > 0`` feeds a vector of room numbers
(:func:`geometry_vector`) in place of the depth image. It is not what OWL
does and it carries what a depth image does not show (wall absorption and
scattering); it is kept only to compare with.

The branch lives in :class:`agl_fast.sage.model.SageEncoder` as
``rir_decoder`` when ``SageConfig.rir_length > 0``; the encoder's own
parameter names are unchanged and its ``forward`` (the inference and ONNX
path) does not run the branch.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..exceptions import ParameterError
from ..torch.edc import edc_loss
from .recipes import GEO_LAMBDA

__all__ = [
    "GEOMETRY_DIM",
    "UPSAMPLE",
    "ResNet18",
    "RirDecoder",
    "geo_loss",
    "geometry_vector",
]

GEOMETRY_DIM = 10
UPSAMPLE = 32  # the decoder's length / coarsest length


def geometry_vector(geometry: dict[str, Any]) -> list[float]:
    """The ablation's room description, :data:`GEOMETRY_DIM` numbers.

    Room dimensions (m), listener position (m), cosine and sine of the
    facing direction, mean wall absorption and the scattering coefficient.

    Parameters
    ----------
    geometry : dict
        A ``geometry`` entry of ``scenes.jsonl`` (a ``SceneSpec`` as a dict).
    """
    yaw = math.radians(float(geometry["yaw_deg"]))
    absorption = [float(a) for a in geometry["absorption"]]
    return [
        *(float(x) for x in geometry["room_dim"]),
        *(float(x) for x in geometry["listener"]),
        math.cos(yaw),
        math.sin(yaw),
        sum(absorption) / len(absorption),
        float(geometry["scattering"]),
    ]


class _Block2d(nn.Module):
    """ResNet basic block (two 3x3 convolutions, batch norm, ReLU)."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.down: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.down(x))


class ResNet18(nn.Module):
    """ResNet-18 image encoder: ``[batch, in_channels, H, W]`` to ``[batch, 8 * width]``.

    Parameters
    ----------
    in_channels : int
        1 for a depth image.
    width : int
        Channels of the first stage (64 in ResNet-18; the stages have
        ``width``, ``2 width``, ``4 width``, ``8 width``).
    """

    def __init__(self, in_channels: int = 1, width: int = 64) -> None:
        super().__init__()
        if width < 1:
            raise ParameterError(f"width must be >= 1, got width={width}")
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        stages: list[nn.Module] = []
        c = width
        for k in range(4):
            c_out = width * 2**k
            stride = 1 if k == 0 else 2
            stages.append(nn.Sequential(_Block2d(c, c_out, stride), _Block2d(c_out, c_out, 1)))
            c = c_out
        self.stages = nn.Sequential(*stages)
        self.out_dim = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(self.stem(x)).mean(dim=(2, 3))


class _Block1dUp(nn.Module):
    """Basic block in one dimension; ``up=True`` doubles the length (a
    transposed convolution on the main path and on the shortcut)."""

    def __init__(self, c_in: int, c_out: int, up: bool) -> None:
        super().__init__()
        if up:
            self.conv1: nn.Module = nn.ConvTranspose1d(c_in, c_out, 4, 2, 1, bias=False)
        else:
            self.conv1 = nn.Conv1d(c_in, c_out, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm1d(c_out)
        self.conv2 = nn.Conv1d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm1d(c_out)
        self.skip: nn.Module = nn.Identity()
        if up or c_in != c_out:
            self.skip = nn.Sequential(
                nn.ConvTranspose1d(c_in, c_out, 2, 2, bias=False)
                if up
                else nn.Conv1d(c_in, c_out, 1, bias=False),
                nn.BatchNorm1d(c_out),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


class RirDecoder(nn.Module):
    """``psi_d``: depth image and audio tokens to a binaural RIR ``[2, length]``.

    Parameters
    ----------
    embed_dim : int
        Width of the audio encoder's tokens.
    length : int
        RIR length in samples (a multiple of :data:`UPSAMPLE`).
    width : int
        Channel base of both ResNets (64 as ResNet-18).
    depth : bool
        Build the depth encoder :class:`ResNet18` (OWL). False with
        ``geometry_dim`` 0 decodes from the audio alone.
    geometry_dim : int
        The ablation: length of a geometry vector fed in place of (or with)
        the depth image (0: none).
    """

    def __init__(
        self,
        embed_dim: int,
        length: int,
        *,
        width: int = 64,
        depth: bool = True,
        geometry_dim: int = 0,
    ) -> None:
        super().__init__()
        if length <= 0 or length % UPSAMPLE:
            raise ParameterError(
                f"length must be a positive multiple of {UPSAMPLE}, got length={length}"
            )
        if width < 1:
            raise ParameterError(f"width must be >= 1, got width={width}")
        self.length = length
        self.base = length // UPSAMPLE
        self.geometry_dim = geometry_dim
        self.channels = 8 * width
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        fused = embed_dim
        self.depth_encoder: ResNet18 | None = None
        if depth:
            self.depth_encoder = ResNet18(1, width)
            fused += self.depth_encoder.out_dim
        if geometry_dim > 0:
            self.geometry = nn.Sequential(nn.Linear(geometry_dim, embed_dim), nn.GELU())
            fused += embed_dim
        self.proj = nn.Linear(fused, self.channels * self.base)
        stages: list[nn.Module] = []
        c = self.channels
        for k in range(4):
            c_out = self.channels // 2**k
            stages.append(
                nn.Sequential(_Block1dUp(c, c_out, up=k > 0), _Block1dUp(c_out, c_out, False))
            )
            c = c_out
        self.stages = nn.Sequential(*stages)
        self.stem = nn.Sequential(
            nn.ConvTranspose1d(c, c, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose1d(c, c, 4, 2, 1), nn.ReLU(),
        )  # fmt: skip
        self.out = nn.Conv1d(c, 2, kernel_size=7, padding=3)

    def forward(
        self,
        tokens: torch.Tensor,
        depth: torch.Tensor | None = None,
        geometry: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Predicted RIRs.

        Parameters
        ----------
        tokens : torch.Tensor [shape=(batch, n_tokens, embed_dim)]
            Audio encoder output tokens (:meth:`SageEncoder.encode`).
        depth : torch.Tensor [shape=(batch, H, W) or (batch, 1, H, W)] or None
            Panoramic depth images (m); required when the decoder has the
            depth encoder.
        geometry : torch.Tensor [shape=(batch, geometry_dim)] or None
            Required when the decoder was built with ``geometry_dim > 0``.

        Returns
        -------
        torch.Tensor [shape=(batch, 2, length)]
        """
        parts = [self.norm(tokens.mean(dim=1))]
        if self.depth_encoder is not None:
            if depth is None or depth.dim() not in (3, 4) or depth.shape[0] != tokens.shape[0]:
                got = None if depth is None else tuple(depth.shape)
                raise ParameterError(f"depth must be [batch, H, W] or [batch, 1, H, W], got {got}")
            d = depth[:, None] if depth.dim() == 3 else depth
            parts.append(self.depth_encoder(d.to(parts[0].dtype)))
        if self.geometry_dim > 0:
            if geometry is None or geometry.shape[-1] != self.geometry_dim:
                got = None if geometry is None else tuple(geometry.shape)
                raise ParameterError(f"geometry must be [batch, {self.geometry_dim}], got {got}")
            parts.append(self.geometry(geometry.to(parts[0].dtype)))
        h = torch.cat(parts, dim=-1)
        x = self.proj(h).view(h.shape[0], self.channels, self.base)
        return self.out(self.stem(self.stages(x)))


def geo_loss(
    pred: torch.Tensor,
    reference: torch.Tensor,
    *,
    lam: float = GEO_LAMBDA,
    floor_db: float = -60.0,
    reduction: str = "sum",
) -> torch.Tensor:
    """``L_geo = ||R - R_hat||_1 + lam * L_EDC(R, R_hat)`` (Eq. 3).

    Parameters
    ----------
    pred, reference : torch.Tensor [shape=(batch, 2, L)]
        Predicted and reference binaural RIRs (the same length).
    lam : float >= 0
        Weight of the EDC term.
    floor_db : float <= 0
        Lowest reference EDC level counted (:func:`agl_fast.torch.edc_loss`).
    reduction : {'sum', 'mean'}
        ``'sum'``: the L1 norm of each example's ``[2, L]`` error, as Eq. 3
        writes it, averaged over the batch; ``'mean'``: the mean absolute
        sample error (the norm divided by ``2 L``; the scale of the
        pre-OWL recipe).

    Returns
    -------
    torch.Tensor
        Scalar: the L1 term plus ``lam`` times the mean EDC distance in dB
        over curves (batch x ears).
    """
    if pred.shape != reference.shape:
        raise ParameterError(
            f"pred and reference must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(reference.shape)}"
        )
    if lam < 0:
        raise ParameterError(f"lam must be >= 0, got lam={lam}")
    if reduction not in ("sum", "mean"):
        raise ParameterError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    pred = pred.float()
    reference = reference.float()
    err = (pred - reference).abs()
    l1 = err.flatten(1).sum(dim=1).mean() if reduction == "sum" else err.mean()
    if lam == 0:
        return l1
    return l1 + lam * edc_loss(pred, reference, floor_db=floor_db)
