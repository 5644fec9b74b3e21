"""A CPU-sized localisation experiment: a small SAGE on held-out rooms.

``agl-fast spatial experiment --minutes 15 --out runs/experiment`` runs, in
one process and within the wall-clock budget:

1. **BRIR pools.** ``train_rooms`` and ``test_rooms`` shoebox rooms
   (:func:`agl_fast.spatial.simulate.sample_scene`, one seed per room, the
   two sets disjoint), ``positions`` source positions per room, a BRIR for
   each (image sources to ``max_order``, no ray-traced tail, so that
   thousands of BRIRs take a couple of minutes; worker processes).
2. **On-the-fly remixing.** Every training step draws ``batch_size``
   (BRIR, dry source) pairs afresh: a training-room BRIR and a clip from the
   train part of :class:`agl_fast.spatial.sources.SourceBank` (synthetic
   events, ``espeak-ng`` speech, segments of user recordings), scaled to
   -14 dBFS, rendered with :func:`agl_fast.room.fftconvolve` and turned into
   :func:`agl_fast.bat` features. No source is seen twice, so direction has
   to be read from the BRIR rather than remembered from the source.
3. **Targets.** Circular Gaussian azimuth targets (``sigma_azimuth``
   degrees), Gaussian elevation and distance targets, multi-hot source kind;
   the loss is that of :mod:`agl_fast.sage.train` with soft targets.
4. **Schedule.** AdamW, linear warm-up, then cosine decay over the *time*
   left for training (or over ``steps`` when given): the run stops when the
   budget minus the time kept for evaluation is spent.
5. **Evaluation.** Fixed clips, one per BRIR of the held-out rooms, with the
   test part of the source bank (sentences, voices and recording segments
   never used in training); the same number of clips from training rooms
   (fresh training-part sources) for comparison. Figures: mean azimuth
   error, mean great-circle direction error, ER20, the lateral error (front
   and back folded together), the front-back confusion rate (prediction and
   truth on opposite sides of the interaural axis), distance error rate.

With ``rir_length > 0`` SAGE carries OWL's RIR branch
(:mod:`agl_fast.sage.rir`): each room's depth panorama from the
listener (:func:`agl_fast.spatial.depth.depth_panorama`, rendered with the
BRIR pools) and the audio tokens predict the position's BRIR (cut or
zero-padded to ``rir_length`` samples), and ``eta2 * L_geo`` joins the loss;
the held-out figures add ``geo_loss``. The recipe (:func:`agl_fast.sage.recipes.experiment_config`,
``--recipe``) sets the loss weights, optimiser and schedule: ``agl-fast``
(the settings above, one stage) or ``owl`` (appendix C.1: the event loss
alone for the first 40 % of the run, then ``alpha = (1250, 1, 2)`` with
``L_geo``; lr 1e-4, weight decay 0.01, betas (0.9, 0.95), clipping 1.0,
batch 64; the warm-up ends with the first stage at the latest). The
stages are shares of the training time when the budget bounds the run.

``metrics.json``, ``log.txt`` and ``checkpoint.pt`` go to ``out``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import ParameterError
from ..spatial.defaults import LOUDNESS_DBFS, MAX_ORDER, SR
from .recipes import ExperimentConfig, geo_weights
from .scoring import evaluate_localisation, experiment_loss

__all__ = ["brir_pool", "run_experiment"]

_HRTF: dict[int, Any] = {}
#: A BRIR pool: the BRIRs and their labels (:func:`brir_pool`).
_Pool = tuple[list[np.ndarray], list[dict[str, Any]]]


def _room_job(job: dict[str, Any]) -> list[tuple[np.ndarray, dict[str, Any]]]:
    from ..spatial.simulate import bat_labels, find_sofa, load_sofa, sample_scene, simulate_brir

    sr = job["sr"]
    if job["receiver"] != "two_mic" and sr not in _HRTF:
        path = find_sofa()
        _HRTF[sr] = load_sofa(path, sr) if path is not None else None
    hrtf = _HRTF.get(sr)
    rng = np.random.default_rng(job["seed"])
    spec = sample_scene(rng, n_sources=job["positions"])
    extra: dict[str, Any] = {}
    if job["depth"]:
        from ..spatial.depth import depth_panorama

        extra["depth"] = depth_panorama(spec)
    out = []
    for src in spec.sources:
        h, mode = simulate_brir(
            spec, src, sr=sr, receiver=job["receiver"], hrtf=hrtf,
            max_order=job["max_order"], ray_tracing=False,
        )  # fmt: skip
        lab = bat_labels(spec.listener, spec.yaw_deg, src)
        out.append((h, {**lab, "room": job["seed"], "receiver": mode, **extra}))
    return out


def brir_pool(
    seeds: list[int],
    *,
    positions: int,
    sr: int = SR,
    max_order: int = MAX_ORDER,
    receiver: str = "auto",
    workers: int = 1,
    depth: bool = False,
) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
    """BRIRs of ``positions`` sources in each room drawn from ``seeds``.

    Returns
    -------
    brirs : list of np.ndarray [shape=(2, L_i), dtype=float32]
    labels : list of dict
        BAT labels (:func:`agl_fast.spatial.simulate.bat_labels`) plus the
        room seed and the receiver used; with ``depth``, also ``depth``:
        the room's panorama from the listener
        (:func:`agl_fast.spatial.depth.depth_panorama`, ``[64, 256]``
        float32, metres), one array shared by the room's positions.
    """
    jobs = [
        {"seed": s, "positions": positions, "sr": sr, "max_order": max_order,
         "receiver": receiver, "depth": depth}
        for s in seeds
    ]  # fmt: skip
    if workers > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            rooms = list(pool.map(_room_job, jobs, chunksize=4))
    else:
        rooms = [_room_job(j) for j in jobs]
    pairs = [p for r in rooms for p in r]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _render(
    brirs: list[np.ndarray], idx: np.ndarray, bank: Any, rng: np.random.Generator, split: str
) -> tuple[np.ndarray, list[str]]:
    from ..room import fftconvolve
    from ..spatial.mix import normalize

    dry, kinds = [], []
    for _ in idx:
        y, kind = bank.draw(rng, split)
        dry.append(normalize(y, LOUDNESS_DBFS).astype(np.float32))
        kinds.append(kind)
    wet = fftconvolve(dry, [brirs[int(i)] for i in idx], mode="truncate")
    return np.stack(wet).astype(np.float32), kinds


def _batch(
    brirs: list[np.ndarray],
    labels: list[dict[str, Any]],
    idx: np.ndarray,
    bank: Any,
    rng: np.random.Generator,
    split: str,
    rir_length: int = 0,
) -> dict[str, Any]:
    import torch

    from ..presets import bat

    audio, kinds = _render(brirs, idx, bank, rng, split)
    events = np.zeros((len(idx), len(bank.kinds)), dtype=np.float32)
    for i, k in enumerate(kinds):
        events[i, bank.kinds.index(k)] = 1.0
    lab = [labels[int(i)] for i in idx]
    out = {
        "x": torch.from_numpy(np.asarray(bat(audio))),
        "events": torch.from_numpy(events),
        "distance": torch.tensor([d["distance_class"] for d in lab]),
        "azimuth": torch.tensor([d["azimuth"] for d in lab]),
        "elevation": torch.tensor([d["elevation"] for d in lab]),
    }
    if rir_length > 0:
        # The branch's inputs and target: the room's depth panorama and the
        # BRIR, cut or zero-padded to ``rir_length`` samples.
        rir = np.zeros((len(idx), 2, rir_length), dtype=np.float32)
        for i, j in enumerate(idx):
            h = brirs[int(j)][:, :rir_length]
            rir[i, :, : h.shape[1]] = h
        out["rir"] = torch.from_numpy(rir)
        out["depth"] = torch.from_numpy(np.stack([d["depth"] for d in lab]))
    return out


def _warmup(step: int, frac: float, cfg: ExperimentConfig) -> float:
    """Warm-up factor: linear over ``cfg.warmup`` steps, ended by the end of
    the first stage when there are two (``frac``: the share of the run
    done)."""
    w = (step + 1) / cfg.warmup
    if cfg.stage1_share > 0:
        w = max(w, frac / cfg.stage1_share)
    return min(1.0, w)


class _RunLog:
    """Lines of the run's progress, timed from its start, to ``log.txt`` and ``log``."""

    def __init__(self, path: Path, log: Any, t_start: float) -> None:
        self.file = open(path, "w")
        self.log, self.t_start = log, t_start

    def __call__(self, msg: str) -> None:
        line = f"[{time.perf_counter() - self.t_start:7.1f} s] {msg}"
        self.file.write(line + "\n")
        self.file.flush()
        if self.log is not None:
            self.log(line)

    def close(self) -> None:
        self.file.close()


