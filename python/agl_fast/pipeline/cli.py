"""``agl-fast curate``: the command-line front end of the pipeline."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..exceptions import AglError
from .demo import write_demo_corpus
from .inputs import Inputs, discover, read_manifest
from .run import CurateConfig, curate

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``curate`` subcommand."""
    p = subparsers.add_parser(
        "curate",
        help="decode, check and featurise a corpus into one Parquet table",
        description="Decode every input file (resampled), compute levels, quality metrics "
        "and optional features, and write one row per input to OUT/curated.parquet "
        "with a run summary in OUT/summary.json. Resumable with --resume.",
    )
    p.add_argument("input", nargs="?", help="directory or glob of audio files")
    p.add_argument("--out", help="output directory (default with --demo: a temp dir)")
    p.add_argument("--manifest", help="CSV or Parquet manifest with key and path columns")
    p.add_argument("--audio-dir", help="folder the manifest's paths are relative to")
    p.add_argument("--sr", type=int, default=32000, help="target sample rate in Hz")
    p.add_argument("--mono", action="store_true", help="downmix to mono")
    p.add_argument("--features", choices=["bat", "efficientat", "none"], default="none")
    p.add_argument(
        "--tag",
        action="append",
        choices=["speech", "efficientat"],
        default=[],
        help="tagging stage(s): 'speech' (Silero VAD, shipped) or 'efficientat' "
        "(an exported mn model given by --tag-model); repeatable",
    )
    p.add_argument("--tag-model", help="ONNX file of the EfficientAT tagger (--tag efficientat)")
    p.add_argument(
        "--tag-device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="EfficientAT tagger device; CUDA falls back to CPU only with --allow-cpu",
    )
    p.add_argument("--allow-cpu", action="store_true", help="allow the tagger to run on CPU")
    p.add_argument("--workers", type=int, default=None, help="decoding threads")
    p.add_argument("--batch-size", type=int, default=8, help="files in memory at once")
    p.add_argument(
        "--max-duration",
        type=float,
        default=600.0,
        help="seconds decoded per file at most (longer files are flagged truncated)",
    )
    p.add_argument("--res-type", choices=["fast", "hq", "vhq"], default="hq")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--demo",
        action="store_true",
        help="synthesise a small corpus (with bad files) and curate it",
    )
    p.set_defaults(run=run)
    return p


class _Progress:
    def __init__(self, total: int, quiet: bool):
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.bar: Any = None
        self.files = 0
        if quiet:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total, unit="file", dynamic_ncols=True, file=sys.stderr)

    def __call__(self, n: int, audio_s: float) -> None:
        self.files += n
        dt = max(time.perf_counter() - self.t0, 1e-9)
        stats = f"{audio_s / 3600 / dt:.3f} audio h/s, {audio_s / dt:.0f}x real time"
        if self.bar is not None:
            self.bar.set_postfix_str(stats, refresh=False)
            self.bar.update(n)
        elif not self.quiet:
            print(f"{self.files} files, {self.files / dt:.1f} files/s, {stats}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _inputs(args: argparse.Namespace, demo_dir: Path | None) -> Inputs:
    if demo_dir is not None:
        return discover(str(demo_dir))
    if args.manifest:
        return read_manifest(args.manifest, args.audio_dir or args.input)
    if not args.input:
        raise AglError("give an INPUT directory or glob, --manifest CSV, or --demo")
    return discover(args.input)


def _tagging_stages(args: argparse.Namespace) -> list[Any]:
    """The tagging stages asked for with ``--tag`` (imported only then)."""
    stages: list[Any] = []
    for name in dict.fromkeys(args.tag):
        from ..tagging.results import PipelineTaggingStage

        if name == "speech":
            from ..tagging.speech import SpeechTagger

            stages.append(PipelineTaggingStage(SpeechTagger()))
        else:
            if not args.tag_model:
                raise AglError("--tag efficientat needs --tag-model MODEL.onnx")
            from ..tagging.tagger import EfficientATTagger

            tagger = EfficientATTagger(
                args.tag_model, device=args.tag_device, allow_cpu_fallback=args.allow_cpu
            )
            stages.append(PipelineTaggingStage(tagger))
    return stages


def run(args: argparse.Namespace) -> int:
    """Execute ``curate``; returns the process exit status."""
    tmp = None
    demo_dir = None
    if args.demo:
        tmp = tempfile.TemporaryDirectory(prefix="agl-fast-demo-")
        demo_dir = write_demo_corpus(Path(tmp.name) / "corpus")
    out = args.out or (str(Path(tmp.name) / "out") if tmp else None)
    if out is None:
        print("agl-fast curate: --out DIR is required", file=sys.stderr)
        return 2
    try:
        inputs = _inputs(args, demo_dir)
        cfg = CurateConfig(
            sr=args.sr,
            mono=args.mono,
            features=args.features,
            workers=args.workers,
            batch_size=args.batch_size,
            max_duration=args.max_duration,
            res_type=args.res_type,
            resume=args.resume,
        )
        stages = _tagging_stages(args)
        bar = _Progress(len(inputs.keys), args.quiet)
        try:
            summary = curate(inputs, out, cfg, stages=stages, progress=bar)
        finally:
            bar.close()
    except (AglError, OSError, ValueError) as exc:
        print(f"agl-fast curate: {exc}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            if not args.quiet:
                _show_demo(Path(out))
            tmp.cleanup()
    if not args.quiet:
        where = {"out": out} if args.out else {}
        print(json.dumps({**where, **summary["counts"], **summary["this_run"]}, indent=2))
    return 0


def _show_demo(out: Path) -> None:
    import pyarrow.parquet as pq

    path = out / "curated.parquet"
    if not path.exists():
        return
    t = pq.read_table(
        path, columns=["key", "duration", "channels", "rms_dbfs", "passed", "error_type"]
    )
    print(f"{'key':28} {'dur s':>6} {'ch':>3} {'rms dBFS':>9} {'passed':>6}  error")
    for r in t.to_pylist():
        dur = "" if r["duration"] is None else f"{r['duration']:.2f}"
        ch = "" if r["channels"] is None else str(r["channels"])
        rms = "" if r["rms_dbfs"] is None else f"{r['rms_dbfs']:.1f}"
        print(
            f"{r['key']:28} {dur:>6} {ch:>3} {rms:>9} {r['passed']!s:>6}  {r['error_type'] or ''}"
        )
