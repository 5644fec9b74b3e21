"""Loss and figures of the localisation experiment (:mod:`agl_fast.sage.experiment`).

The loss of a training step (BAT heads with soft targets, plus OWL's
``L_geo`` when the model carries the RIR branch) and the direction and
distance figures on a set of evaluation batches. Needs torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .recipes import ExperimentConfig, geo_weights

__all__ = ["evaluate_localisation", "experiment_loss"]


def experiment_loss(
    model: Any, b: dict[str, Any], cfg: ExperimentConfig, stage1: bool = False
) -> Any:
    """Loss parts: ``loss`` and ``binaural``, and ``geo`` (``L_geo``) when the
    model has the RIR branch and the step is past the first stage."""
    from torch.nn import functional as F

    from .rir import geo_loss
    from .train import soft_cross_entropy, soft_targets

    tokens = model.encode(b["x"])
    ev, dis, az, el, _ = model.heads(tokens)
    a = cfg.alpha_stage1 if stage1 else cfg.alpha
    az_target = soft_targets(b["azimuth"], 360, cfg.sigma_azimuth, circular=True)
    binaural = (
        a[0] * F.binary_cross_entropy_with_logits(ev.float(), b["events"])
        + a[1] * soft_cross_entropy(dis, soft_targets(b["distance"], 21, cfg.sigma_distance))
        + a[2] * (soft_cross_entropy(az, az_target)
                  + soft_cross_entropy(el, soft_targets(b["elevation"], 180, cfg.sigma_elevation)))
    )  # fmt: skip
    eta, lam = geo_weights(cfg)
    out = {"binaural": binaural, "loss": eta[0] * binaural}
    if model.rir_decoder is not None and "rir" in b and not stage1:
        pred = model.predict_rir(tokens, b["depth"])
        out["geo"] = geo_loss(pred, b["rir"], lam=lam, reduction=cfg.geo_reduction)
        out["loss"] = out["loss"] + eta[1] * out["geo"]
    return out


def _lateral(az: np.ndarray) -> np.ndarray:
    # Angle from the median plane (BAT azimuth: 0 right, 90 ahead): front
    # and back directions with the same lateral angle coincide.
    return np.degrees(np.arcsin(np.clip(np.cos(np.radians(az)), -1.0, 1.0)))


def evaluate_localisation(
    model: Any, sets: list[dict[str, Any]], cfg: ExperimentConfig
) -> dict[str, float]:
    import torch

    from ..spatial.metrics import angular_error
    from .rir import geo_loss

    model.eval()
    lam = geo_weights(cfg)[1]
    az_p, el_p, d_p, az_t, el_t, d_t, geo = [], [], [], [], [], [], []
    with torch.no_grad():
        for b in sets:
            tokens = model.encode(b["x"])
            _, dis, az, el, _ = model.heads(tokens)
            if model.rir_decoder is not None and "rir" in b:
                pred = model.predict_rir(tokens, b["depth"])
                g = geo_loss(pred, b["rir"], lam=lam, reduction=cfg.geo_reduction)
                geo.append(float(g) * len(b["x"]))
            az_p.append(az.argmax(1).numpy())
            el_p.append(el.argmax(1).numpy())
            d_p.append(dis.argmax(1).numpy())
            az_t.append(b["azimuth"].numpy())
            el_t.append(b["elevation"].numpy())
            d_t.append(b["distance"].numpy())
    ap, ep, dp = np.concatenate(az_p), np.concatenate(el_p), np.concatenate(d_p)
    at, et, dt = np.concatenate(az_t), np.concatenate(el_t), np.concatenate(d_t)
    err = angular_error(ap, ep, at, et)
    az_err = np.abs((ap - at + 180) % 360 - 180)
    out = {
        "clips": int(ap.size),
        "azimuth_error_deg": float(np.mean(az_err)),
        "direction_error_deg": float(np.mean(err)),
        "er20": float(np.mean(err > 20)),
        "lateral_error_deg": float(np.mean(np.abs(_lateral(ap) - _lateral(at)))),
        # Predicted and true directions on opposite sides of the interaural axis.
        "front_back_confusion": float(np.mean(np.sin(np.radians(ap)) * np.sin(np.radians(at)) < 0)),
        "distance_error_rate": float(np.mean(np.abs(dp - dt) * 0.5 > 0.5)),
    }
    if geo:
        out["geo_loss"] = sum(geo) / ap.size
    return out
