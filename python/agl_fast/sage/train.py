"""Training SAGE on a simulated dataset (:mod:`agl_fast.spatial.dataset`).

Features are the Rust ``bat`` features of each scene's mixture, computed
once. Targets: the events of the scene (multi-hot over the dataset's event
names) and the direction and distance class of its first source. Loss (OWL,
appendix C): ``L = eta1 * L_binaural + eta2 * L_geo`` with ``L_binaural =
alpha1 * BCE(events) + alpha2 * CE(distance) + alpha3 * (CE(azimuth) +
CE(elevation))`` and, when the model has the RIR branch
(``SageConfig.rir_length > 0``), ``L_geo = ||R - R_hat||_1 + lambda * L_EDC``
on the first source's BRIR, from the scene's panoramic depth image
(:func:`agl_fast.sage.rir.geo_loss`).

The recipe (loss weights, optimiser, schedule) is a
:class:`~agl_fast.sage.recipes.TrainConfig`, one of
:data:`~agl_fast.sage.recipes.RECIPES` (``agl-fast spatial train --recipe``);
the steps are those of :func:`agl_fast.torch.loop.run_steps`.

Azimuth targets may be circular Gaussians (``sigma_azimuth`` degrees)
instead of one-hot. Mixed precision (bfloat16 autocast) on CUDA. Batches are
drawn from ``(seed, step)`` alone, so a run resumed from a checkpoint
continues exactly as an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from ..exceptions import CheckpointFormatError, ModelStateError, ParameterError
from ..presets import bat
from ..spatial.dataset import load_scenes
from ..spatial.metrics import angular_error, mean_average_precision
from ..torch.checkpoint import read_checkpoint, write_checkpoint
from ..torch.loop import Optimiser, Step, run_steps
from .model import SageConfig, SageEncoder
from .recipes import TrainConfig, learning_rate
from .rir import geo_loss, geometry_vector

__all__ = [
    "binaural_loss",
    "evaluate",
    "load_split",
    "soft_cross_entropy",
    "soft_targets",
    "table2_figures",
    "train",
]


def load_split(
    root: str | Path,
    split: str,
    vocab: list[str] | None = None,
    *,
    rir_length: int = 0,
    depth: bool = True,
) -> dict[str, Any]:
    """Features and targets of one split: ``x`` ``[n, 4, frames, 128]`` and
    ``events`` (multi-hot), ``distance``, ``azimuth``, ``elevation``; with
    ``rir_length > 0`` also ``rir`` ``[n, 2, rir_length]`` (the first
    source's BRIR, cut or zero-padded), ``geometry`` ``[n, 10]``
    (:func:`agl_fast.sage.rir.geometry_vector`, the ablation) and,
    with ``depth``, ``depth`` ``[n, H, W]`` (the panoramas, m)."""
    root = Path(root)
    rows = [json.loads(x) for x in (root / "scenes.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["split"] == split]
    if not rows:
        raise ParameterError(f"no {split!r} scenes in {root}")
    vocab = vocab or sorted({e for r in rows for e in r["events"]})
    scenes = load_scenes(root, [r["id"] for r in rows])
    audio = np.stack([z["audio"] for z in scenes])
    events = np.zeros((len(rows), len(vocab)), dtype=np.float32)
    for i, r in enumerate(rows):
        for e in r["events"]:
            if e in vocab:
                events[i, vocab.index(e)] = 1.0
    lab = [r["labels"][0] for r in rows]
    out = {
        "x": torch.from_numpy(np.asarray(bat(audio))),
        "events": torch.from_numpy(events),
        "distance": torch.tensor([d["distance_class"] for d in lab]),
        "azimuth": torch.tensor([d["azimuth"] for d in lab]),
        "elevation": torch.tensor([d["elevation"] for d in lab]),
        "vocab": vocab,
    }
    if rir_length > 0:
        rir = np.zeros((len(rows), 2, rir_length), dtype=np.float32)
        for i, z in enumerate(scenes):
            h = z["brir_0"][:, :rir_length]
            rir[i, :, : h.shape[1]] = h
        out["rir"] = torch.from_numpy(rir)
        geo = [geometry_vector(r["geometry"]) for r in rows if "geometry" in r]
        if len(geo) == len(rows):
            out["geometry"] = torch.tensor(geo, dtype=torch.float32)
        if depth:
            if any("depth" not in z for z in scenes):
                raise ParameterError(
                    f"{root}: scenes without depth images; simulate the dataset again "
                    "(or train with the geometry ablation)"
                )
            out["depth"] = torch.from_numpy(np.stack([z["depth"] for z in scenes]))
    return out


def soft_targets(
    index: torch.Tensor, n_classes: int, sigma: float, *, circular: bool = False
) -> torch.Tensor:
    """Gaussian target distributions over ordered classes.

    Parameters
    ----------
    index : torch.Tensor [shape=(batch,), dtype=int64]
        True class of each example.
    n_classes : int
        Number of classes (one degree or one distance step each).
    sigma : float >= 0
        Standard deviation in classes; 0 gives one-hot targets.
    circular : bool
        Measure the class distance around a circle (azimuth).

    Returns
    -------
    torch.Tensor [shape=(batch, n_classes), dtype=float32]
        Rows summing to 1.
    """
    k = torch.arange(n_classes, device=index.device)
    diff = (k[None] - index[:, None]).abs()
    if circular:
        diff = torch.minimum(diff, n_classes - diff)
    if sigma <= 0:
        return (diff == 0).float()
    w = torch.exp(-0.5 * (diff.float() / sigma) ** 2)
    return w / w.sum(dim=1, keepdim=True)


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy ``-sum(target * log_softmax(logits))`` over the batch."""
    return -(target * torch.log_softmax(logits.float(), dim=-1)).sum(-1).mean()


def binaural_loss(
    outputs: tuple[torch.Tensor, ...], targets: dict[str, torch.Tensor], cfg: TrainConfig,
    *, stage1: bool = False,
) -> torch.Tensor:  # fmt: skip
    """``L_binaural = alpha1 BCE(events) + alpha2 CE(distance) + alpha3 (CE(azimuth)
    + CE(elevation))`` from the model's outputs ``(events, distance, azimuth,
    elevation, ...)`` and the targets ``events`` (multi-hot or mixup-weighted
    ``[b, classes]``), ``distance``, ``azimuth``, ``elevation`` (int64 ``[b]``);
    ``alpha`` is ``cfg.alpha_stage1`` in the first stage."""
    ev, dis, az, el = outputs[:4]
    alpha = cfg.alpha_stage1 if stage1 else cfg.alpha
    az_target = soft_targets(targets["azimuth"], 360, cfg.sigma_azimuth, circular=True)
    return (
        alpha[0] * F.binary_cross_entropy_with_logits(ev.float(), targets["events"])
        + alpha[1] * F.cross_entropy(dis.float(), targets["distance"])
        + alpha[2] * (soft_cross_entropy(az, az_target)
                      + F.cross_entropy(el.float(), targets["elevation"]))
    )  # fmt: skip


def table2_figures(
    events: np.ndarray, scores: np.ndarray, predicted: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
) -> dict[str, float]:  # fmt: skip
    """OWL's Table 2 measures (fractions where the paper gives percentages):
    event ``map``, ``azimuth_error_deg``, ``direction_error_deg`` (MAE,
    great-circle), ``er20`` and ``distance_error_rate`` (DER, above 0.5 m),
    from the targets ``events`` ``[n, classes]``, the event ``scores`` and
    the predicted and true ``azimuth``, ``elevation``, ``distance`` classes."""
    az_p, el_p, az_t, el_t = predicted["azimuth"], predicted["elevation"], truth["azimuth"], \
        truth["elevation"]  # fmt: skip
    err = angular_error(az_p, el_p, az_t, el_t)
    az_err = np.abs((az_p - az_t + 180) % 360 - 180)
    d_err = np.abs(predicted["distance"] - truth["distance"]) * 0.5
    return {
        "map": float(mean_average_precision(events, scores)),
        "azimuth_error_deg": float(np.mean(az_err)),
        "direction_error_deg": float(np.mean(err)),
        "er20": float(np.mean(err > 20)),
        "distance_error_rate": float(np.mean(d_err > 0.5)),
    }


def _losses(
    model: SageEncoder,
    d: dict[str, Any],
    idx: torch.Tensor,
    cfg: TrainConfig,
    step: int | None = None,
) -> dict[str, torch.Tensor]:
    tokens = model.encode(d["x"][idx])
    stage1 = step is not None and step < cfg.stage1_steps
    targets = {k: d[k][idx] for k in ("events", "distance", "azimuth", "elevation")}
    binaural = binaural_loss(model.heads(tokens), targets, cfg, stage1=stage1)
    out = {"binaural": binaural, "loss": cfg.eta[0] * binaural}
    if model.rir_decoder is not None and "rir" in d and not stage1:
        geometry = d["geometry"][idx] if model.config.rir_geometry_dim > 0 else None
        depth = d["depth"][idx] if model.config.rir_depth else None
        pred = model.predict_rir(tokens, depth, geometry)
        out["geo"] = geo_loss(pred, d["rir"][idx], lam=cfg.geo_lambda,
                              reduction=cfg.geo_reduction)  # fmt: skip
        out["loss"] = out["loss"] + cfg.eta[1] * out["geo"]
    return out


def _rows(d: dict[str, Any], idx: torch.Tensor, dev: torch.device) -> dict[str, Any]:
    """The rows ``idx`` of a split's tensors, on ``dev`` (other entries as they are)."""
    return {k: (v[idx].to(dev) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


@torch.no_grad()
def evaluate(
    model: SageEncoder, d: dict[str, Any], config: TrainConfig | None = None, *,
    batch_size: int = 64, device: str | torch.device | None = None,
) -> dict[str, float]:  # fmt: skip
    """Loss (and its binaural and geometric parts), event mAP, mean
    azimuth/direction error (degrees; the direction error is OWL's MAE),
    ER20 (share of direction errors above 20 degrees) and distance error
    rate (DER), as in OWL's Table 2 (as fractions, where the paper gives
    percentages).

    The split ``d`` stays where it is (host memory); ``batch_size`` rows at
    a time go to ``device`` (default: the model's), and only the losses,
    predicted classes and event scores come back."""
    model.eval()
    dev = torch.device(device) if device is not None else next(model.parameters()).device
    cfg = config or TrainConfig()
    n = len(d["x"])
    sums: dict[str, float] = {}
    keys = ("azimuth", "elevation", "distance")
    pred: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    scores = []
    for start in range(0, n, batch_size):
        idx = torch.arange(start, min(n, start + batch_size))
        rows = _rows(d, idx, dev)
        local = torch.arange(len(idx), device=dev)
        for k, v in _losses(model, rows, local, cfg).items():
            sums[k] = sums.get(k, 0.0) + float(v) * len(idx)
        ev, dis, az, el, _ = model(rows["x"])
        for k, o in zip(keys, (az, el, dis), strict=True):
            pred[k].append(o.argmax(1).cpu().numpy())
        scores.append(ev.float().cpu().numpy())
    predicted = {k: np.concatenate(v) for k, v in pred.items()}
    truth = {k: d[k].numpy() for k in keys}
    extra = {f"{k}_loss": v / n for k, v in sums.items() if k != "loss"}
    figures = table2_figures(d["events"].numpy(), np.concatenate(scores), predicted, truth)
    return {"loss": sums["loss"] / n, **extra, **figures}


def trim_history(history: Path, state: dict[str, Any] | None, step: int) -> None:
    """Drop the curve after the checkpoint (those steps are trained again), or
    all of it when training starts afresh."""
    if history.exists():
        kept = [
            line
            for line in history.read_text().splitlines()
            if line.strip() and state and json.loads(line)["step"] <= step
        ]
        history.write_text("".join(k + "\n" for k in kept))


def _plan(d: dict[str, Any], config: TrainConfig, first: int, last: int,
          dev: torch.device) -> Iterator[Step]:  # fmt: skip
    """Steps ``first`` to ``last``: each one batch drawn for its step from
    ``(seed, step)`` alone; only the batch goes to the device (the split
    stays in host memory)."""
    n = len(d["x"])
    for step in range(first, last):
        g = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        idx = torch.randint(0, n, (min(config.batch_size, n),), generator=g)
        yield Step([(step, _rows(d, idx, dev))], lr=learning_rate(step, config))


def _step_loss(model: SageEncoder, config: TrainConfig, dev: torch.device) -> Any:
    """The loss of a planned batch (bfloat16 autocast on CUDA)."""

    def loss(item: tuple[int, dict[str, Any]], _j: int) -> torch.Tensor:
        step, batch = item
        model.train()
        # Masks (SpecAugment, token dropping) draw from torch's global
        # generator: seeded per step so that a resumed run is exact.
        torch.manual_seed(config.seed * 1_000_003 + step + 1)
        local = torch.arange(len(batch["x"]), device=dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            return _losses(model, batch, local, config, step)["loss"]

    return loss


def _test_metrics(
    model: SageEncoder, data: str | Path, vocab: list[str], mcfg: SageConfig, use_depth: bool,
    config: TrainConfig,
) -> dict[str, Any] | None:  # fmt: skip
    """The figures on the test split, or None when the dataset has none."""
    try:
        te = load_split(data, "test", vocab, rir_length=mcfg.rir_length, depth=use_depth)
        return evaluate(model, te, config)
    except ValueError:
        return None


#: The entries of a stored-data training checkpoint.
CHECKPOINT_ENTRIES = ("model", "optimizer", "step", "model_config", "vocab")


def _resume_state(path: Path) -> dict[str, Any]:
    """The checkpoint to resume from, read with
    :func:`~agl_fast.torch.checkpoint.read_checkpoint` (no code in it runs;
    any other format is a CheckpointFormatError)."""
    state = read_checkpoint(path, required=CHECKPOINT_ENTRIES)
    try:
        SageConfig(**state["model_config"])
        ok = isinstance(state["vocab"], list)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise CheckpointFormatError(f"unreadable checkpoint {path}: bad model_config or vocab")
    return state


def _load_state(model: SageEncoder, opt: Any, state: dict[str, Any]) -> int:
    """Load a checkpoint's weights and optimiser state; returns its step."""
    try:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        return int(state["step"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        detail = " ".join(str(exc).split())[:300]
        raise ModelStateError(f"the checkpoint does not fit this run: {detail}") from exc


def train(
    data: str | Path,
    out: str | Path,
    *,
    model_config: SageConfig,
    config: TrainConfig,
    resume: bool = False,
    device: str | None = None,
    until: int | None = None,
    log: Any = None,
) -> tuple[SageEncoder, dict[str, Any]]:
    """Train (or resume) and return the model and the final metrics.

    ``until`` stops this run after that many steps in all (the schedule still
    spans ``config.steps``), leaving a checkpoint to resume from. Every
    ``config.log_every`` steps a line goes to ``log`` (default: the
    ``agl_fast.sage.train`` logger at INFO) and a JSON line ``{"step", "loss",
    "lr", "seconds"}`` is appended to ``out/history.jsonl`` (kept across
    resumes, so the file holds the whole training curve).
    """
    if log is None:
        log = logging.getLogger("agl_fast.sage.train").info
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    ckpt_path = out / "checkpoint.pt"
    state = _resume_state(ckpt_path) if resume and ckpt_path.exists() else None
    vocab = state["vocab"] if state else None
    cfg_dict = dict(state["model_config"]) if state else model_config.to_dict()
    use_depth = bool(cfg_dict.get("rir_depth", True))
    tr = load_split(data, "train", vocab, rir_length=int(cfg_dict.get("rir_length", 0)),
                    depth=use_depth)  # fmt: skip
    cfg_dict["num_classes"] = len(tr["vocab"])
    mcfg = SageConfig(**cfg_dict)
    torch.manual_seed(config.seed)
    model = SageEncoder(mcfg).to(dev)
    opt = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=config.betas
    )
    step = _load_state(model, opt, state) if state else 0
    history = out / "history.jsonl"
    trim_history(history, state, step)

    def save() -> None:
        write_checkpoint(
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
             "model_config": mcfg.to_dict(), "vocab": tr["vocab"]},
            ckpt_path,
        )  # fmt: skip

    t0 = time.perf_counter()
    last = min(config.steps, until or config.steps)

    def on_step(value: float, _planned: Step) -> None:
        nonlocal step
        step += 1
        if step % config.log_every == 0:
            secs = time.perf_counter() - t0
            log(f"step {step} loss {value:.4f} ({secs:.1f} s)")
            record = {
                "step": step,
                "loss": value,
                "lr": learning_rate(step - 1, config),
                "seconds": secs,
            }
            with open(history, "a") as hist:
                hist.write(json.dumps(record) + "\n")
        if step % config.checkpoint_every == 0 or step == last:
            save()

    optimiser = Optimiser(opt, model.parameters(), config.grad_clip)
    run_steps(optimiser, _plan(tr, config, step, last, dev), _step_loss(model, config, dev),
              device=dev, on_step=on_step)  # fmt: skip
    metrics: dict[str, Any] = {"step": step, "train": evaluate(model, tr, config)}
    test = _test_metrics(model, data, tr["vocab"], mcfg, use_depth, config)
    model = model.cpu()
    if test is not None:
        metrics["test"] = test
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return model, metrics
