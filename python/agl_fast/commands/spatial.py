"""``agl-fast spatial``: scene simulation and SAGE inference.

``agl-fast spatial simulate --scenes N --out DIR`` writes a simulated
dataset (:mod:`agl_fast.spatial.dataset`); ``agl-fast spatial train --data
DIR --out RUN`` trains SAGE on it (:mod:`agl_fast.sage.train`).

``agl-fast spatial experiment --minutes 15`` simulates rooms, trains a
small SAGE on remixed sources and reports its errors on held-out rooms
(:mod:`agl_fast.sage.experiment`).

``agl-fast spatial ask --data DIR --provider P --model M --out OUT`` asks an
audio-language model the dataset's spatial questions and scores the answers
with OWL's metrics (:mod:`agl_fast.commands.spatial_ask`).

``agl-fast spatial owl train|infer|eval`` trains OWL (SAGE + Q-Former +
a causal LM with LoRA) with the paper's curriculum, and answers and scores
a dataset's questions with it (:mod:`agl_fast.owl.cli`).

``agl-fast spatial infer AUDIO... --model sage.onnx`` prints one JSON line
per file: azimuth and elevation (degrees), distance (m), the most probable
events, the execution provider, and (``--embeddings DIR``) writes the
``[3, embed_dim]`` token embeddings as ``.npy``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .._internal.onnx import DEVICES
from ..exceptions import AglError
from ..sage.recipes import RECIPES
from ..spatial.defaults import CLIP_SECONDS, SR


def add_parser(sub: Any) -> None:
    """Register ``agl-fast spatial`` and its actions.

    Parameters
    ----------
    sub : argparse subparsers
        The subparsers of the ``agl-fast`` command.
    """
    p = sub.add_parser("spatial", help="spatial audio: scene simulation, SAGE inference")
    ssub = p.add_subparsers(dest="spatial_command", metavar="ACTION", required=True)
    _add_infer(ssub)
    _add_simulate(ssub)
    _add_train(ssub)
    _add_experiment(ssub)
    from ..owl.cli import add_parser as add_owl
    from .spatial_ask import add_parser as add_ask

    add_ask(ssub)
    add_owl(ssub)


def _add_infer(ssub: Any) -> None:
    """``spatial infer``: SAGE inference on binaural clips."""
    inf = ssub.add_parser("infer", help="direction, distance and events of binaural clips")
    inf.add_argument("audio", nargs="+", type=Path, help="binaural audio files (or .npy [2, n])")
    inf.add_argument("--model", type=Path, required=True, help="SAGE ONNX model")
    inf.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="auto: CUDA when it starts, else the CPU with a warning",
    )
    inf.add_argument(
        "--allow-cpu", action="store_true", help="with --device cuda: fall back to the CPU"
    )
    inf.add_argument("--batch-size", type=int, default=8, help="clips per inference batch")
    inf.add_argument("--top-k", type=int, default=5, help="events reported per clip")
    inf.add_argument("--embeddings", type=Path, help="write each clip's embeddings here")
    inf.add_argument("--threads", type=int, default=None, help="ONNX Runtime and feature threads")
    inf.set_defaults(run=run)


def _add_simulate(ssub: Any) -> None:
    """``spatial simulate``: a simulated dataset."""
    sim = ssub.add_parser("simulate", help="simulate binaural scenes, mixtures and QA")
    sim.add_argument("--scenes", type=int, required=True, help="number of scenes")
    sim.add_argument("--out", type=Path, required=True, help="output directory")
    sim.add_argument("--seed", type=int, default=0, help="first scene's seed")
    sim.add_argument("--sources", nargs="*", type=Path, help="mono source audio files")
    sim.add_argument("--max-sources", type=int, default=2, choices=(1, 2),
                     help="sources per scene at most")  # fmt: skip
    sim.add_argument("--seconds", type=float, default=CLIP_SECONDS, help="scene length")
    sim.add_argument("--receiver", choices=("auto", "hrtf", "two_mic"), default="auto",
                     help="auto: an HRTF if a SOFA file is found, else two mics")  # fmt: skip
    sim.add_argument("--workers", type=int, default=1, help="worker processes")
    sim.add_argument("--format", choices=("npz", "parquet"), default="npz",
                     help="one .npz per scene, or Parquet shards")  # fmt: skip
    sim.add_argument("--shard-size", type=int, default=256, help="scenes per Parquet shard")
    sim.add_argument("--through-door", type=float, default=0.0,
                     help="probability of a source in an adjoining room (door)")  # fmt: skip
    sim.set_defaults(run=run_simulate)


def _add_train(ssub: Any) -> None:
    """``spatial train``: SAGE on a simulated dataset."""
    tr = ssub.add_parser("train", help="train SAGE on a simulated dataset (torch extra)")
    tr.add_argument("--data", type=Path, required=True, help="a spatial simulate output")
    tr.add_argument("--out", type=Path, required=True, help="checkpoint and metrics directory")
    tr.add_argument("--recipe", choices=tuple(RECIPES), default="agl-fast",
                    help="training settings: 'owl' is the paper's (appendix C.1, two "
                    "stages), 'agl-fast' the earlier one-stage settings; the options below "
                    "override (default: agl-fast)")  # fmt: skip
    tr.add_argument("--steps", type=int, default=1000, help="optimiser steps")
    tr.add_argument("--batch-size", type=int, default=None, help="(default: the recipe's)")
    tr.add_argument("--lr", type=float, default=None, help="(default: the recipe's)")
    tr.add_argument("--weight-decay", type=float, default=None, help="(default: the recipe's)")
    tr.add_argument("--warmup", type=int, default=None, help="(default: the recipe's)")
    tr.add_argument("--depth", type=int, default=4, help="transformer blocks")
    tr.add_argument("--dim", type=int, default=192, help="embedding width")
    tr.add_argument("--heads", type=int, default=3, help="attention heads")
    tr.add_argument("--target-frame", type=int, default=1024, help="input frames per clip")
    tr.add_argument("--seed", type=int, default=0, help="initialisation and sampling seed")
    tr.add_argument("--rir-length", type=int, default=0,
                    help="RIR branch: BRIR samples predicted (L_geo; 0: off)")  # fmt: skip
    tr.add_argument("--rir-width", type=int, default=64,
                    help="channel base of the RIR branch's ResNet-18s")  # fmt: skip
    tr.add_argument("--rir-geometry", action="store_true",
                    help="ablation: feed the RIR branch a room geometry vector instead of the "
                    "depth panorama (not OWL's setting)")  # fmt: skip
    tr.add_argument("--eta", type=float, nargs=2, default=None, metavar=("ETA1", "ETA2"),
                    help="weights of L_binaural and L_geo (default 1 0.01)")  # fmt: skip
    tr.add_argument("--geo-lambda", type=float, default=None, help="EDC weight in L_geo (0.1)")
    tr.add_argument("--sigma-azimuth", type=float, default=0.0,
                    help="circular Gaussian azimuth targets, degrees (0: one-hot)")  # fmt: skip
    tr.add_argument("--freq-mask", type=int, default=0, help="SpecAugment band width")
    tr.add_argument("--time-mask", type=int, default=0, help="SpecAugment frame width")
    tr.add_argument("--token-mask", type=float, default=0.0, help="share of tokens dropped")
    tr.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints")
    tr.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    tr.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    tr.add_argument("--export", type=Path, help="also write the trained model as ONNX here")
    from ..sage.fit_cli import add_stream_options

    add_stream_options(tr)
    tr.set_defaults(run=run_train)


def _add_experiment(ssub: Any) -> None:
    """``spatial experiment``: simulate, train and evaluate within a time budget
    (defaults: those of :class:`~agl_fast.sage.recipes.ExperimentConfig`)."""
    from ..sage.recipes import ExperimentConfig

    d = ExperimentConfig()
    ex = ssub.add_parser(
        "experiment",
        help="simulate, train and evaluate a small SAGE on held-out rooms within a time budget",
    )
    ex.add_argument("--out", type=Path, default=Path("runs/experiment"), help="run directory")
    ex.add_argument("--minutes", type=float, default=d.minutes, help="wall-clock budget")
    ex.add_argument("--recordings", nargs="*", type=Path, default=[],
                    help="long recordings to cut dry source segments from")  # fmt: skip
    ex.add_argument(
        "--train-rooms", type=int, default=d.train_rooms, help="simulated training rooms"
    )
    ex.add_argument("--test-rooms", type=int, default=d.test_rooms, help="held-out rooms")
    ex.add_argument("--positions", type=int, default=d.positions, help="source positions per room")
    ex.add_argument(
        "--clip-seconds", type=float, default=d.clip_seconds, help="training clip length"
    )
    ex.add_argument("--recipe", choices=tuple(RECIPES), default="agl-fast",
                    help="loss weights, optimiser and schedule (owl: the paper's two stages, "
                    "as shares of the run; default: %(default)s)")  # fmt: skip
    ex.add_argument("--batch-size", type=int, default=None,
                    help="(default: the recipe's)")  # fmt: skip
    ex.add_argument("--lr", type=float, default=None,
                    help="(default: the recipe's)")  # fmt: skip
    ex.add_argument("--weight-decay", type=float, default=None,
                    help="(default: the recipe's)")  # fmt: skip
    ex.add_argument("--warmup", type=int, default=None,
                    help="warm-up steps, at most the first stage "
                    "(default: the recipe's)")  # fmt: skip
    ex.add_argument("--rir-length", type=int, default=0,
                    help="add the RIR branch (depth panorama + audio tokens to the BRIR) "
                    "predicting this many samples, a multiple of 32 "
                    "(default: %(default)s, no branch)")  # fmt: skip
    ex.add_argument("--rir-width", type=int, default=d.rir_width,
                    help="channel base of the branch's two ResNet-18s "
                    "(64 as the paper; default: %(default)s)")  # fmt: skip
    ex.add_argument("--steps", type=int, default=None, help="fixed step count (else the budget)")
    ex.add_argument(
        "--target-frame", type=int, default=d.target_frame, help="input frames per clip"
    )
    ex.add_argument(
        "--ipd-scale", type=float, default=d.ipd_scale, help="factor on the IPD channels"
    )
    ex.add_argument(
        "--sigma-azimuth", type=float, default=d.sigma_azimuth, help="degrees (0: one-hot)"
    )
    ex.add_argument("--freq-mask", type=int, default=0, help="SpecAugment band width")
    ex.add_argument("--time-mask", type=int, default=0, help="SpecAugment frame width")
    ex.add_argument("--token-mask", type=float, default=0.0, help="share of tokens dropped")
    ex.add_argument("--receiver", choices=("auto", "hrtf", "two_mic"), default="auto",
                    help="auto: an HRTF if a SOFA file is found, else two mics")  # fmt: skip
    ex.add_argument("--workers", type=int, default=d.workers, help="simulation processes")
    ex.add_argument("--threads", type=int, default=1,
                    help="torch threads (batches are made in a second thread)")  # fmt: skip
    ex.add_argument("--seed", type=int, default=0, help="simulation and training seed")
    ex.set_defaults(run=run_experiment)


def _load(path: Path) -> tuple[np.ndarray, int]:
    if path.suffix == ".npy":
        return np.load(path), SR
    from ..audio import load

    return load(path, sr=SR)


def run(args: argparse.Namespace) -> int:
    from ..sage.infer import SageSession

    session = SageSession(
        str(args.model), device=args.device, allow_cpu=args.allow_cpu, n_threads=args.threads
    )
    clips, srs = zip(*(_load(p) for p in args.audio), strict=True)
    if len(set(srs)) != 1:
        raise AglError(f"all clips must share one sample rate, got {sorted(set(srs))}")
    results = session.predict(list(clips), int(srs[0]), batch_size=args.batch_size)
    if args.embeddings:
        args.embeddings.mkdir(parents=True, exist_ok=True)
    for path, res in zip(args.audio, results, strict=True):
        row = {"file": str(path), **res.to_dict(top_k=args.top_k)}
        if args.embeddings:
            out = args.embeddings / (path.stem + ".npy")
            np.save(out, res.embedding)
            row["embedding"] = str(out)
        print(json.dumps(row))
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    from ..spatial.dataset import build_dataset

    rows = build_dataset(
        args.out,
        args.scenes,
        seed=args.seed,
        sources=[str(p) for p in args.sources or []],
        max_sources=args.max_sources,
        seconds=args.seconds,
        receiver=args.receiver,
        workers=args.workers,
        format=args.format,
        shard_size=args.shard_size,
        through_door=args.through_door,
    )
    n_test = sum(r["split"] == "test" for r in rows)
    receiver = rows[0]["receiver"] if rows else "-"
    print(f"{len(rows)} scenes ({n_test} test) in {args.out}, receiver {receiver}")
    return 0


def run_train(args: argparse.Namespace) -> int:
    from ..sage.model import SageConfig
    from ..sage.recipes import recipe
    from ..sage.rir import GEOMETRY_DIM
    from ..sage.train import train

    mcfg = SageConfig(
        embed_dim=args.dim,
        depth=args.depth,
        num_heads=args.heads,
        target_frame=args.target_frame,
        freq_mask=args.freq_mask,
        time_mask=args.time_mask,
        token_mask=args.token_mask,
        rir_length=args.rir_length,
        rir_geometry_dim=GEOMETRY_DIM if args.rir_geometry else 0,
        rir_depth=not args.rir_geometry,
        rir_width=args.rir_width,
    )
    extra: dict[str, Any] = {}
    if args.eta is not None:
        extra["eta"] = tuple(args.eta)
    if args.geo_lambda is not None:
        extra["geo_lambda"] = args.geo_lambda
    cfg = recipe(
        args.recipe,
        **extra,
        sigma_azimuth=args.sigma_azimuth,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        warmup=args.warmup,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
    )
    if args.stream:
        from ..sage.fit_cli import run_stream

        return run_stream(args, mcfg, cfg)
    model, metrics = train(
        args.data, args.out, model_config=mcfg, config=cfg, resume=args.resume, device=args.device
    )
    if args.export:
        from ..sage.infer import export_onnx
        from ..sage.train import load_split

        frames = int(load_split(args.data, "train", None, depth=False)["x"].shape[2])
        export_onnx(model, str(args.export), frames=frames)
    print(json.dumps(metrics))
    return 0


def run_experiment(args: argparse.Namespace) -> int:
    import torch

    from ..sage.experiment import run_experiment
    from ..sage.recipes import experiment_config

    torch.set_num_threads(args.threads)
    cfg = experiment_config(
        args.recipe,
        minutes=args.minutes,
        train_rooms=args.train_rooms,
        test_rooms=args.test_rooms,
        positions=args.positions,
        clip_seconds=args.clip_seconds,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        warmup=args.warmup,
        rir_length=args.rir_length,
        rir_width=args.rir_width,
        steps=args.steps,
        target_frame=args.target_frame,
        ipd_scale=args.ipd_scale,
        sigma_azimuth=args.sigma_azimuth,
        freq_mask=args.freq_mask,
        time_mask=args.time_mask,
        token_mask=args.token_mask,
        receiver=args.receiver,
        workers=args.workers,
        seed=args.seed,
        recordings=[str(p) for p in args.recordings],
    )
    try:
        metrics = run_experiment(cfg, args.out)
    except AglError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({k: metrics[k] for k in ("steps", "seconds", "held_out_rooms",
                                                 "training_rooms")}))  # fmt: skip
    return 0
