"""The SAGE / Spatial-AST binaural encoder in PyTorch (the ``torch`` extra).

Input: the ``agl_fast.bat`` features ``[batch, 4, frames, 128]`` (log-mel L,
log-mel R, mel-projected cos IPD, sin IPD). Forward pass, as in Spatial-AST
and OWL's SAGE:

1. ``bn``: batch norm without affine parameters of the two log-mel channels;
2. bicubic resize (``align_corners=True``) to ``target_frame`` (1024) frames
   (:func:`bicubic_matrix`);
3. ``conv_downsample``: conv 3x3 (4 -> 1, no bias) + batch norm + GELU;
4. ``patch_embed``: 16 x 16 patches (stride 16) -> ``embed_dim``;
5. fixed 2-D sin-cos position embeddings (``pos_embed``, one unused leading
   row as in the released checkpoints), three learned tokens ``cls_tokens``
   (distance, direction, events) prepended;
6. ``depth`` pre-norm transformer blocks (``blocks.i.norm1 / attn.qkv /
   attn.proj / norm2 / mlp.fc1 / mlp.fc2``);
7. ``dis_norm``, ``doa_norm``, ``fc_norm`` on the three tokens and the heads
   ``distance_head`` (21), ``azimuth_head`` (360), ``elevation_head`` (180)
   and ``head`` (events, multi-label logits).

Parameter and buffer names match the released Spatial-AST / BAT checkpoints,
so :func:`load_checkpoint` loads them unchanged (their in-model STFT and mel
weights, ``spectrogram_extractor.*`` and ``logmel_extractor.*``, are not
needed here: the features come from the Rust front end).
Where ``frames > target_frame`` the resize shrinks the input (the reference
model accepts at most 1024 frames; 10 s at 32 kHz gives 1001).

Training-only options of :class:`SageConfig` add no parameter (SpecAugment
masks, token dropping, ``ipd_scale``); ``rir_length > 0`` adds the
RIR-prediction branch ``rir_decoder`` (:mod:`agl_fast.sage.rir`),
whose parameters all live under that prefix and which ``forward`` (the
inference and ONNX path) does not run: :meth:`SageEncoder.encode` gives the
tokens, :meth:`SageEncoder.heads` the outputs, :meth:`SageEncoder.predict_rir`
the binaural RIR.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..exceptions import ModelStateError, ParameterError
from .rir import RirDecoder

__all__ = [
    "OWL_SAGE_ABSENT",
    "SageConfig",
    "SageEncoder",
    "bicubic_matrix",
    "checkpoint_layout",
    "load_checkpoint",
    "load_partial",
    "n_parameters",
    "sincos_pos_embed",
]

_SKIP_PREFIXES = ("spectrogram_extractor.", "logmel_extractor.")
_BRANCH_PREFIX = "rir_decoder."
#: Entries OWL's released SAGE (its ``BinauralEncoder``) does not have: it
#: hands the last block's tokens to the Q-Former, with no head norms and no
#: direction or distance heads (its ``head``, the events, it has).
OWL_SAGE_ABSENT = (
    "dis_norm.", "doa_norm.", "fc_norm.", "distance_head.", "azimuth_head.", "elevation_head.",
)  # fmt: skip
_LOG = logging.getLogger("agl_fast.sage.model")


@dataclass
class SageConfig:
    """Size of the encoder (defaults: ViT-B/16, as released) and its
    training-time masking (SpecAugment-style feature masks, token dropping)."""

    embed_dim: int = 768
    depth: int = 12
    num_heads: int = 12
    mlp_ratio: float = 4.0
    num_classes: int = 355
    n_mels: int = 128
    target_frame: int = 1024
    patch: int = 16
    # Training-only augmentation (off by default; no parameters, so released
    # checkpoints load either way): ``n_masks`` frequency masks of up to
    # ``freq_mask`` mel bands and ``n_masks`` time masks of up to
    # ``time_mask`` input frames, and a share ``token_mask`` of the patch
    # tokens dropped.
    freq_mask: int = 0
    time_mask: int = 0
    n_masks: int = 2
    token_mask: float = 0.0
    # The RIR-prediction branch (``rir_decoder``, :mod:`agl_fast.sage.rir`):
    # built when ``rir_length > 0``: a ResNet-18 depth encoder (``rir_depth``)
    # of channel base ``rir_width`` fused with the audio tokens and a
    # ResNet-18 transposed-convolution decoder. ``rir_geometry_dim > 0`` is
    # the ablation that feeds a room vector (with ``rir_depth=False``: in
    # place of the depth image).
    rir_length: int = 0
    rir_geometry_dim: int = 0
    rir_depth: bool = True
    rir_width: int = 64
    # Factor on the two IPD channels. The Slaney-normalised mel weights of a
    # band sum to n_fft / sr (1 / 31.25 at 32 kHz), so ``mel @ cos(IPD)`` is
    # about 30 times smaller than the batch-normalised log-mels; 31.25 makes
    # each band the weighted mean of cos / sin IPD, in [-1, 1]. The released
    # checkpoints were trained with 1 (the default).
    ipd_scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bicubic_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Matrix ``[n_out, n_in]`` of PyTorch's bicubic resize along one axis
    (``align_corners=True``, cubic convolution with ``a = -0.75``, edge
    indices clamped): ``interpolate(x, mode='bicubic', align_corners=True)``
    along time equals ``W @ x`` when the other axis keeps its size."""
    a = -0.75
    w = np.zeros((n_out, n_in))
    # Source positions in float32, as PyTorch computes them.
    f32 = np.float32
    scale = f32(n_in - 1) / f32(n_out - 1) if n_out > 1 else f32(0.0)
    for i in range(n_out):
        src = f32(i) * scale
        i0 = int(np.floor(src))
        t = float(src - f32(i0))
        for k, x in zip((-1, 0, 1, 2), (1 + t, t, 1 - t, 2 - t), strict=True):
            if x <= 1:
                c = ((a + 2) * x - (a + 3)) * x * x + 1
            else:
                c = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
            w[i, min(max(i0 + k, 0), n_in - 1)] += c
    return w