def _check(cfg: ExperimentConfig) -> None:
    """Refuse settings the run cannot use (before anything is simulated)."""
    from .rir import UPSAMPLE

    if cfg.rir_length < 0 or cfg.rir_length % UPSAMPLE:
        raise ParameterError(
            f"rir_length must be 0 or a positive multiple of {UPSAMPLE}, "
            f"got rir_length={cfg.rir_length}"
        )
    if not 0 <= cfg.stage1_share < 1:
        raise ParameterError(f"stage1_share must be in [0, 1), got {cfg.stage1_share}")


def _pools(cfg: ExperimentConfig, sr: int) -> tuple[_Pool, _Pool]:
    """The BRIR pools of the training and the held-out rooms (disjoint seeds)."""
    base = 1_000_003 * (cfg.seed + 1)
    train_seeds = [base + i for i in range(cfg.train_rooms)]
    test_seeds = [base + cfg.train_rooms + i for i in range(cfg.test_rooms)]
    pools = []
    for seeds in (train_seeds, test_seeds):
        pools.append(
            brir_pool(
                seeds, positions=cfg.positions, sr=sr, max_order=cfg.max_order,
                receiver=cfg.receiver, workers=cfg.workers, depth=cfg.rir_length > 0,
            )
        )  # fmt: skip
    return pools[0], pools[1]


