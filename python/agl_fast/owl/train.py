"""Training OWL with the paper's curriculum (:mod:`agl_fast.owl.model`).

The recipe (:func:`load_recipe`, shipped as ``recipe.toml``) lists the
stages, each a question selection (types, number of sources) trained for a
number of epochs with its own learning-rate schedule: a half-cycle cosine
warm-up over ``warmup_steps`` (``lr * (1 - cos(pi * (s + 1) / W)) / 2``)
then cosine decay to zero at the stage's end. One AdamW optimiser runs
through all stages; only the Q-Former, projection and LoRA weights are in it
(:meth:`~agl_fast.owl.model.OwlModel.check_trainable`).

The data come through :class:`QaSource`, two methods: the QA rows of a
selection, and the ``bat`` features of some rows. Batches are drawn from
``(seed, stage, epoch)`` alone and the dropout generator is seeded from
``(seed, step, micro-batch)``, so a run resumed from ``checkpoint.pt`` (written every
``checkpoint_every`` steps and when a run stops) continues exactly as an
uninterrupted one. Under ``torchrun`` (``WORLD_SIZE > 1``) each process
takes its share of every global batch and DDP averages the gradients
(``fsdp=True``: FSDP2's ``fully_shard`` on every decoder layer and on the
model, so each process holds ``1 / world_size`` of the weights, the frozen
decoder's included; gloo on CPU, NCCL on CUDA);
``global_batch_size = micro_batch_size * accumulation * world_size``, and
a run gives the same steps on any number of processes (up to rounding).

A source's ``select`` may return any sequence (``len`` and indexing): a
list is shuffled by a full permutation per epoch, any other sequence (a
lazy, streamed one, :class:`agl_fast.owl.stream.StreamedQa`) by an
affine permutation ``(a * k + b) mod n`` drawn per epoch, so memory does not
grow with the number of questions.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import tomllib
import torch

from ..exceptions import ParameterError
from ..torch.checkpoint import read_checkpoint, write_checkpoint
from ..torch.loop import Optimiser, Step, run_steps, start_processes
from .model import OwlModel, encode_batch, save_owl

__all__ = ["OwlRecipe", "OwlStage", "QaSource", "load_recipe", "stage_lr", "train_owl"]

_LOG = logging.getLogger("agl_fast.owl.train")
RECIPE_FILE = "recipe.toml"
CHECKPOINT = "checkpoint.pt"


class QaSource(Protocol):
    """What training and evaluation read: QA rows (dicts with at least
    ``scene``, ``type``, ``n_sources``, ``question``, ``answer``) and the
    ``bat`` features ``[n, 4, frames, n_mels]`` of rows."""

    def select(
        self, types: Sequence[str], n_sources: Sequence[int]
    ) -> Sequence[dict[str, Any]]: ...

    def features(self, rows: list[dict[str, Any]]) -> torch.Tensor: ...


@dataclass
class OwlStage:
    """One curriculum stage: its question selection and schedule
    (``lr`` None: the recipe's; ``max_steps`` caps the stage)."""

    name: str
    types: list[str]
    n_sources: list[int]
    epochs: float = 1.0
    warmup_steps: int = 0
    max_steps: int | None = None
    lr: float | None = None


@dataclass
class OwlRecipe:
    """Optimiser, batch and stages of a run (see ``recipe.toml``)."""

    lr: float = 1e-4
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    grad_clip: float = 1.0
    global_batch_size: int = 8
    micro_batch_size: int = 2
    seed: int = 0
    checkpoint_every: int = 500
    bf16: bool = True
    stages: list[OwlStage] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _coerce(value: str, current: Any) -> Any:
    if isinstance(current, bool):
        if value.lower() not in ("true", "false", "1", "0"):
            raise ParameterError(f"expected true or false, got {value!r}")
        return value.lower() in ("true", "1")
    if isinstance(current, list):
        kind = type(current[0]) if current else str
        return [kind(v) for v in value.split(",") if v]
    if isinstance(current, (int, float)) or current is None:
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                raise ParameterError(f"expected a number, got {value!r}") from None
    return value


def _apply(recipe: OwlRecipe, override: str) -> OwlRecipe:
    key, sep, value = override.partition("=")
    if not sep:
        raise ParameterError(f"override {override!r} is not KEY=VALUE")
    stage_keys = {f.name for f in fields(OwlStage)} - {"name"}
    top_keys = {f.name for f in fields(OwlRecipe)} - {"stages"}
    name, dot, sub = key.partition(".")
    if dot:
        hit = [s for s in recipe.stages if s.name == name]
        if not hit or sub not in stage_keys:
            raise ParameterError(f"override {key!r}: no stage {name!r} or key {sub!r}")
        stages = [replace(s, **{sub: _coerce(value, getattr(s, sub))}) if s.name == name else s
                  for s in recipe.stages]  # fmt: skip
        return replace(recipe, stages=stages)
    if key in top_keys:
        return replace(recipe, **{key: _coerce(value, getattr(recipe, key))})
    if key in stage_keys:
        stages = [replace(s, **{key: _coerce(value, getattr(s, key))}) for s in recipe.stages]
        return replace(recipe, stages=stages)
    raise ParameterError(f"unknown recipe key {key!r} (keys: {sorted(top_keys | stage_keys)})")


def load_recipe(path: str | Path | None = None, overrides: Sequence[str] = ()) -> OwlRecipe:
    """The recipe of a TOML file (None: the shipped paper recipe), with
    ``KEY=VALUE`` overrides applied in order (see the TOML's header)."""
    if path is None:
        text = resources.files(__package__).joinpath(RECIPE_FILE).read_text("utf-8")
    else:
        if not Path(path).is_file():
            raise ParameterError(f"no recipe file {path}")
        text = Path(path).read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
        stages = [OwlStage(**s) for s in raw.pop("stage", [])]
        recipe = OwlRecipe(**raw, stages=stages)
    except (tomllib.TOMLDecodeError, TypeError) as exc:
        raise ParameterError(f"bad OWL recipe {path or RECIPE_FILE}: {exc}") from exc
    for o in overrides:
        recipe = _apply(recipe, o)
    if not recipe.stages:
        raise ParameterError("the recipe has no stage")
    counts = ("global_batch_size", "micro_batch_size", "checkpoint_every")
    if any(int(getattr(recipe, k)) < 1 for k in counts) or recipe.lr <= 0:
        raise ParameterError(f"{', '.join(counts)} must be >= 1 and lr > 0")
    for s in recipe.stages:
        if s.epochs <= 0 or s.warmup_steps < 0 or (s.max_steps is not None and s.max_steps < 1):
            raise ParameterError(f"stage {s.name}: epochs > 0, warmup_steps >= 0 and "
                                 "max_steps >= 1 required")  # fmt: skip
    return recipe


def stage_lr(step: int, total: int, warmup: int, base: float) -> float:
    """Learning rate of a stage's ``step`` (0-based) of ``total``: half-cycle
    cosine warm-up over ``warmup`` steps, then cosine decay."""
    if step < warmup:
        return base * 0.5 * (1.0 - math.cos(math.pi * (step + 1) / warmup))
    t = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))


