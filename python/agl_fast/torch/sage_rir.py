"""SAGE's RIR-prediction branch and the geometric loss of OWL.

OWL trains SAGE with an auxiliary decoder that reconstructs the binaural
room impulse response from the audio tokens (fused with a panoramic depth
embedding) and supervises it with

``L_geo = |R - R_hat|_1 + lambda * L_EDC(R, R_hat)``

(:func:`geo_loss`, with :func:`agl_fast.torch.edc_loss` as ``L_EDC``), in
the total ``L = eta1 * L_binaural + eta2 * L_geo``. The paper's defaults are
``eta1 = 1``, ``eta2 = 0.01``; it gives no default for ``lambda`` (its
ablation lists ``lambda = 0.1``), so :data:`GEO_LAMBDA` is 0.1.

:class:`RirDecoder` is a small transposed-convolution decoder (the paper's
is a ResNet-18 one fed by a ResNet-18 depth encoder; here an optional
geometry vector, :func:`geometry_vector`, stands in for the depth image).
It lives in :class:`agl_fast.torch.sage.SageEncoder` as ``rir_decoder``
when ``SageConfig.rir_length > 0``; the encoder's own parameter names are
unchanged and its ``forward`` (the inference and ONNX path) does not run
the branch.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..exceptions import ParameterError
from .edc import edc_loss

__all__ = ["ETA", "GEOMETRY_DIM", "GEO_LAMBDA", "RirDecoder", "geo_loss", "geometry_vector"]

ETA = (1.0, 0.01)
GEO_LAMBDA = 0.1
GEOMETRY_DIM = 10


def geometry_vector(geometry: dict[str, Any]) -> list[float]:
    """Listener-side geometry of a scene as :data:`GEOMETRY_DIM` numbers.

    Room dimensions (m), listener position (m), cosine and sine of the
    facing direction, mean wall absorption and the scattering coefficient:
    what a panoramic depth image seen from the listener tells about the room
    (and not where the source is).

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


class RirDecoder(nn.Module):
    """Audio tokens (and optional geometry) to a binaural RIR ``[2, length]``.

    The tokens are averaged, concatenated with an embedding of the geometry
    vector when ``geometry_dim > 0``, projected to ``channels`` x
    ``length / 2**n_up`` and upsampled by ``n_up`` transposed convolutions
    (kernel 4, stride 2, GELU) to ``length`` samples; a last convolution
    gives the two ears.

    Parameters
    ----------
    embed_dim : int
        Width of the encoder tokens.
    length : int
        RIR length in samples (a multiple of ``2**n_up``).
    channels : int
        Channels at the coarsest resolution (halved at each upsampling,
        at least 8).
    n_up : int
        Number of upsampling stages.
    geometry_dim : int
        Length of the geometry vector (0: audio only).
    """

    def __init__(
        self,
        embed_dim: int,
        length: int,
        *,
        channels: int = 64,
        n_up: int = 5,
        geometry_dim: int = 0,
    ) -> None:
        super().__init__()
        if length <= 0 or length % (2**n_up):
            raise ParameterError(
                f"length must be a positive multiple of 2**n_up={2**n_up}, got length={length}"
            )
        self.length = length
        self.geometry_dim = geometry_dim
        self.base = length // 2**n_up
        self.channels = channels
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        width = embed_dim
        if geometry_dim > 0:
            self.geometry = nn.Sequential(nn.Linear(geometry_dim, embed_dim), nn.GELU())
            width += embed_dim
        self.proj = nn.Linear(width, channels * self.base)
        layers: list[nn.Module] = []
        c = channels
        for _ in range(n_up):
            c_out = max(8, c // 2)
            layers += [nn.ConvTranspose1d(c, c_out, kernel_size=4, stride=2, padding=1), nn.GELU()]
            c = c_out
        self.up = nn.Sequential(*layers)
        self.out = nn.Conv1d(c, 2, kernel_size=7, padding=3)

    def forward(self, tokens: torch.Tensor, geometry: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted RIRs.

        Parameters
        ----------
        tokens : torch.Tensor [shape=(batch, n_tokens, embed_dim)]
            Encoder output tokens (:meth:`SageEncoder.encode`).
        geometry : torch.Tensor [shape=(batch, geometry_dim)] or None
            Required when the decoder was built with ``geometry_dim > 0``.

        Returns
        -------
        torch.Tensor [shape=(batch, 2, length)]
        """
        h = self.norm(tokens.mean(dim=1))
        if self.geometry_dim > 0:
            if geometry is None or geometry.shape[-1] != self.geometry_dim:
                got = None if geometry is None else tuple(geometry.shape)
                raise ParameterError(f"geometry must be [batch, {self.geometry_dim}], got {got}")
            h = torch.cat([h, self.geometry(geometry.to(h.dtype))], dim=-1)
        x = self.proj(h).view(h.shape[0], self.channels, self.base)
        return self.out(self.up(x))


def geo_loss(
    pred: torch.Tensor,
    reference: torch.Tensor,
    *,
    lam: float = GEO_LAMBDA,
    floor_db: float = -60.0,
) -> torch.Tensor:
    """``L_geo = |R - R_hat|_1 + lam * L_EDC(R, R_hat)``.

    Parameters
    ----------
    pred, reference : torch.Tensor [shape=(batch, 2, L)]
        Predicted and reference binaural RIRs (the same length).
    lam : float >= 0
        Weight of the EDC term.
    floor_db : float <= 0
        Lowest reference EDC level counted (:func:`agl_fast.torch.edc_loss`).

    Returns
    -------
    torch.Tensor
        Scalar: the mean absolute sample error (the L1 norm divided by the
        number of samples, so that it does not grow with ``L``) plus ``lam``
        times the mean EDC distance in dB over curves (batch x ears).
    """
    if pred.shape != reference.shape:
        raise ParameterError(
            f"pred and reference must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(reference.shape)}"
        )
    if lam < 0:
        raise ParameterError(f"lam must be >= 0, got lam={lam}")
    pred = pred.float()
    reference = reference.float()
    l1 = (pred - reference).abs().mean()
    if lam == 0:
        return l1
    return l1 + lam * edc_loss(pred, reference, floor_db=floor_db)