def _eval_sets(
    cfg: ExperimentConfig, bank: Any, train: _Pool, test: _Pool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fixed evaluation batches: one clip per held-out BRIR, as many from training rooms."""
    (tr_h, tr_l), (te_h, te_l) = train, test
    eval_rng = np.random.default_rng(cfg.seed + 17)
    n_eval = len(te_h)
    chunks = [np.arange(i, min(i + 64, n_eval)) for i in range(0, n_eval, 64)]
    test_sets = [_batch(te_h, te_l, c, bank, eval_rng, "test", cfg.rir_length) for c in chunks]
    tr_eval = eval_rng.choice(len(tr_h), size=min(n_eval, len(tr_h)), replace=False)
    train_sets = [
        _batch(tr_h, tr_l, tr_eval[i : i + 64], bank, eval_rng, "train", cfg.rir_length)
        for i in range(0, tr_eval.size, 64)
    ]
    return test_sets, train_sets


def _model(cfg: ExperimentConfig, bank: Any) -> tuple[Any, Any, Any]:
    """The SAGE encoder of the settings, its config and its AdamW optimiser."""
    import torch

    from .model import SageConfig, SageEncoder

    torch.manual_seed(cfg.seed)
    mcfg = SageConfig(
        embed_dim=cfg.embed_dim, depth=cfg.depth, num_heads=cfg.num_heads,
        num_classes=len(bank.kinds), target_frame=cfg.target_frame,
        freq_mask=cfg.freq_mask, time_mask=cfg.time_mask, token_mask=cfg.token_mask,
        ipd_scale=cfg.ipd_scale, rir_length=cfg.rir_length, rir_width=cfg.rir_width,
    )  # fmt: skip
    model = SageEncoder(mcfg)
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas
    )
    return model, mcfg, opt


class _Batches:
    """Training batches made in a background thread (the Rust kernels release
    the GIL) while the model steps; one producer keeps their order fixed."""

    def __init__(self, cfg: ExperimentConfig, pool: _Pool, bank: Any) -> None:
        self.cfg, self.pool, self.bank = cfg, pool, bank
        self.rng = np.random.default_rng(cfg.seed)
        self.ready: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=3)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, daemon=True)
        self.thread.start()

    def _produce(self) -> None:
        brirs, labels = self.pool
        while not self.stop.is_set():
            idx = self.rng.integers(0, len(brirs), self.cfg.batch_size)
            b = _batch(brirs, labels, idx, self.bank, self.rng, "train", self.cfg.rir_length)
            while not self.stop.is_set():
                try:
                    self.ready.put(b, timeout=0.1)
                    break
                except queue.Full:
                    continue

    def get(self) -> dict[str, Any]:
        return self.ready.get()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def _learning_rate(
    step: int, frac: float, cfg: ExperimentConfig, warm_end: float
) -> tuple[float, float]:
    """The step's learning rate and the share of the run at which warm-up ended."""
    warm = _warmup(step, frac, cfg)
    if cfg.stage1_share == 0:
        return cfg.lr * warm * 0.5 * (1 + math.cos(math.pi * frac)), warm_end
    # Two stages (OWL): the cosine starts where the warm-up ends.
    if warm < 1:
        warm_end = frac
    t = (frac - warm_end) / max(1e-9, 1 - warm_end)
    return cfg.lr * warm * 0.5 * (1 + math.cos(math.pi * min(1.0, t))), warm_end


@dataclass
class _Progress:
    """What the training loop did: steps, steps in the first stage, losses."""

    step: int = 0
    stage1_steps: int = 0
    losses: list[float] = field(default_factory=list)
    geo_losses: list[float] = field(default_factory=list)


def _train(
    model: Any, opt: Any, batches: _Batches, cfg: ExperimentConfig, train_end: float,
    say: _RunLog, save: Any,
) -> _Progress:  # fmt: skip
    """Step until ``cfg.steps`` or the time ``train_end`` (warm-up, cosine decay)."""
    from ..torch.loop import Optimiser, Step, run_steps

    t0 = time.perf_counter()
    p = _Progress()
    now: dict[str, Any] = {"warm_end": 0.0, "stage1": False, "lr": 0.0}

    def plan() -> Iterator[Step]:
        while True:
            if cfg.steps is not None:
                if p.step >= cfg.steps:
                    return
                frac = p.step / cfg.steps
            else:
                clock = time.perf_counter()
                if clock >= train_end:
                    return
                frac = (clock - t0) / max(1e-9, train_end - t0)
            now["stage1"] = frac < cfg.stage1_share
            now["lr"], now["warm_end"] = _learning_rate(p.step, frac, cfg, now["warm_end"])
            yield Step([batches.get()], lr=now["lr"])

    def loss(b: dict[str, Any], _j: int) -> Any:
        model.train()
        parts = experiment_loss(model, b, cfg, now["stage1"])
        if "geo" in parts:
            p.geo_losses.append(float(parts["geo"].detach()))
        return parts["loss"]

    def on_step(value: float, _step: Step) -> None:
        p.losses.append(value)
        p.stage1_steps += now["stage1"]
        p.step += 1
        if p.step % 50 == 0:
            geo = f" L_geo {np.mean(p.geo_losses[-50:]):.3f}" if p.geo_losses else ""
            stage = " (stage 1)" if now["stage1"] else ""
            say(f"step {p.step} loss {np.mean(p.losses[-50:]):.3f}{geo} lr {now['lr']:.2e}{stage}")
        if p.step % 500 == 0:
            save(p.step)

    optimiser = Optimiser(opt, model.parameters(), cfg.grad_clip)
    run_steps(optimiser, plan(), loss, device=next(model.parameters()).device, on_step=on_step)
    return p


def _metrics(
    cfg: ExperimentConfig, bank: Any, train: _Pool, test: _Pool, p: _Progress,
    seconds: dict[str, float], figures: tuple[dict[str, float], dict[str, float]],
) -> dict[str, Any]:  # fmt: skip
    """The contents of ``metrics.json``."""
    settings = asdict(cfg)
    settings["recordings"] = [Path(r).name for r in cfg.recordings]
    losses, geo_losses = p.losses, p.geo_losses
    return {
        "settings": settings,
        "sources": list(bank.kinds),
        "receiver": train[1][0]["receiver"],
        "brirs": {"train": len(train[0]), "test": len(test[0])},
        "steps": p.step,
        "stage1_steps": p.stage1_steps,
        "clips_seen": p.step * cfg.batch_size,
        "seconds": seconds,
        "final_train_loss": float(np.mean(losses[-50:])) if losses else math.nan,
        "first_train_geo_loss": float(np.mean(geo_losses[:50])) if geo_losses else None,
        "final_train_geo_loss": float(np.mean(geo_losses[-50:])) if geo_losses else None,
        "held_out_rooms": figures[0],
        "training_rooms": figures[1],
    }


def run_experiment(cfg: ExperimentConfig, out: str | Path, *, log: Any = print) -> dict[str, Any]:
    """Simulate, train and evaluate within ``cfg.minutes`` (see the module docs).

    Returns
    -------
    dict
        The contents of ``metrics.json``: settings, counts, steps, times and
        the figures on held-out and training rooms.
    """
    from ..spatial.sources import SourceBank
    from ..torch.checkpoint import write_checkpoint
    from .model import n_parameters

    eta, lam = geo_weights(cfg)
    cfg = replace(cfg, eta=eta, geo_lambda=lam)
    _check(cfg)
    t_start = time.perf_counter()
    deadline = t_start + 60.0 * cfg.minutes
    # Sources first: a missing recording fails before any file is opened.
    bank = SourceBank(cfg.clip_seconds, sr=SR, recordings=cfg.recordings, speech=cfg.speech)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = _RunLog(out / "log.txt", log, t_start)
    say(f"sources: {', '.join(bank.kinds)}")
    train, test = _pools(cfg, SR)
    t_sim = time.perf_counter() - t_start
    say(
        f"BRIRs: {len(train[0])} train, {len(test[0])} test ({train[1][0]['receiver']}), "
        f"{t_sim:.0f} s"
    )
    test_sets, train_sets = _eval_sets(cfg, bank, train, test)
    n_train_eval = sum(len(b["x"]) for b in train_sets)
    say(f"evaluation clips: {len(test[0])} held-out, {n_train_eval} training rooms")
    model, mcfg, opt = _model(cfg, bank)
    n_branch = n_parameters(model.rir_decoder) if model.rir_decoder is not None else 0
    say(
        f"SAGE {cfg.depth} x {cfg.embed_dim}: {(n_parameters(model) - n_branch) / 1e6:.2f} M "
        f"parameters; RIR branch {n_branch / 1e6:.2f} M; recipe {cfg.recipe}"
    )

    def save(step: int) -> None:
        state = {"model": model.state_dict(), "model_config": mcfg.to_dict(),
                 "kinds": list(bank.kinds), "step": step}  # fmt: skip
        write_checkpoint(state, out / "checkpoint.pt")

    batches = _Batches(cfg, train, bank)
    t_train0 = time.perf_counter()
    progress = _train(model, opt, batches, cfg, deadline - cfg.eval_seconds, say, save)
    batches.close()
    t_train = time.perf_counter() - t_train0
    say(f"trained {progress.step} steps in {t_train:.0f} s")
    save(progress.step)
    figures = (
        evaluate_localisation(model, test_sets, cfg),
        evaluate_localisation(model, train_sets, cfg),
    )
    seconds = {
        "simulation": round(t_sim, 1),
        "training": round(t_train, 1),
        "total": round(time.perf_counter() - t_start, 1),
    }
    metrics = _metrics(cfg, bank, train, test, progress, seconds, figures)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    say(f"held-out rooms: {json.dumps(figures[0])}")
    say(f"training rooms: {json.dumps(figures[1])}")
    say.close()
    return metrics
