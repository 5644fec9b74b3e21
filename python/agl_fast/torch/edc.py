"""Differentiable energy decay curves and the EDC loss of OWL.

:func:`edc_loss` matches :func:`agl_fast.room.edc_distance` with
``method='none'``: both take the Schroeder EDC of the whole IR, normalise it
to 0 dB at the first sample and average ``|EDC_pred_dB - EDC_ref_dB|`` over
the first ``min(L_pred, L_ref)`` samples where the reference is at or above
``floor_db``. One difference: where a predicted EDC reaches exactly zero
(an all-zero tail) the Rust distance skips the sample, while here the level
is clamped at ``10 log10(eps)`` so that the loss stays differentiable.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import ParameterError


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("agl_fast.torch needs PyTorch: pip install 'agl-fast[torch]'") from exc
    return torch


def edc_db(h: Any, *, eps: float = 1e-12) -> Any:
    """Normalised Schroeder energy decay curve in dB.

    Parameters
    ----------
    h : torch.Tensor [shape=(..., L)]
        Impulse responses (any leading axes).
    eps : float > 0
        Floor of the normalised energy before the logarithm.

    Returns
    -------
    torch.Tensor [shape=(..., L)]
        ``10 log10(max(EDC[n] / EDC[0], eps))``, differentiable in ``h``.
    """
    torch = _torch()
    e = h * h
    edc = torch.flip(torch.cumsum(torch.flip(e, dims=[-1]), dim=-1), dims=[-1])
    tiny = torch.finfo(edc.dtype).tiny
    edc = edc / edc[..., :1].clamp_min(tiny)
    return 10.0 * torch.log10(edc.clamp_min(eps))


def edc_loss(
    pred: Any,
    reference: Any,
    *,
    floor_db: float = -60.0,
    reduction: str = "mean",
    eps: float = 1e-12,
) -> Any:
    """EDC loss: mean absolute dB difference over the valid range.

    Parameters
    ----------
    pred, reference : torch.Tensor [shape=(..., L_pred)], [shape=(..., L_ref)]
        Predicted and reference impulse responses with the same leading axes.
    floor_db : float <= 0
        Lowest reference level taken into account.
    reduction : {'mean', 'sum', 'none'}
        How the per-curve distances ``[...]`` are reduced.
    eps : float > 0
        As in :func:`edc_db`.

    Returns
    -------
    torch.Tensor
        A scalar, or the per-curve distances (dB) with ``reduction='none'``.
    """
    torch = _torch()
    if reduction not in ("mean", "sum", "none"):
        raise ParameterError(
            f"reduction must be 'mean', 'sum' or 'none', got reduction={reduction!r}"
        )
    if floor_db > 0:
        raise ParameterError(f"floor_db must be <= 0, got floor_db={floor_db}")
    if pred.shape[:-1] != reference.shape[:-1]:
        raise ParameterError(
            f"pred and reference must share leading axes, got {tuple(pred.shape)} and "
            f"{tuple(reference.shape)}"
        )
    n = min(pred.shape[-1], reference.shape[-1])
    a = edc_db(pred, eps=eps)[..., :n]
    b = edc_db(reference, eps=eps)[..., :n]
    ref_energy = torch.flip(
        torch.cumsum(torch.flip(reference * reference, dims=[-1]), dim=-1), dims=[-1]
    )[..., :n]
    mask = (b >= floor_db) & (ref_energy > 0)
    diff = torch.where(mask, (a - b).abs(), torch.zeros_like(a))
    per = diff.sum(dim=-1) / mask.sum(dim=-1).clamp_min(1).to(diff.dtype)
    if reduction == "none":
        return per
    return per.mean() if reduction == "mean" else per.sum()
