"""The training recipes of SAGE: loss weights, optimiser and schedule.

Every SAGE trainer runs the one optimiser-step loop of
:mod:`agl_fast.torch.loop`; what differs between them is where the batches
come from (:mod:`.train`: a stored dataset; :mod:`.fit`: scenes streamed
from a BRIR bank, under DDP; :mod:`.experiment`: BRIR pools simulated for a
time-budgeted run) and the settings here.

Two named recipes (:data:`RECIPES`, ``agl-fast spatial train --recipe`` and
``agl-fast spatial experiment --recipe``):

``owl``
    Appendix C.1: two stages, the first ``stage1_share`` (40 of 100 epochs)
    with the event loss alone (``alpha = (1, 0, 0)``, no ``L_geo``), the
    rest joint with ``alpha = (1250, 1, 2)``, ``eta = (1, 0.01)``; AdamW,
    betas (0.9, 0.95), gradient clipping at 1.0, batch 64, a linear warm-up
    of 5000 steps (at most the first stage) and half-cycle cosine decay.
    The paper states two learning rates and weight decays: Table 8 gives
    1e-3 and 1e-4, the Optimization paragraph of C.1 gives 1e-4 and 0.01
    (the values it also gives for OWL in C.2); the recipe follows C.1's
    paragraph (``lr = 1e-4``, ``weight_decay = 0.01``). ``lambda`` is not
    given; 0.1 (the ablation's value). The L1 term is the sum of Eq. 3.
``agl-fast``
    The settings used before the OWL recipe (the default): one stage,
    ``alpha = (1, 1, 2)``, ``lr = 2.5e-4``, weight decay 0.05, AdamW's
    default betas, clipping at 5.0, batch 16, 50 warm-up steps, and the L1
    term as a mean over samples.

:class:`TrainConfig` holds them for the step-counted trainers,
:class:`ExperimentConfig` (:func:`experiment_config`) for the
time-budgeted experiment. Importing this module does not import torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..exceptions import ParameterError
from ..spatial.defaults import MAX_ORDER

__all__ = [
    "ETA",
    "GEO_LAMBDA",
    "RECIPES",
    "ExperimentConfig",
    "TrainConfig",
    "experiment_config",
    "geo_weights",
    "recipe",
]

#: ``(eta1, eta2)``: the weights of ``L_binaural`` and ``L_geo`` (OWL, section 4).
ETA = (1.0, 0.01)
#: ``lambda``, the weight of ``L_EDC`` in ``L_geo`` (OWL's ablation value).
GEO_LAMBDA = 0.1


@dataclass
class TrainConfig:
    steps: int = 1000
    batch_size: int = 16
    lr: float = 2.5e-4
    weight_decay: float = 0.05
    warmup: int = 50
    alpha: tuple[float, float, float] = (1.0, 1.0, 2.0)  # events, distance, direction
    eta: tuple[float, float] = ETA  # binaural, geometric
    geo_lambda: float = GEO_LAMBDA
    sigma_azimuth: float = 0.0
    seed: int = 0
    checkpoint_every: int = 100
    log_every: int = 10
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 5.0
    # Two-stage schedule: the first ``stage1_share`` of the steps use
    # ``alpha_stage1`` and no L_geo (0: one stage).
    stage1_share: float = 0.0
    alpha_stage1: tuple[float, float, float] = (1.0, 0.0, 0.0)
    geo_reduction: str = "mean"

    @property
    def stage1_steps(self) -> int:
        return round(self.steps * self.stage1_share)


RECIPES: dict[str, TrainConfig] = {
    "agl-fast": TrainConfig(),
    "owl": TrainConfig(
        batch_size=64,
        lr=1e-4,
        weight_decay=0.01,
        warmup=5000,
        alpha=(1250.0, 1.0, 2.0),
        eta=ETA,
        geo_lambda=GEO_LAMBDA,
        betas=(0.9, 0.95),
        grad_clip=1.0,
        stage1_share=0.4,
        alpha_stage1=(1.0, 0.0, 0.0),
        geo_reduction="sum",
    ),
}


def recipe(name: str, **overrides: Any) -> TrainConfig:
    """The :data:`RECIPES` entry ``name`` with some fields replaced (None: kept)."""
    if name not in RECIPES:
        raise ParameterError(f"recipe must be one of {sorted(RECIPES)}, got {name!r}")
    return replace(RECIPES[name], **{k: v for k, v in overrides.items() if v is not None})


def learning_rate(step: int, cfg: TrainConfig) -> float:
    warmup = min(cfg.warmup, cfg.stage1_steps) if cfg.stage1_steps > 0 else cfg.warmup
    if step < warmup:
        return cfg.lr * (step + 1) / warmup
    t = (step - warmup) / max(1, cfg.steps - warmup)
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


@dataclass
class ExperimentConfig:
    """Settings of :func:`run_experiment` (sizes, times in minutes/seconds)."""

    minutes: float = 15.0
    train_rooms: int = 800
    test_rooms: int = 100
    positions: int = 8
    clip_seconds: float = 1.0
    max_order: int = MAX_ORDER
    receiver: str = "auto"
    embed_dim: int = 192
    depth: int = 4
    num_heads: int = 3
    target_frame: int = 64
    ipd_scale: float = 31.25
    batch_size: int = 32
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.05
    steps: int | None = None
    sigma_azimuth: float = 10.0
    sigma_elevation: float = 5.0
    sigma_distance: float = 1.0
    freq_mask: int = 0
    time_mask: int = 0
    token_mask: float = 0.0
    eval_seconds: float = 45.0
    seed: int = 0
    workers: int = 2
    recordings: list[str] = field(default_factory=list)
    speech: bool = True
    # Loss and optimiser (the defaults are the ``agl-fast`` recipe of this
    # experiment; :func:`experiment_config` gives ``owl``).
    recipe: str = "agl-fast"
    alpha: tuple[float, float, float] = (1.0, 1.0, 1.0)  # events, distance, direction
    # binaural, geometric; None: agl_fast.sage.rir's ETA and GEO_LAMBDA
    # (read when the run starts, so that importing this module needs no torch)
    eta: tuple[float, float] | None = None
    geo_lambda: float | None = None
    geo_reduction: str = "mean"
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 5.0
    stage1_share: float = 0.0
    alpha_stage1: tuple[float, float, float] = (1.0, 0.0, 0.0)
    # The RIR branch (0: none): BRIRs cut or zero-padded to ``rir_length``
    # samples, predicted from the room's depth panorama and the audio tokens.
    rir_length: int = 0
    rir_width: int = 8


def experiment_config(recipe: str = "agl-fast", **overrides: Any) -> ExperimentConfig:
    """An :class:`ExperimentConfig` for a named recipe, some fields replaced
    (None: kept).

    ``agl-fast`` is the experiment's own settings (the dataclass defaults);
    ``owl`` takes from :data:`RECIPES` ``["owl"]`` the
    paper's loss weights (``alpha``, ``eta``, ``lambda``, the summed L1 of
    Eq. 3), optimiser (lr, weight decay, betas, clipping), batch size,
    warm-up and two-stage schedule; the stage split and the warm-up (at most
    the first stage) are shares of the run, in time when the run is bounded
    by its budget.
    """
    if recipe not in RECIPES:
        raise ParameterError(f"recipe must be one of {sorted(RECIPES)}, got {recipe!r}")
    base = ExperimentConfig(recipe=recipe)
    if recipe == "owl":
        r = RECIPES["owl"]
        base = replace(
            base, alpha=r.alpha, eta=r.eta, geo_lambda=r.geo_lambda,
            geo_reduction=r.geo_reduction, betas=r.betas, grad_clip=r.grad_clip,
            stage1_share=r.stage1_share, alpha_stage1=r.alpha_stage1, lr=r.lr,
            weight_decay=r.weight_decay, batch_size=r.batch_size, warmup=r.warmup,
        )  # fmt: skip
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def geo_weights(cfg: ExperimentConfig) -> tuple[tuple[float, float], float]:
    """``(eta1, eta2)`` and ``lambda`` of the run (the branch's defaults for None)."""
    eta = ETA if cfg.eta is None else cfg.eta
    return eta, GEO_LAMBDA if cfg.geo_lambda is None else cfg.geo_lambda