@dataclass
class _Plan:
    rows: Sequence[dict[str, Any]]
    steps: int
    per_epoch: int


def _plans(source: QaSource, recipe: OwlRecipe) -> list[_Plan]:
    out = []
    for s in recipe.stages:
        rows = source.select(s.types, s.n_sources)
        if not rows:
            raise ParameterError(f"stage {s.name}: no question of types {s.types} with "
                                 f"{s.n_sources} sources in the data")  # fmt: skip
        per_epoch = math.ceil(len(rows) / recipe.global_batch_size)
        steps = max(1, math.ceil(s.epochs * per_epoch))
        if s.max_steps is not None:
            steps = min(steps, s.max_steps)
        out.append(_Plan(rows, steps, per_epoch))
        _LOG.info("stage %s: %d questions, %d steps", s.name, len(rows), steps)
    return out


def _batch(plan: _Plan, recipe: OwlRecipe, stage: int, step: int) -> np.ndarray:
    """Row indices of a stage step's global batch (a full batch, wrapping)."""
    epoch, pos = divmod(step, plan.per_epoch)
    rng = np.random.default_rng([recipe.seed, stage, epoch])
    n, g = len(plan.rows), recipe.global_batch_size
    at = (pos * g + np.arange(g)) % n
    if isinstance(plan.rows, list):
        return rng.permutation(n)[at]
    a = int(rng.integers(1, n)) if n > 1 else 1
    while math.gcd(a, n) != 1:
        a = a % (n - 1) + 1
    b = int(rng.integers(n))
    return (at * a + b) % n


@dataclass
class _Run:
    model: OwlModel
    wrapped: Any
    tokenizer: Any
    source: QaSource
    recipe: OwlRecipe
    optimizer: torch.optim.Optimizer
    device: torch.device
    rank: int
    world: int
    accum: int
    max_answer_tokens: int
    fsdp: bool = False


