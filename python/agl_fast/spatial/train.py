"""Training SAGE on a simulated dataset (:mod:`agl_fast.spatial.dataset`).

Features are the Rust ``bat`` features of each scene's mixture, computed
once. Targets: the events of the scene (multi-hot over the dataset's event
names) and the direction and distance class of its first source. Loss:
``L = alpha1 * BCE(events) + alpha2 * CE(distance) + alpha3 * (CE(azimuth) +
CE(elevation))``. AdamW with a linear warm-up and cosine decay; mixed
precision (bfloat16 autocast) on CUDA. Batches are drawn from ``(seed,
step)`` alone, so a run resumed from a checkpoint continues exactly as an
uninterrupted one.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from ..presets import bat
from ..torch.sage import SageConfig, SageEncoder
from .dataset import load_scene
from .metrics import angular_error

__all__ = ["TrainConfig", "evaluate", "load_split", "train"]


@dataclass
class TrainConfig:
    steps: int = 1000
    batch_size: int = 16
    lr: float = 2.5e-4
    weight_decay: float = 0.05
    warmup: int = 50
    alpha: tuple[float, float, float] = (1.0, 1.0, 1.0)  # events, distance, direction
    seed: int = 0
    checkpoint_every: int = 100
    log_every: int = 10


def load_split(root: str | Path, split: str, vocab: list[str] | None = None) -> dict[str, Any]:
    """Features and targets of one split: ``x`` ``[n, 4, frames, 128]`` and
    ``events`` (multi-hot), ``distance``, ``azimuth``, ``elevation``."""
    root = Path(root)
    rows = [json.loads(x) for x in (root / "scenes.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["split"] == split]
    if not rows:
        raise ValueError(f"no {split!r} scenes in {root}")
    vocab = vocab or sorted({e for r in rows for e in r["events"]})
    audio = np.stack([load_scene(root, r["id"])["audio"] for r in rows])
    events = np.zeros((len(rows), len(vocab)), dtype=np.float32)
    for i, r in enumerate(rows):
        for e in r["events"]:
            if e in vocab:
                events[i, vocab.index(e)] = 1.0
    lab = [r["labels"][0] for r in rows]
    return {
        "x": torch.from_numpy(np.asarray(bat(audio))),
        "events": torch.from_numpy(events),
        "distance": torch.tensor([d["distance_class"] for d in lab]),
        "azimuth": torch.tensor([d["azimuth"] for d in lab]),
        "elevation": torch.tensor([d["elevation"] for d in lab]),
        "vocab": vocab,
    }


def _loss(model: SageEncoder, d: dict[str, Any], idx: torch.Tensor, alpha: Any) -> torch.Tensor:
    ev, dis, az, el, _ = model(d["x"][idx])
    return (
        alpha[0] * F.binary_cross_entropy_with_logits(ev.float(), d["events"][idx])
        + alpha[1] * F.cross_entropy(dis.float(), d["distance"][idx])
        + alpha[2] * (F.cross_entropy(az.float(), d["azimuth"][idx])
                      + F.cross_entropy(el.float(), d["elevation"][idx]))
    )  # fmt: skip


def _lr(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


@torch.no_grad()
def evaluate(model: SageEncoder, d: dict[str, Any], alpha: Any = (1, 1, 1)) -> dict[str, float]:
    """Loss, mean azimuth/direction error (degrees) and distance error rate."""
    model.eval()
    loss = float(_loss(model, d, torch.arange(len(d["x"])), alpha))
    _, dis, az, el, _ = model(d["x"])
    az_p, el_p = az.argmax(1).numpy(), el.argmax(1).numpy()
    az_t, el_t = d["azimuth"].numpy(), d["elevation"].numpy()
    err = angular_error(az_p, el_p, az_t, el_t)
    az_err = np.abs((az_p - az_t + 180) % 360 - 180)
    d_err = np.abs(dis.argmax(1).numpy() - d["distance"].numpy()) * 0.5
    return {
        "loss": loss,
        "azimuth_error_deg": float(np.mean(az_err)),
        "direction_error_deg": float(np.mean(err)),
        "distance_error_rate": float(np.mean(d_err > 0.5)),
    }


def train(
    data: str | Path,
    out: str | Path,
    *,
    model_config: SageConfig,
    config: TrainConfig,
    resume: bool = False,
    device: str | None = None,
    until: int | None = None,
    log: Any = print,
) -> tuple[SageEncoder, dict[str, Any]]:
    """Train (or resume) and return the model and the final metrics.

    ``until`` stops this run after that many steps in all (the schedule still
    spans ``config.steps``), leaving a checkpoint to resume from.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    ckpt_path = out / "checkpoint.pt"
    state = torch.load(ckpt_path, map_location="cpu") if resume and ckpt_path.exists() else None
    vocab = state["vocab"] if state else None
    tr = load_split(data, "train", vocab)
    cfg_dict = dict(state["model_config"]) if state else model_config.to_dict()
    cfg_dict["num_classes"] = len(tr["vocab"])
    mcfg = SageConfig(**cfg_dict)
    torch.manual_seed(config.seed)
    model = SageEncoder(mcfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    step = 0
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = int(state["step"])
    d = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in tr.items()}
    amp = dev.type == "cuda"

    def save() -> None:
        torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
             "model_config": mcfg.to_dict(), "vocab": tr["vocab"]},
            ckpt_path,
        )  # fmt: skip

    t0 = time.perf_counter()
    n = len(d["x"])
    last = min(config.steps, until or config.steps)
    while step < last:
        model.train()
        g = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        idx = torch.randint(0, n, (min(config.batch_size, n),), generator=g).to(dev)
        for group in opt.param_groups:
            group["lr"] = _lr(step, config)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = _loss(model, d, idx, config.alpha)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        step += 1
        if log is not None and step % config.log_every == 0:
            log(f"step {step} loss {float(loss.detach()):.4f} ({time.perf_counter() - t0:.1f} s)")
        if step % config.checkpoint_every == 0 or step == last:
            save()
    model = model.cpu()
    metrics: dict[str, Any] = {"step": step, "train": evaluate(model, tr, config.alpha)}
    try:
        metrics["test"] = evaluate(model, load_split(data, "test", tr["vocab"]), config.alpha)
    except ValueError:
        pass
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return model, metrics
