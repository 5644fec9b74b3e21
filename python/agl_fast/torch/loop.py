"""The one training loop of the package: optimiser steps over micro-batches.

Every trainer is a recipe of :func:`run_steps`: it says where each step's
micro-batches come from, which learning rate the step takes, how a
micro-batch becomes a loss, and what happens after the step (a history
line, a checkpoint). The loop does the rest, the same way for all of them:

1. the step's learning rate on every parameter group (unless a scheduler
   sets it);
2. for each micro-batch, the loss (scaled by ``1 / n`` when the step has
   ``n > 1`` micro-batches) and its backward pass, inside the recipe's
   synchronisation context (DDP's ``no_sync`` or FSDP's gradient-sync switch
   on all but the last micro-batch);
3. the gradient scaler's unscaling (fp16), clipping of the gradient norm,
   the optimiser step and the gradients' reset;
4. the step's loss: the sum over its micro-batches, averaged over the
   processes of a distributed run.

The recipes: :mod:`agl_fast.sage.train` (SAGE on a stored dataset, with or
without the RIR branch), :mod:`agl_fast.sage.fit` (SAGE on streamed scenes,
gradient accumulation, mixed precision, DDP), :mod:`agl_fast.sage.experiment`
(a time-budgeted SAGE run) and :mod:`agl_fast.owl.train` (OWL's curriculum
stages, DDP or FSDP). :func:`start_processes` is how each of them joins a
``torchrun`` run.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Optimiser", "Processes", "Step", "run_steps", "start_processes"]


@dataclass
class Step:
    """One optimiser step as a recipe plans it.

    Attributes
    ----------
    micro : sequence
        The step's micro-batches, whatever the recipe's ``loss`` reads; their
        gradients add up to one step.
    lr : float or None
        Learning rate set on every parameter group before the step; None
        leaves it as it is (a scheduler sets it).
    """

    micro: Sequence[Any]
    lr: float | None = None


@dataclass
class Optimiser:
    """What an optimiser step updates, and how.

    Attributes
    ----------
    optimizer : torch.optim.Optimizer
    params : iterable of torch.nn.Parameter
        The parameters whose gradient norm is clipped (materialised once).
    grad_clip : float
        Largest gradient norm; 0 or less: no clipping.
    scaler : torch.amp.GradScaler or None
        The loss scaler of fp16 training.
    world : int
        Processes of the run: the step's loss is their mean.
    """

    optimizer: torch.optim.Optimizer
    params: Iterable[torch.nn.Parameter]
    grad_clip: float = 0.0
    scaler: Any = None
    world: int = 1

    def __post_init__(self) -> None:
        self.params = list(self.params)


def _backward(opt: Optimiser, loss: torch.Tensor) -> None:
    (opt.scaler.scale(loss) if opt.scaler is not None else loss).backward()


def _update(opt: Optimiser) -> None:
    """Unscale, clip, step and reset the gradients."""
    if opt.scaler is not None:
        opt.scaler.unscale_(opt.optimizer)
    if opt.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(opt.params, opt.grad_clip)
    if opt.scaler is not None:
        opt.scaler.step(opt.optimizer)
        opt.scaler.update()
    else:
        opt.optimizer.step()
    opt.optimizer.zero_grad(set_to_none=True)


def run_steps(
    opt: Optimiser,
    steps: Iterable[Step],
    loss: Callable[[Any, int], torch.Tensor],
    *,
    device: torch.device,
    sync: Callable[[bool], AbstractContextManager[Any]] | None = None,
    on_step: Callable[[float, Step], None] | None = None,
) -> int:
    """Run the optimiser steps ``steps`` yields; returns how many ran.

    Parameters
    ----------
    opt : Optimiser
    steps : iterable of Step
        The recipe's plan; it decides when the run stops (a step count, an
        epoch's end, a time budget) by ending.
    loss : callable
        ``loss(micro_batch, j) -> torch.Tensor`` (a scalar): the loss of the
        ``j``-th micro-batch of the step, forward pass included (autocast,
        dropout seeding and the model's mode are the recipe's).
    device : torch.device
        Where the step's loss is summed.
    sync : callable, optional
        ``sync(last) -> context manager`` around each micro-batch's forward
        and backward pass; ``last`` is True for the step's last one.
    on_step : callable, optional
        ``on_step(loss, step)`` after each step, with the step's loss (a
        float, the same on every process).
    """
    done = 0
    for step in steps:
        if step.lr is not None:
            for group in opt.optimizer.param_groups:
                group["lr"] = step.lr
        total = torch.zeros((), device=device)
        n = len(step.micro)
        for j, item in enumerate(step.micro):
            with sync(j == n - 1) if sync is not None else nullcontext():
                value = loss(item, j)
                if n > 1:
                    value = value * (1.0 / n)
                _backward(opt, value)
            total += value.detach()
        _update(opt)
        if opt.world > 1:
            torch.distributed.all_reduce(total)
            total /= opt.world
        done += 1
        if on_step is not None:
            on_step(float(total), step)
    return done


@dataclass(frozen=True)
class Processes:
    """This process's place in a run: ``rank`` of ``world`` processes,
    ``local`` on its machine (one process: 0 of 1)."""

    rank: int = 0
    world: int = 1
    local: int = 0

    @property
    def main(self) -> bool:
        """True for the process that writes checkpoints and logs."""
        return self.rank == 0


def _close_process_group() -> None:
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def start_processes(device: str | torch.device | None = None) -> tuple[Processes, torch.device]:
    """Join the run ``torchrun`` started (``WORLD_SIZE``, ``RANK``,
    ``LOCAL_RANK``; NCCL on CUDA, gloo on the CPU) and pick this process's
    device: ``device``, else CUDA when there is one; a CUDA device without an
    index is the process's local one.

    The process group is closed at exit if the trainer has not closed it
    (Gloo threads still running at interpreter exit can abort the process).
    """
    procs = Processes(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")),
                      int(os.environ.get("LOCAL_RANK", "0")))  # fmt: skip
    want = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if want.type == "cuda":
        if want.index is None:
            want = torch.device("cuda", procs.local)
        torch.cuda.set_device(want)
    if procs.world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if want.type == "cuda" else "gloo")
        atexit.register(_close_process_group)
    return procs, want