def _plan(
    run: _Run, plans: list[_Plan], pos: dict[str, Any], stop: dict[str, bool]
) -> Iterator[Step]:
    """The steps from ``pos`` on, stage after stage, until the last stage
    ends or ``stop["now"]``: each step's global batch cut into this
    process's micro-batches, ``(rows, index in the global batch)``."""
    r, m = run.recipe, run.recipe.micro_batch_size
    while pos["stage"] < len(plans) and not stop["now"]:
        k, stage, plan = pos["stage"], r.stages[pos["stage"]], plans[pos["stage"]]
        lr = stage_lr(pos["step"], plan.steps, stage.warmup_steps, stage.lr or r.lr)
        idx = _batch(plan, r, k, pos["step"])
        micro = []
        for j in range(run.accum):
            at = run.rank * run.accum + j
            micro.append(([plan.rows[i] for i in idx[at * m :][:m]], at))
        yield Step(micro, lr=lr)


def _micro_loss(run: _Run, pos: dict[str, Any]) -> Any:
    """The loss of one micro-batch, its dropout drawn per (step, micro-batch
    of the global batch): the same masks whatever the number of processes."""
    r = run.recipe
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if (
        r.bf16 and run.device.type == "cuda") else nullcontext()  # fmt: skip

    def loss(item: tuple[list[dict[str, Any]], int], _j: int) -> torch.Tensor:
        rows, at = item
        torch.manual_seed(r.seed * 1_000_003 + pos["global_step"] * 1009 + at)
        enc = encode_batch(run.tokenizer, [x["question"] for x in rows],
                           [x["answer"] for x in rows],
                           max_answer_tokens=run.max_answer_tokens)  # fmt: skip
        feats = run.source.features(rows).to(run.device)
        with autocast:
            out = run.wrapped(feats, **{k: v.to(run.device) for k, v in enc.items()})
            return out.loss  # type: ignore[no-any-return]

    return loss


def _sync(run: _Run) -> Any:
    """Gradients exchanged on a step's last micro-batch only (DDP or FSDP)."""

    def sync(last: bool) -> Any:
        if run.fsdp:
            run.model.set_requires_gradient_sync(last)  # type: ignore[operator]
            return nullcontext()
        return nullcontext() if last or run.world == 1 else run.wrapped.no_sync()

    return sync


def _optimizer_state(run: _Run) -> dict[str, Any]:
    """The optimiser state, whole: under FSDP gathered by every process
    (``torch.distributed.checkpoint``'s full state dict, keyed by name)."""
    if not run.fsdp:
        return dict(run.optimizer.state_dict())
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return dict(get_optimizer_state_dict(run.model, run.optimizer, options=opts))


def _save(run: _Run, out: Path, state: dict[str, Any]) -> None:
    trainable, optim = run.model.trainable_state(), _optimizer_state(run)  # every process
    if run.rank != 0:
        return
    full = {**state, "trainable": trainable, "optimizer": optim, "fsdp": run.fsdp,
            "recipe": run.recipe.to_dict()}  # fmt: skip
    write_checkpoint(full, out / CHECKPOINT)
    lines = "".join(json.dumps(h) + "\n" for h in state["history"])
    (out / "metrics.jsonl").write_text(lines, encoding="utf-8")


def _read_checkpoint(out: Path, recipe: OwlRecipe, fsdp: bool) -> dict[str, Any]:
    path = out / CHECKPOINT
    if not path.is_file():
        raise ParameterError(f"--resume: no {CHECKPOINT} in {out}")
    state = read_checkpoint(path, required=("recipe", "stage", "step", "trainable", "optimizer"))
    try:
        same = state["recipe"]["stages"] == recipe.to_dict()["stages"]
    except (KeyError, TypeError) as exc:
        raise ParameterError(f"{path} is not an OWL training checkpoint: {exc}") from exc
    if not same:
        raise ParameterError(f"{path} was written with other stages than this recipe's")
    if bool(state.get("fsdp", False)) != fsdp:
        raise ParameterError(f"{path} was written {'with' if not fsdp else 'without'} --fsdp: "
                             "resume it the same way")  # fmt: skip
    _LOG.info("resuming at stage %d step %d", state["stage"], state["step"])
    return dict(state)


def _load_optimizer(run: _Run, optim: dict[str, Any]) -> None:
    if not run.fsdp:
        run.optimizer.load_state_dict(optim)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(run.model, run.optimizer, optim,
                             options=StateDictOptions(full_state_dict=True))  # fmt: skip


def _shard(model: OwlModel) -> None:
    """FSDP2: every decoder layer a unit of its own, the rest the root's."""
    from torch.distributed.fsdp import fully_shard

    layers = [m for m in model.llm.modules() if type(m).__name__.endswith("DecoderLayer")]
    for m in layers:
        fully_shard(m)
    fully_shard(model)
    _LOG.info("FSDP: %d decoder layers sharded, and the root", len(layers))


