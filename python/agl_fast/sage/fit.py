"""SAGE training on streamed scenes (:mod:`agl_fast.sage.stream`), at scale.

One loop for one CPU, one GPU or several through ``torchrun``
(DistributedDataParallel: NCCL on CUDA, gloo on the CPU; the environment
``torchrun`` sets, ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, turns it on):

* batches made by DataLoader workers from (BRIR, source) indices, so host
  memory does not grow with the number of scenes;
* mixed precision (``precision``: ``'bf16'`` or ``'fp16'`` autocast, fp16
  with a gradient scaler), gradient accumulation (``accum`` batches per
  optimiser step);
* a checkpoint every ``checkpoint_every`` optimiser steps holding the model,
  the optimiser, the learning-rate schedule, the gradient scaler, the RNG
  states and the data position (epoch, batch): a resumed run continues the
  loss curve of an uninterrupted one exactly (same device and world size);
* ``init``: start from an AudioMAE or Spatial-AST checkpoint, strictly
  (:func:`agl_fast.sage.model.load_checkpoint`) or with a key report
  (:func:`agl_fast.sage.model.load_partial`);
* evaluation in batches on the training device (:func:`evaluate_stream`).

The loss is :func:`agl_fast.sage.train.binaural_loss` with the recipe's
``alpha`` (two stages as :class:`~agl_fast.sage.recipes.TrainConfig`
describes); the schedule is the recipe's warm-up and cosine over the
optimiser steps of all epochs. The RIR branch is not trained here (the
bank holds no depth images); :func:`agl_fast.sage.train.train` trains it
on a stored dataset.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from ..exceptions import CheckpointFormatError, ModelStateError, ParameterError
from ..torch.checkpoint import read_checkpoint, write_checkpoint
from ..torch.loop import Optimiser, Processes, Step, run_steps, start_processes
from .model import SageConfig, SageEncoder, load_checkpoint, load_partial
from .recipes import TrainConfig, learning_rate
from .stream import RirBank, StreamConfig
from .train import binaural_loss, table2_figures

__all__ = ["PRECISIONS", "FitConfig", "evaluate_stream", "fit", "init_model"]

logger = logging.getLogger("agl_fast.sage.fit")

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class FitConfig:
    """Loop settings: ``epochs`` of the stream, ``accum`` batches per
    optimiser step, ``precision`` (``fp32``, ``bf16``, ``fp16``),
    ``workers`` DataLoader processes, a checkpoint every
    ``checkpoint_every`` optimiser steps, ``eval_scenes`` test clips at the
    end (0: none) in batches of ``eval_batch``."""

    epochs: int = 1
    accum: int = 1
    precision: str = "fp32"
    workers: int = 0
    checkpoint_every: int = 100
    log_every: int = 10
    eval_scenes: int = 0
    eval_batch: int = 64


def _autocast(dev: torch.device, precision: str) -> Any:
    if precision not in PRECISIONS:
        raise ParameterError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    dtype = PRECISIONS[precision]
    if dtype is None:
        return nullcontext()
    return torch.autocast(dev.type, dtype=dtype)


def init_model(model: SageEncoder, path: str | Path, *, strict: bool = True) -> dict[str, Any]:
    """Load an AudioMAE or Spatial-AST checkpoint (``{'model': ...}``
    wrappers and ``module.`` prefixes accepted) into ``model``.

    ``strict``: every encoder and head entry must be there and nothing else
    (:class:`~agl_fast.exceptions.ModelStateError` otherwise; OWL's released
    SAGE, which has no direction and distance heads, leaves those at their
    initialisation: ``layout`` ``'owl-sage'`` and ``kept`` in the report,
    :func:`agl_fast.sage.model.load_checkpoint`); else the
    entries whose name and shape match are loaded and the report
    (``loaded``, ``missing``, ``unexpected``, ``mismatched``) is returned
    and logged."""
    import argparse

    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"--init: no such checkpoint: {path}")
    try:
        # Released AudioMAE / Spatial-AST files carry their argparse settings.
        state = read_checkpoint(path, own_format=False, allow=[argparse.Namespace])
    except CheckpointFormatError as exc:
        raise ModelStateError(f"{path}: not a readable torch checkpoint ({exc})") from exc
    if strict:
        try:
            loaded = load_checkpoint(model, state, strict=True)
        except RuntimeError as exc:  # names or shapes (load_state_dict's own error)
            detail = " ".join(str(exc).split())
            raise ModelStateError(f"{path} does not load strictly: {detail}") from exc
        report: dict[str, Any] = {**loaded, "strict": True}
    else:
        report = {**load_partial(model, state), "strict": False}
        logger.info("init from %s: %d loaded, %d missing, %d unexpected, %d mismatched", path,
                    len(report["loaded"]), len(report["missing"]), len(report["unexpected"]),
                    len(report["mismatched"]))  # fmt: skip
    return report


def _rng_state(dev: torch.device) -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if dev.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(dev)
    return state


def _set_rng_state(state: dict[str, Any], dev: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if dev.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], dev)


def _targets(batch: dict[str, Any], dev: torch.device) -> dict[str, torch.Tensor]:
    keys = ("events", "distance", "azimuth", "elevation")
    return {k: batch[k].to(dev, non_blocking=True) for k in keys}


@torch.no_grad()
def evaluate_stream(
    model: SageEncoder, batches: Any, config: TrainConfig, *, device: str | torch.device = "cpu",
    precision: str = "fp32",
) -> dict[str, Any]:  # fmt: skip
    """Loss and OWL's Table 2 measures (:func:`agl_fast.sage.train.table2_figures`)
    over ``batches`` (dicts as :class:`~agl_fast.sage.stream.StreamingScenes`
    yields), one batch at a time on ``device``: host memory holds the
    predicted classes and event scores, not the clips. Also ``n``,
    ``seconds`` and ``clips_per_s`` (data making included)."""
    dev = torch.device(device)
    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    keys = ("azimuth", "elevation", "distance")
    pred: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    true: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    scores, events = [], []
    t0 = time.perf_counter()
    for batch in batches:
        x, tg = batch["x"].to(dev, non_blocking=True), _targets(batch, dev)
        with _autocast(dev, precision):
            out = model(x)
        total += float(binaural_loss(out, tg, config)) * len(x)
        n += len(x)
        for k, o in zip(keys, (out[2], out[3], out[1]), strict=True):
            pred[k].append(o.argmax(1).cpu().numpy())
            true[k].append(batch[k].numpy())
        scores.append(out[0].float().cpu().numpy())
        events.append(batch["events"].numpy())
    model.train(was_training)
    if n == 0:
        raise ParameterError("no evaluation batches")
    cat = {k: np.concatenate(v) for k, v in pred.items()}
    truth = {k: np.concatenate(v) for k, v in true.items()}
    figures = table2_figures(np.concatenate(events), np.concatenate(scores), cat, truth)
    secs = time.perf_counter() - t0
    return {"loss": total / n, "n": n, **figures, "seconds": secs, "clips_per_s": n / secs}


class _State:
    """Model, optimiser, schedule, scaler and data position of a run."""

    def __init__(self, model: SageEncoder, cfg: TrainConfig, dev: torch.device, fp16: bool):
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr,
                                     weight_decay=cfg.weight_decay, betas=cfg.betas)  # fmt: skip
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: learning_rate(s, cfg) / cfg.lr
        )
        self.scaler = torch.amp.GradScaler(dev.type, enabled=fp16)
        self.step, self.epoch, self.batch = 0, 0, 0
        self.stream_keys: dict[str, Any] | None = None

    def save(self, path: Path, extra: dict[str, Any], dev: torch.device) -> None:
        write_checkpoint(
            {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
             "scheduler": self.sched.state_dict(), "scaler": self.scaler.state_dict(),
             "step": self.step, "epoch": self.epoch, "batch": self.batch,
             "rng": _rng_state(dev), **extra},
            path,
        )  # fmt: skip

    def load(self, state: dict[str, Any], dev: torch.device) -> None:
        try:
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["optimizer"])
            self.sched.load_state_dict(state["scheduler"])
            self.scaler.load_state_dict(state["scaler"])
            self.step, self.epoch, self.batch = int(state["step"]), int(state["epoch"]), \
                int(state["batch"])  # fmt: skip
            _set_rng_state(state["rng"], dev)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            detail = " ".join(str(exc).split())[:300]
            raise ModelStateError(f"the checkpoint does not fit this run: {detail}") from exc


def _model_config(state: dict[str, Any]) -> SageConfig:
    """The model settings a checkpoint holds (ModelStateError if they are not)."""
    try:
        return SageConfig(**state["model_config"])
    except (TypeError, ValueError) as exc:
        raise ModelStateError(f"the checkpoint's model_config is not one: {exc}") from exc


def _build(
    sources: Any, model_config: SageConfig, cfg: TrainConfig, state: dict[str, Any] | None,
    init: str | Path | None, init_strict: bool,
) -> tuple[SageEncoder, dict[str, Any] | None]:  # fmt: skip
    if state is not None:
        if state["vocab"] != list(sources.vocab):
            raise ModelStateError("the checkpoint's event vocabulary differs from the sources'")
        mcfg = _model_config(state)
    else:
        mcfg = SageConfig(**{**model_config.to_dict(), "num_classes": len(sources.vocab)})
    if mcfg.rir_length > 0:
        raise ParameterError("the streamed trainer has no RIR branch: rir_length must be 0")
    torch.manual_seed(cfg.seed)
    model = SageEncoder(mcfg)
    report = init_model(model, init, strict=init_strict) if init and state is None else None
    return model, report


def _epoch(
    run: _State, net: Any, loader: Any, cfg: TrainConfig, loop: FitConfig, ctx: dict[str, Any],
) -> bool:  # fmt: skip
    """Train over ``loader`` (from ``run.batch`` on); False once ``until`` is reached."""
    dev, dist = ctx["device"], ctx["dist"]

    def plan() -> Iterator[Step]:
        batches = iter(loader)
        while True:
            micro = list(itertools.islice(batches, loop.accum))
            if len(micro) < loop.accum:
                return
            yield Step(micro)  # the learning rate is the scheduler's
            if run.batch == 0 or run.step >= ctx["last"]:
                return

    def loss(batch: dict[str, Any], _j: int) -> torch.Tensor:
        with _autocast(dev, loop.precision):
            out = net(batch["x"].to(dev, non_blocking=True))
        return binaural_loss(out, _targets(batch, dev), cfg, stage1=run.step < cfg.stage1_steps)

    def sync(last: bool) -> Any:
        return net.no_sync() if dist.world > 1 and not last else nullcontext()

    def on_step(value: float, step: Step) -> None:
        run.sched.step()
        run.step += 1
        run.batch = int(step.micro[-1]["batch"]) + 1
        if run.batch >= ctx["batches_used"]:
            run.epoch, run.batch = run.epoch + 1, 0
        ctx["on_step"](run, value)

    opt = Optimiser(run.opt, run.model.parameters(), cfg.grad_clip, run.scaler, dist.world)
    run_steps(opt, plan(), loss, device=dev, sync=sync, on_step=on_step)
    return run.step < ctx["last"]


def _position_keys(stream: StreamConfig, loop: FitConfig) -> dict[str, Any]:
    """The settings a data position depends on (a resume must keep them)."""
    return {"scenes": stream.scenes, "batch_size": stream.batch_size, "seed": stream.seed,
            "seconds": stream.seconds, "mixup": stream.mixup, "weighted": stream.weighted,
            "accum": loop.accum, "epochs": loop.epochs}  # fmt: skip


#: The entries of a streamed-training checkpoint.
CHECKPOINT_ENTRIES = ("model", "optimizer", "scheduler", "scaler", "step", "epoch", "batch",
                      "rng", "model_config", "vocab")  # fmt: skip


def _open_state(path: Path, resume: bool) -> dict[str, Any] | None:
    """The checkpoint to resume from (none without ``resume`` or a file);
    read with :func:`~agl_fast.torch.checkpoint.read_checkpoint`, so a file
    of any other format is refused and no code in it runs."""
    if not (resume and path.exists()):
        return None
    return read_checkpoint(path, required=CHECKPOINT_ENTRIES)


def _loader(bank: Any, sources: Any, stream: StreamConfig, *, epoch: int, start: int,
            dist: Processes, workers: int) -> DataLoader:  # type: ignore[type-arg]  # fmt: skip
    ds = bank.scenes(sources, stream, epoch=epoch, start=start, rank=dist.rank,
                     world=dist.world)  # fmt: skip
    # Its own generator: making a loader must not draw from the global RNG
    # (the masks' generator), or a resumed run would draw differently.
    g = torch.Generator().manual_seed(stream.seed * 1_000_003 + epoch)
    return DataLoader(ds, batch_size=None, num_workers=workers, generator=g)


def _on_step(out: Path, dist: Processes, loop: FitConfig, log: Any, extra: dict[str, Any],
             dev: torch.device) -> Any:  # fmt: skip
    """After each optimiser step: the history line and the checkpoint (rank 0)."""
    t0 = time.perf_counter()

    def on_step(run: _State, value: float) -> None:
        if not dist.main:
            return
        if run.step % loop.log_every == 0:
            secs = time.perf_counter() - t0
            log(f"step {run.step} loss {value:.6f} ({secs:.1f} s)")
            record = {"step": run.step, "epoch": run.epoch, "loss": value,
                      "lr": run.sched.get_last_lr()[0], "seconds": secs}  # fmt: skip
            with open(out / "history.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
        if run.step % loop.checkpoint_every == 0:
            run.save(out / "checkpoint.pt", extra, dev)

    return on_step


def _prepare(
    out: Path, sources: Any, model_config: SageConfig, cfg: TrainConfig, loop: FitConfig,
    dist: Processes, dev: torch.device, opts: dict[str, Any],
) -> tuple[_State, Any, dict[str, Any] | None]:  # fmt: skip
    """The run (fresh, initialised or resumed) and the network to call (DDP-wrapped)."""
    from .train import trim_history

    if dist.main:
        out.mkdir(parents=True, exist_ok=True)
    state = _open_state(out / "checkpoint.pt", opts["resume"])
    model, report = _build(sources, model_config, cfg, state, opts["init"], opts["init_strict"])
    run = _State(model.to(dev), cfg, dev, loop.precision == "fp16")
    if state is not None:
        run.load(state, dev)
        run.stream_keys = state.get("stream")
    if dist.main:
        trim_history(out / "history.jsonl", state, run.step)
    net: Any = model
    if dist.world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[dev.index] if dev.type == "cuda" else None)  # fmt: skip
    return run, net, report


def _evaluate_test(
    run: _State, rbank: Any, eval_sources: Any, stream: StreamConfig, cfg: TrainConfig,
    loop: FitConfig, dev: torch.device,
) -> dict[str, Any]:  # fmt: skip
    test = replace(stream, scenes=loop.eval_scenes, batch_size=loop.eval_batch, mixup=0.0,
                   weighted=False, split="test")  # fmt: skip
    batches = _loader(rbank, eval_sources, test, epoch=0, start=0, dist=Processes(),
                      workers=loop.workers)  # fmt: skip
    return evaluate_stream(run.model, batches, cfg, device=dev, precision=loop.precision)


def fit(
    bank: Any, out: str | Path, *, sources: Any, model_config: SageConfig,
    config: TrainConfig, stream: StreamConfig, loop: FitConfig | None = None,
    eval_sources: Any = None, resume: bool = False, device: str | None = None,
    init: str | Path | None = None, init_strict: bool = True, until: int | None = None,
    log: Any = None,
) -> tuple[SageEncoder, dict[str, Any]]:  # fmt: skip
    """Train SAGE on scenes streamed from the BRIR bank ``bank`` (a path)
    and ``sources`` (:mod:`agl_fast.sage.stream`), or from scene data
    with a ``scenes`` method, as
    :class:`~agl_fast.sage.bidepth.BidepthData` (then also the
    ``sources`` and ``eval_sources``); ``out`` receives
    ``checkpoint.pt``, ``history.jsonl`` (one line every ``log_every``
    optimiser steps: step, epoch, loss, lr, seconds) and ``metrics.json``
    (with ``eval_sources`` and ``loop.eval_scenes``, ``test``: the figures
    on that many clips of the bank's test BRIRs).

    ``stream.batch_size`` is the global batch of one forward pass (split
    over the processes); an optimiser step takes ``loop.accum`` of them.
    ``until`` stops after that many optimiser steps in all (the schedule
    still spans every epoch), leaving a checkpoint to ``resume`` from.
    Returns the model (on the CPU, unwrapped) and the metrics.
    """
    from .model import n_parameters

    loop = loop or FitConfig()
    if loop.accum < 1 or loop.workers < 0 or loop.checkpoint_every < 1 or loop.log_every < 1:
        raise ParameterError(f"accum, checkpoint_every and log_every must be >= 1 and workers "
                             f">= 0, got {loop}")  # fmt: skip
    out = Path(out)
    dist, dev = start_processes(device)
    rbank = bank if hasattr(bank, "scenes") else RirBank(bank)
    per_epoch = stream.batches // loop.accum
    if per_epoch < 1 or loop.epochs < 1:
        raise ParameterError(f"{stream.scenes} scenes in batches of {stream.batch_size} x "
                             f"{loop.accum} give no optimiser step")  # fmt: skip
    cfg = replace(config, steps=per_epoch * loop.epochs)
    opts: dict[str, Any] = {"resume": resume, "init": init, "init_strict": init_strict}
    run, net, report = _prepare(out, sources, model_config, cfg, loop, dist, dev, opts)
    opts["state_stream"] = run.stream_keys
    extra = {"model_config": run.model.config.to_dict(), "vocab": list(sources.vocab),
             "world": dist.world, "stream": _position_keys(stream, loop)}  # fmt: skip
    if opts["state_stream"] not in (None, extra["stream"]):
        raise ParameterError(f"the checkpoint was written with other stream settings "
                             f"{opts['state_stream']}; resume with {extra['stream']}")  # fmt: skip
    ctx = {"device": dev, "dist": dist, "batches_used": per_epoch * loop.accum,
           "last": min(cfg.steps, until or cfg.steps),
           "on_step": _on_step(out, dist, loop, log or logger.info, extra, dev)}  # fmt: skip
    epoch_stream = replace(stream, scenes=per_epoch * loop.accum * stream.batch_size)
    t0 = time.perf_counter()
    run.model.train()
    while run.epoch < loop.epochs and run.step < ctx["last"]:
        loader = _loader(rbank, sources, epoch_stream, epoch=run.epoch, start=run.batch,
                         dist=dist, workers=loop.workers)  # fmt: skip
        _epoch(run, net, loader, cfg, loop, ctx)
        if run.batch >= ctx["batches_used"]:
            run.epoch, run.batch = run.epoch + 1, 0
    if dist.main:
        run.save(out / "checkpoint.pt", extra, dev)
    metrics: dict[str, Any] = {
        "step": run.step, "epoch": run.epoch, "world": dist.world,
        "seconds": time.perf_counter() - t0, "parameters": n_parameters(run.model),
        "precision": loop.precision, "accum": loop.accum, "batch_size": stream.batch_size,
    }  # fmt: skip
    if report is not None and dist.main:
        (out / "init_report.json").write_text(json.dumps(report, indent=1))
    if report is not None:
        metrics["init"] = {k: (len(v) if isinstance(v, list) else v) for k, v in report.items()}
    if dist.main and eval_sources is not None and loop.eval_scenes > 0:
        metrics["test"] = _evaluate_test(run, rbank, eval_sources, stream, cfg, loop, dev)
    if dist.main:
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    if dist.world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return run.model.cpu(), metrics