def sincos_pos_embed(dim: int, grid_t: int, grid_f: int) -> torch.Tensor:
    """2-D sin-cos position table ``[1 + grid_t * grid_f, dim]`` (row 0 zeros).

    Half of the channels encode the frequency index, half the time index
    (each half: sines then cosines at geometric frequencies, base 10000);
    patches are ordered time-major as the patch convolution flattens them.
    """
    if dim % 4:
        raise ParameterError(f"embed_dim must be a multiple of 4, got {dim}")

    def one_axis(d: int, pos: torch.Tensor) -> torch.Tensor:
        omega = 1.0 / 10000 ** (torch.arange(d // 2, dtype=torch.float64) / (d / 2))
        out = pos.double()[:, None] * omega[None]
        return torch.cat([torch.sin(out), torch.cos(out)], dim=1)

    t, f = torch.meshgrid(torch.arange(grid_t), torch.arange(grid_f), indexing="ij")
    emb = torch.cat([one_axis(dim // 2, f.reshape(-1)), one_axis(dim // 2, t.reshape(-1))], 1)
    return torch.cat([torch.zeros(1, dim, dtype=torch.float64), emb]).float()


class _PatchEmbed(nn.Module):
    def __init__(self, patch: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(1, dim, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        # The fused kernel (flash / memory-efficient attention where the device
        # has one); its default scale is head_dim ** -0.5, as ``self.scale``.
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], scale=self.scale)
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = _Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class SageEncoder(nn.Module):
    """SAGE / Spatial-AST encoder with its four heads.

    ``forward(features)`` with features ``[batch, 4, frames, n_mels]`` returns
    ``(events, distance, azimuth, elevation, embedding)``: logits
    ``[batch, num_classes]``, ``[batch, 21]``, ``[batch, 360]``,
    ``[batch, 180]``, and the three normalised tokens ``[batch, 3, embed_dim]``
    (distance, direction, events) for downstream use.
    """

    def __init__(self, config: SageConfig | None = None) -> None:
        super().__init__()
        cfg = config or SageConfig()
        if cfg.embed_dim % cfg.num_heads:
            raise ParameterError(
                f"embed_dim must be a multiple of num_heads, got {cfg.embed_dim} and "
                f"{cfg.num_heads}"
            )
        if cfg.target_frame % cfg.patch or cfg.n_mels % cfg.patch:
            raise ParameterError(
                f"target_frame and n_mels must be multiples of patch={cfg.patch}, got "
                f"{cfg.target_frame} and {cfg.n_mels}"
            )
        self.config = cfg
        self._resize_cache: dict[int, torch.Tensor] = {}
        d = cfg.embed_dim
        self.bn = nn.BatchNorm2d(2, affine=False)
        self.conv_downsample = nn.Sequential(
            nn.Conv2d(4, 1, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(1), nn.GELU()
        )
        self.patch_embed = _PatchEmbed(cfg.patch, d)
        gt, gf = cfg.target_frame // cfg.patch, cfg.n_mels // cfg.patch
        self.pos_embed = nn.Parameter(sincos_pos_embed(d, gt, gf)[None], requires_grad=False)
        self.cls_tokens = nn.Parameter(torch.zeros(1, 3, d))
        self.blocks = nn.ModuleList(
            [_Block(d, cfg.num_heads, cfg.mlp_ratio) for _ in range(cfg.depth)]
        )
        self.dis_norm = nn.LayerNorm(d, eps=1e-6)
        self.doa_norm = nn.LayerNorm(d, eps=1e-6)
        self.fc_norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, cfg.num_classes)
        self.distance_head = nn.Linear(d, 21)
        self.azimuth_head = nn.Linear(d, 360)
        self.elevation_head = nn.Linear(d, 180)
        self._init_weights()
        self.rir_decoder: RirDecoder | None = None
        if cfg.rir_length > 0:
            self.rir_decoder = RirDecoder(
                d,
                cfg.rir_length,
                width=cfg.rir_width,
                depth=cfg.rir_depth,
                geometry_dim=cfg.rir_geometry_dim,
            )

    def _init_weights(self) -> None:
        nn.init.normal_(self.cls_tokens, std=0.02)
        w = self.patch_embed.proj.weight.data
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        for m in self.blocks.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        for h in (self.head, self.distance_head, self.azimuth_head, self.elevation_head):
            nn.init.trunc_normal_(h.weight, std=0.02)
            nn.init.zeros_(h.bias)

    def _resize_time(self, x: torch.Tensor) -> torch.Tensor:
        # The bicubic resize as one matrix product along time (the mel axis
        # keeps its size, so its weights are the identity): the same values
        # as F.interpolate, and a MatMul rather than a slow Resize in ONNX.
        n = int(x.shape[2])
        if n not in self._resize_cache:
            w = bicubic_matrix(n, self.config.target_frame)
            self._resize_cache[n] = torch.from_numpy(w.astype(np.float32))
        return torch.matmul(self._resize_cache[n].to(x.device, x.dtype), x)

    def _spec_mask(self, x: torch.Tensor) -> torch.Tensor:
        # SpecAugment on the normalised features [batch, 4, frames, mels]: the
        # same bands and frames zeroed in all four channels of an example.
        cfg = self.config
        b, _, t, f = x.shape
        keep = torch.ones(b, 1, t, f, dtype=torch.bool, device=x.device)
        for width, n, axis in ((cfg.freq_mask, f, 3), (cfg.time_mask, t, 2)):
            if width <= 0:
                continue
            pos = torch.arange(n, device=x.device)
            for _ in range(cfg.n_masks):
                w = torch.randint(0, min(width, n) + 1, (b,), device=x.device)
                start = (torch.rand(b, device=x.device) * (n - w + 1)).long()
                hit = (pos[None] >= start[:, None]) & (pos[None] < (start + w)[:, None])
                shape = (b, 1, 1, n) if axis == 3 else (b, 1, n, 1)
                keep &= ~hit.view(shape)
        return x * keep.to(x.dtype)

    def _drop_tokens(self, x: torch.Tensor) -> torch.Tensor:
        # Keep a random subset of the patch tokens (same count per example).
        b, n, d = x.shape
        k = max(1, round(n * (1.0 - self.config.token_mask)))
        order = torch.rand(b, n, device=x.device).argsort(dim=1)[:, :k]
        return torch.gather(x, 1, order[..., None].expand(b, k, d))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.heads(self.encode(features))

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The five outputs of :meth:`forward` from the tokens of :meth:`encode`."""
        dis = self.dis_norm(x[:, 0])
        doa = self.doa_norm(x[:, 1])
        cls = self.fc_norm(x[:, 2])
        return (
            self.head(cls),
            self.distance_head(dis),
            self.azimuth_head(doa),
            self.elevation_head(doa),
            torch.stack([dis, doa, cls], dim=1),
        )

    def encode(self, features: torch.Tensor) -> torch.Tensor:
        """Output tokens of the last block, ``[batch, 3 + patches, embed_dim]``
        (the three class tokens first), before the head norms. In training
        mode the configured masks are applied (fewer patch tokens when
        ``token_mask > 0``)."""
        cfg = self.config
        ipd = features[:, 2:] if cfg.ipd_scale == 1.0 else features[:, 2:] * cfg.ipd_scale
        x = torch.cat([self.bn(features[:, :2]), ipd], dim=1)
        if self.training and (cfg.freq_mask > 0 or cfg.time_mask > 0):
            x = self._spec_mask(x)
        x = self._resize_time(x)
        x = self.patch_embed(self.conv_downsample(x)) + self.pos_embed[:, 1:]
        if self.training and cfg.token_mask > 0:
            x = self._drop_tokens(x)
        x = torch.cat([self.cls_tokens.expand(x.shape[0], -1, -1), x], dim=1)
        for blk in self.blocks:
            x = blk(x)
        return x

    def predict_rir(
        self,
        x: torch.Tensor,
        depth: torch.Tensor | None = None,
        geometry: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Binaural RIRs ``[batch, 2, rir_length]`` from the tokens of
        :meth:`encode` and the panoramic depth images ``[batch, H, W]`` (m)
        (and, in the ablation, the geometry vectors ``[batch,
        rir_geometry_dim]``)."""
        if self.rir_decoder is None:
            raise ParameterError("this model has no RIR branch: build it with rir_length > 0")
        return self.rir_decoder(x, depth, geometry)


def _clean_state(state: dict[str, Any]) -> dict[str, Any]:
    if "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    clean = {}
    for k, v in state.items():
        k = k.removeprefix("module.")
        if not k.startswith(_SKIP_PREFIXES):
            clean[k] = v
    return clean


def load_partial(model: SageEncoder, state: dict[str, Any]) -> dict[str, list[str]]:
    """Load the entries of ``state`` whose name and shape match the model
    (an AudioMAE encoder into SAGE: the ViT blocks and the patch projection)
    and report the rest.

    Returns
    -------
    dict
        ``loaded``, ``missing`` (model entries left at their
        initialisation), ``unexpected`` (state entries the model has no
        name for) and ``mismatched`` (same name, other shape: not loaded,
        e.g. AudioMAE's position table of another grid), each a sorted list.
    """
    clean = _clean_state(state)
    own = model.state_dict()
    fits = {k: v for k, v in clean.items() if k in own and tuple(v.shape) == tuple(own[k].shape)}
    model.load_state_dict(fits, strict=False)
    return {
        "loaded": sorted(fits),
        "missing": sorted(k for k in own if k not in fits and k not in clean),
        "unexpected": sorted(k for k in clean if k not in own),
        "mismatched": sorted(k for k in clean if k in own and k not in fits),
    }


def checkpoint_layout(state: dict[str, Any]) -> str:
    """``'owl-sage'`` for a state of OWL's released SAGE (``cls_tokens`` and
    none of :data:`OWL_SAGE_ABSENT`), else ``'spatial-ast'``."""
    clean = _clean_state(state)
    owl = "cls_tokens" in clean and not any(k.startswith(OWL_SAGE_ABSENT) for k in clean)
    return "owl-sage" if owl else "spatial-ast"


def load_checkpoint(
    model: SageEncoder, state: dict[str, Any], *, strict: bool = True
) -> dict[str, Any]:
    """Load a Spatial-AST / SAGE state dict (``{'model': ...}`` wrappers and
    ``module.`` prefixes accepted; the in-model STFT/mel weights are dropped).

    ``strict=True`` requires every encoder and head entry to be present and
    no unknown entry, with two exceptions: the RIR branch (``rir_decoder.*``)
    may be absent from the state (a released encoder checkpoint loaded into
    a model built with the branch), and then keeps its initialisation (a
    branch in the state is loaded when the model has one and is an unknown
    entry otherwise); and a state of OWL's SAGE (:func:`checkpoint_layout`)
    lacks :data:`OWL_SAGE_ABSENT`, which keep theirs. ``strict=False``
    ignores missing and unknown entries. Shapes must match either way.
    Mismatches raise ``RuntimeError`` as ``load_state_dict`` does.

    Returns
    -------
    dict
        The key report (logged): ``layout``, ``loaded``, ``kept`` (model
        entries left at their initialisation), ``unexpected`` and
        ``dropped`` (the front-end weights), each list sorted.
    """
    layout = checkpoint_layout(state)
    clean = _clean_state(state)
    raw = state["model"] if isinstance(state.get("model"), dict) else state
    result = model.load_state_dict(clean, strict=False)
    allowed = (_BRANCH_PREFIX, *OWL_SAGE_ABSENT) if layout == "owl-sage" else (_BRANCH_PREFIX,)
    missing = [k for k in result.missing_keys if not k.startswith(allowed)]
    if strict and (missing or result.unexpected_keys):
        raise ModelStateError(
            f"state does not match the model (as load_state_dict): missing {missing}, "
            f"unexpected {list(result.unexpected_keys)}"
        )
    report = {
        "layout": layout,
        "loaded": sorted(k for k in clean if k not in set(result.unexpected_keys)),
        "kept": sorted(result.missing_keys),
        "unexpected": sorted(result.unexpected_keys),
        "dropped": sorted(
            k for k in raw if str(k).removeprefix("module.").startswith(_SKIP_PREFIXES)
        ),
    }
    _LOG.info("checkpoint (%s): %d loaded, %d kept at initialisation %s, %d unexpected, "
              "%d front-end entries dropped", layout, len(report["loaded"]), len(report["kept"]),
              report["kept"], len(report["unexpected"]), len(report["dropped"]))  # fmt: skip
    return report


def n_parameters(model: nn.Module) -> int:
    """Trainable parameter count."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