def _setup(
    model: OwlModel, device: torch.device | None, fsdp: bool = False
) -> tuple[Any, torch.device, int, int]:
    """The model on this process's device: as it is alone, sharded (FSDP2)
    or wrapped in DDP under ``torchrun``; with the device, rank and world."""
    procs, dev = start_processes(device)
    model.to(dev)
    if procs.world <= 1:
        return model, dev, 0, 1
    if fsdp:
        _shard(model)
        return model, dev, procs.rank, procs.world
    wrapped = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[dev.index] if dev.type == "cuda" else None)  # fmt: skip
    return wrapped, dev, procs.rank, procs.world


def train_owl(
    model: OwlModel,
    tokenizer: Any,
    source: QaSource,
    recipe: OwlRecipe,
    out: str | Path,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    device: torch.device | None = None,
    fsdp: bool = False,
) -> dict[str, Any]:
    """Run the recipe's curriculum (``fsdp``: shard with FSDP2 under
    torchrun instead of DDP); returns ``history`` (one dict per step:
    ``stage``, ``step``, ``global_step``, ``lr``, ``loss``, ``seconds``
    since this invocation started), ``counts``
    (:meth:`~agl_fast.owl.model.OwlModel.check_trainable`), ``stopped``
    (True when ``stop_after`` optimiser steps of the whole run were reached
    first) and ``model_dir`` (the final trainable weights, ``out/owl``)."""
    if stop_after is not None and stop_after < 1:
        raise ParameterError(f"stop_after must be >= 1, got {stop_after}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    counts = model.check_trainable()
    _LOG.info("trainable parameters: %s", counts)
    if fsdp and int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        _LOG.warning("fsdp without torchrun (WORLD_SIZE=1): training unsharded")
        fsdp = False
    saved = _read_checkpoint(out, recipe, fsdp) if resume else None
    if saved is not None:
        model.load_trainable(saved["trainable"])  # before any sharding
    wrapped, dev, rank, world = _setup(model, device, fsdp)
    if recipe.bf16 and dev.type != "cuda":
        _LOG.warning("bf16 autocast is for CUDA: training in float32 on %s", dev)
    per_pass = recipe.micro_batch_size * world
    if recipe.global_batch_size % per_pass:
        raise ParameterError(f"global_batch_size {recipe.global_batch_size} is not a multiple "
                             f"of micro_batch_size x processes = {per_pass}")  # fmt: skip
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=recipe.lr, betas=(recipe.betas[0], recipe.betas[1]),
                            weight_decay=recipe.weight_decay)  # fmt: skip
    run = _Run(model, wrapped, tokenizer, source, recipe, opt, dev, rank, world,
               recipe.global_batch_size // per_pass, model.cfg.max_answer_tokens, fsdp)  # fmt: skip
    plans = _plans(source, recipe)
    pos: dict[str, Any] = {"stage": 0, "step": 0, "global_step": 0, "history": []}
    if saved is not None:
        _load_optimizer(run, saved["optimizer"])
        pos = {k: saved[k] for k in ("stage", "step", "global_step", "history")}
    model.train()
    stop = {"now": False}
    t0 = time.perf_counter()

    def on_step(loss: float, step: Step) -> None:
        stage = recipe.stages[pos["stage"]]
        pos["history"].append({"stage": stage.name, "step": pos["step"],
                               "global_step": pos["global_step"], "lr": step.lr, "loss": loss,
                               "seconds": round(time.perf_counter() - t0, 3)})  # fmt: skip
        pos["step"] += 1
        pos["global_step"] += 1
        if pos["step"] >= plans[pos["stage"]].steps:
            pos["stage"], pos["step"] = pos["stage"] + 1, 0
        stop["now"] = stop_after is not None and pos["global_step"] >= stop_after
        if stop["now"] or pos["global_step"] % recipe.checkpoint_every == 0:
            _save(run, out, pos)

    optimiser = Optimiser(opt, params, recipe.grad_clip, world=world)
    run_steps(optimiser, _plan(run, plans, pos, stop), _micro_loss(run, pos), device=dev,
              sync=_sync(run), on_step=on_step)  # fmt: skip
    done = pos["stage"] >= len(plans)
    if done:
        _save(run, out, pos)
        final = model.trainable_state()  # every process (FSDP gathers)
        if rank == 0:
            save_owl(model, out / "owl", final)
    return {"history": pos["history"], "counts": counts, "stopped": not done,
            "model_dir": str(out / "owl") if done else None}  # fmt: skip
