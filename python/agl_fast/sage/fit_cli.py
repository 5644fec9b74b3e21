"""``agl-fast spatial train --stream``: the options and the run of the
streamed trainer (:mod:`agl_fast.sage.fit`), one process or several
under ``torchrun``."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

__all__ = ["add_scene_options", "add_stream_options", "resolve_bank", "run_stream",
           "scene_data_of", "stream_sources"]  # fmt: skip

logger = logging.getLogger("agl_fast.sage.fit")

#: Where ``--stream`` keeps the BRIR bank of a simulated dataset.
BANK_DIR = "rir_bank"


def add_scene_options(g: Any, scenes_help: str = "scenes per epoch") -> None:
    """The options of streamed scenes, shared by ``spatial train --stream``
    (SAGE) and ``spatial owl train --stream``: ``--stream``, ``--scenes``,
    ``--clip-seconds``, ``--sources``, ``--synthetic-sources``."""
    g.add_argument("--stream", action="store_true",
                   help="stream scenes made on the fly from the BRIRs of DATA (a BRIR bank, "
                   "a simulated dataset whose bank is written to DATA/rir_bank once, or a "
                   "BiDepth copy: its bidepth.json or the folder holding it)")  # fmt: skip
    g.add_argument("--scenes", type=int, default=20000, help=scenes_help)
    g.add_argument("--clip-seconds", type=float, default=10.0, help="clip length (s)")
    g.add_argument("--sources", type=Path, nargs="+", default=None,
                   help="dry source files (default: synthetic events)")  # fmt: skip
    g.add_argument("--synthetic-sources", type=int, default=1000,
                   help="synthetic dry sources when no --sources are given")  # fmt: skip
    g.add_argument("--allow-outside-roots", action="store_true",
                   help="BiDepth: follow symlinks from the source and RIR roots to files "
                   "outside them (refused by default)")  # fmt: skip


def add_stream_options(tr: Any) -> None:
    """The ``--stream`` options of ``agl-fast spatial train``."""
    g = tr.add_argument_group("streamed training (--stream)")
    add_scene_options(g)
    g.add_argument("--epochs", type=int, default=1, help="epochs")
    g.add_argument("--accum", type=int, default=1, help="batches per optimiser step")
    g.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="autocast precision")  # fmt: skip
    g.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    g.add_argument("--threads", type=int, default=None, help="torch threads per process")
    g.add_argument("--mixup", type=float, default=0.0, help="mixup probability (Spatial-AST)")
    g.add_argument("--weighted", action="store_true",
                   help="draw sources by Spatial-AST's label-frequency weights")  # fmt: skip
    g.add_argument("--eval-scenes", type=int, default=0,
                   help="test clips evaluated at the end (the bank's test BRIRs)")  # fmt: skip
    g.add_argument("--eval-batch", type=int, default=64, help="evaluation batch size")
    g.add_argument("--log-every", type=int, default=10,
                   help="optimiser steps between history lines")  # fmt: skip
    g.add_argument("--init", type=Path, default=None,
                   help="start from an AudioMAE or Spatial-AST checkpoint")  # fmt: skip
    g.add_argument("--init-report", action="store_true",
                   help="with --init: load what matches and print the key report instead of "
                   "requiring an exact match")  # fmt: skip


def stream_sources(args: argparse.Namespace, seed: int) -> tuple[Any, Any]:
    """Training and evaluation sources of :func:`add_scene_options`' options:
    every fifth file to evaluation (as ``spatial simulate`` splits them), or
    disjoint synthetic seeds."""
    from .stream import FileSources, SyntheticSources

    if args.sources:
        files = [str(p) for p in args.sources]
        test = files[::5] if len(files) >= 2 else files
        train = [f for f in files if f not in test] or files
        vocab = FileSources(files, args.clip_seconds).vocab
        return (FileSources(train, args.clip_seconds, vocab=vocab),
                FileSources(test, args.clip_seconds, vocab=vocab))  # fmt: skip
    n, secs = args.synthetic_sources, args.clip_seconds
    test_seed = seed + 1_000_003  # disjoint from the training sources
    return (SyntheticSources(n, secs, seed=seed),
            SyntheticSources(max(1, n // 5), secs, seed=test_seed))  # fmt: skip


def scene_data_of(data: Path, *, allow_outside_roots: bool = False) -> Any:
    """The scene data of ``spatial train --stream``'s DATA: a BiDepth copy
    (:class:`~agl_fast.sage.bidepth.BidepthData`, reading only inside
    its roots unless ``allow_outside_roots``) or a BRIR bank path
    (:func:`resolve_bank`)."""
    from ..spatial.bidepth import is_bidepth

    if is_bidepth(data):
        from .bidepth import BidepthData

        return BidepthData(data, allow_outside_roots=allow_outside_roots)
    return resolve_bank(data)


def resolve_bank(data: Path) -> Path:
    """The BRIR bank of ``--stream``'s DATA: DATA itself, or the bank of a
    simulated dataset (written to DATA/rir_bank the first time)."""
    import os

    from ..exceptions import ParameterError
    from .stream import BANK_ARRAY, bank_from_dataset

    if (data / BANK_ARRAY).is_file():
        return data
    if not (data / "scenes.jsonl").is_file():
        raise ParameterError(f"{data}: neither a BRIR bank nor a simulated dataset")
    bank = data / BANK_DIR
    if not (bank / BANK_ARRAY).is_file():
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ParameterError(f"write the bank first: one process, `--stream` on {data}")
        logger.info("writing the BRIR bank of %s to %s", data, bank)
        bank_from_dataset(data, bank)
    return bank


def run_stream(args: argparse.Namespace, model_config: Any, config: Any) -> int:
    """Run the streamed trainer; prints the metrics (rank 0) and, with
    ``--init-report``, the key report."""
    import os

    import torch

    from .fit import FitConfig, fit
    from .stream import StreamConfig

    if args.threads:
        torch.set_num_threads(args.threads)
    scene_data = scene_data_of(
        Path(args.data), allow_outside_roots=getattr(args, "allow_outside_roots", False)
    )
    if isinstance(scene_data, Path):
        train_src, test_src = stream_sources(args, args.seed)
    elif args.sources:
        from ..exceptions import ParameterError

        raise ParameterError("--sources does not apply to BiDepth (its clips are in the layout)")
    else:
        train_src = test_src = scene_data
    bank = scene_data
    stream = StreamConfig(scenes=args.scenes, batch_size=config.batch_size,
                          seconds=args.clip_seconds, mixup=args.mixup, weighted=args.weighted,
                          seed=args.seed)  # fmt: skip
    loop = FitConfig(epochs=args.epochs, accum=args.accum, precision=args.precision,
                     workers=args.workers, checkpoint_every=config.checkpoint_every,
                     eval_scenes=args.eval_scenes, eval_batch=args.eval_batch,
                     log_every=args.log_every)  # fmt: skip
    model, metrics = fit(bank, args.out, sources=train_src, eval_sources=test_src,
                     model_config=model_config, config=config, stream=stream, loop=loop,
                     resume=args.resume, device=args.device, init=args.init,
                     init_strict=not args.init_report, log=logger.info)  # fmt: skip
    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    if args.export:
        from ..spatial.defaults import HOP, SR
        from .infer import export_onnx

        export_onnx(model, str(args.export), frames=1 + round(args.clip_seconds * SR) // HOP)
    if "init" in metrics and (args.init_report or metrics["init"].get("layout") == "owl-sage"):
        report = json.loads((Path(args.out) / "init_report.json").read_text())
        print(json.dumps({"init_report": report}))
    print(json.dumps(metrics))
    return 0
