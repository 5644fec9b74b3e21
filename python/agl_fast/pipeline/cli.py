"""``agl-fast curate``: the command-line front end of the pipeline."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .._internal.onnx import DEVICES
from ..exceptions import AglError, RunInterrupted
from ..manifest import STRICT_AUDIO_HELP
from ..presets import get_recipe, recipe_names
from ..tagging.registry import get_tagger, tagger_names
from .config import LONG_CLIPS, CurateConfig
from .dedup import dedup_output
from .dedup_cli import add_dedup_options, dedup_kwargs
from .demo import demo_directories, output_note, write_demo_corpus
from .filter_flags import add_filter_flags, filter_options
from .inputs import Inputs, discover, read_manifest
from .journal import FLUSH_FILES, FLUSH_SECONDS
from .run import Executor, curate
from .shard import merge_runs, parse_shard, shard_inputs
from .stages import requested_stages

__all__ = ["add_parser", "run"]

_DEFAULTS = CurateConfig()


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``curate`` subcommand."""
    p = subparsers.add_parser(
        "curate",
        help="decode, check and featurise a corpus into one Parquet table",
        description="Decode every input file (resampled), compute levels, quality metrics "
        "and optional features, and write one row per input to OUT/curated.parquet "
        "with a run summary in OUT/summary.json. Files are decoded in worker "
        "processes: a file that crashes, hangs or exhausts a worker becomes an error row "
        "(DecoderCrash / Timeout / ResourceLimit) and the run goes on. Resumable with "
        "--resume. Exit status: 0 (failed files are counted, not fatal), 2 on a usage "
        "error, 3 when more than --max-failed-fraction of the files failed. "
        "'agl-fast curate merge OUT... --out DEST' joins finished runs (e.g. the "
        "--shard I/N tasks of a Slurm array) into one table.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _add_input_options(p)
    _add_stage_options(p)
    _add_worker_options(p)
    _add_clip_options(p)
    _add_run_options(p)
    p.set_defaults(run=run)
    return p


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """Options of ``curate``: inputs: a directory or glob, a manifest, the output directory."""
    p.add_argument(
        "input",
        nargs="*",
        help="directory or glob of audio files; or 'merge' followed by the run "
        "directories to join into --out",
    )
    p.add_argument(
        "--out",
        help="output directory (default with --demo: a new folder under the temporary "
        "directory, kept and printed; the demo corpus goes to OUT/demo-corpus)",
    )
    p.add_argument("--manifest", help="CSV or Parquet manifest with key and path columns")
    p.add_argument(
        "--audio-dir",
        help="folder of the manifest's clips: {key}.mp3 (the agl1k fetch layout) first, "
        "then the manifest's relative paths",
    )
    p.add_argument("--strict", action="store_true", help=STRICT_AUDIO_HELP)
    p.add_argument(
        "--extensions",
        type=lambda text: [e for e in text.split(",") if e.strip()],
        default=None,
        metavar="EXT[,EXT...]",
        help="more file extensions to take from an INPUT directory (e.g. 'caf,w64'); every "
        "file left out is counted under 'skipped' in summary.json",
    )


def _add_stage_options(p: argparse.ArgumentParser) -> None:
    """Options of ``curate``: what each file becomes: rate, channels, features, tagging."""
    p.add_argument("--sr", type=int, default=_DEFAULTS.sr, help="target sample rate in Hz")
    p.add_argument("--mono", action="store_true", help="downmix to mono")
    p.add_argument(
        "--features",
        choices=[*recipe_names(), "none"],
        default="none",
        help="feature recipe: "
        + "; ".join(f"{r.name}: {r.help}" for r in map(get_recipe, recipe_names())),
    )
    p.add_argument(
        "--tag",
        action="append",
        choices=tagger_names(),
        default=[],
        help="tagging stage(s), repeatable: "
        + "; ".join(f"{t.name}: {t.help}" for t in map(get_tagger, tagger_names())),
    )
    p.add_argument("--tag-model", help="ONNX file of the EfficientAT tagger (--tag efficientat)")
    p.add_argument(
        "--tag-device",
        choices=DEVICES,
        default="auto",
        help="EfficientAT tagger device: auto (CUDA when it really starts, else CPU with a "
        "warning), cuda (falls back to CPU only with --allow-cpu) or cpu",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="also write OUT/report.html: distributions, failure reasons and a map (as "
        "'agl-fast report OUT')",
    )
    p.add_argument("--allow-cpu", action="store_true", help="allow the tagger to run on CPU")
    p.add_argument(
        "--stage",
        action="append",
        choices=sorted(requested_stages()),
        default=[],
        help="registered stage(s) to run, repeatable: "
        + "; ".join(f"{k}: {v}" for k, v in sorted(requested_stages().items())),
    )
    p.add_argument(
        "--dedup",
        action="store_true",
        help="fingerprint every clip (--stage fingerprint) and, after the run, group the "
        "duplicate recordings as 'agl-fast dedup OUT' does",
    )
    add_dedup_options(p)


def _add_worker_options(p: argparse.ArgumentParser) -> None:
    """Options of ``curate``: workers, batches, limits and the failure budget."""
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes (default: the CPUs this process may use; 0: decode in "
        "this process, without crash isolation)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=_DEFAULTS.threads or 1,
        help="native threads per worker process",
    )
    p.add_argument(
        "--batch-size", type=int, default=_DEFAULTS.batch_size, help="files per worker task"
    )
    p.add_argument(
        "--file-timeout",
        type=float,
        default=_DEFAULTS.file_timeout,
        help="seconds per file before its worker is killed and the file recorded as "
        "Timeout (a batch of N files gets N times this); 0: no limit",
    )
    p.add_argument(
        "--memory-limit",
        type=_size,
        default=None,
        help="address-space cap per worker, e.g. 4G or 512M (RLIMIT_AS); a file that "
        "exceeds it is recorded as ResourceLimit",
    )
    p.add_argument(
        "--part-rows",
        type=int,
        default=_DEFAULTS.part_rows,
        help="rows per Parquet part (a part is also written at "
        f"{_DEFAULTS.part_bytes >> 20} MiB of rows); finished rows are saved long before, "
        f"within {FLUSH_FILES} files or {FLUSH_SECONDS:g} s, whatever this says",
    )
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: run the files of failed rows again (including files that "
        "crashed or hung a worker), keeping the newest row",
    )
    p.add_argument(
        "--max-failed-fraction",
        type=float,
        default=None,
        help="exit 3 when more than this share of the rows failed (default: exit 0 "
        "and print the count)",
    )


def _add_clip_options(p: argparse.ArgumentParser) -> None:
    """Options of ``curate``: rules for each clip and the quality filter thresholds."""
    p.add_argument(
        "--max-duration",
        type=float,
        default=_DEFAULTS.max_duration,
        help="seconds decoded per file at most: longer files are cut there and flagged "
        "truncated (or fail as too_long with --long-clips fail)",
    )
    p.add_argument(
        "--long-clips",
        choices=LONG_CLIPS,
        default=_DEFAULTS.long_clips,
        help="a file longer than --max-duration: keep its first --max-duration seconds "
        "(cut) or reject it (fail)",
    )
    p.add_argument(
        "--allow-cut-sources",
        action="store_true",
        help="keep files that decode to less than their header declares (flagged by "
        "decoded_fraction < 1) instead of failing them as TruncatedSource",
    )
    p.add_argument(
        "--mono-to-binaural",
        action="store_true",
        help="with --features bat: duplicate a mono clip into two ears (recorded in the "
        "channels_policy column) instead of refusing it",
    )
    p.add_argument(
        "--min-duration",
        type=float,
        default=_DEFAULTS.min_duration,
        help="reject clips shorter than this many seconds (reason too_short; 0: no limit)",
    )
    p.add_argument("--res-type", choices=["fast", "hq", "vhq"], default="hq")
    add_filter_flags(p)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Options of ``curate``: resume, shards, engine, progress and the demo."""
    p.add_argument("--resume", action="store_true", help="continue an interrupted run")
    p.add_argument(
        "--shard",
        default=None,
        help="run only shard I of N (e.g. 0/4; a key's shard is its blake2b hash mod N), "
        "for job arrays; join the shards with 'curate merge'",
    )
    p.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="'local': worker processes on this machine; 'ray': a Ray cluster "
        "(pip install 'agl-fast[ray]'), --workers CPU actors of --threads CPUs each",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="with --engine ray: the cluster to join ('auto', 'ray://host:10001'; "
        "default: RAY_ADDRESS or a new local cluster)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--demo",
        action="store_true",
        help="synthesise a small corpus (with bad files) and curate it",
    )


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
    if len(args.input) > 1:
        raise AglError(f"give one INPUT directory or glob, got {len(args.input)}: {args.input}")
    spec = args.input[0] if args.input else None
    if demo_dir is not None:
        inputs = discover(str(demo_dir))
    elif args.manifest:
        inputs = read_manifest(args.manifest, args.audio_dir or spec, strict=args.strict)
    elif not spec:
        raise AglError("give an INPUT directory or glob, --manifest CSV, or --demo")
    else:
        inputs = discover(spec, args.extensions)
    if args.shard is not None:
        inputs = shard_inputs(inputs, *parse_shard(args.shard))
    return inputs


def _merge(args: argparse.Namespace) -> int:
    runs = args.input[1:]
    if not args.out or not runs:
        print("agl-fast curate merge: give the run directories and --out DEST", file=sys.stderr)
        return 2
    try:
        summary = merge_runs(runs, args.out)
    except (AglError, OSError, ValueError) as exc:
        print(f"agl-fast curate merge: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(json.dumps({"out": args.out, **summary["counts"]}, indent=2))
    return 0


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    """Bytes from ``4G``, ``512M``, ``1048576`` (binary units)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in _UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size like 4G or 512M, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a size must be > 0, got {text!r}")
    return int(value * _UNITS[unit])


def run(args: argparse.Namespace) -> int:
    """Execute ``curate``; returns the process exit status."""
    if args.input and args.input[0] == "merge":
        return _merge(args)
    if args.report:
        # before the job: a missing matplotlib ends here with the pip line
        from ..report import check_dependencies

        check_dependencies()
    demo_dir = None
    out = args.out
    if args.demo:
        demo_dir, demo_out = demo_directories(args.out)
        write_demo_corpus(demo_dir)
        out = str(demo_out)
    if out is None:
        print("agl-fast curate: --out DIR is required", file=sys.stderr)
        return 2
    try:
        inputs = _inputs(args, demo_dir)
        if (args.min_score is not None or args.shards is not None) and not args.dedup:
            raise AglError("--min-score and --shards apply to --dedup")
        frac = args.max_failed_fraction
        if frac is not None and not 0 <= frac <= 1:
            raise AglError(f"--max-failed-fraction must be in [0, 1], got {frac}")
        executor = _executor(args)
        bar = _Progress(len(inputs.keys), args.quiet)
        try:
            summary = curate(inputs, out, _config(args), progress=bar, executor=executor)
        finally:
            bar.close()
        if args.dedup:
            summary["dedup"] = dedup_output(out, **dedup_kwargs(args))
        if args.report:
            from ..report import write_report

            write_report(out)
    except (AglError, OSError, ValueError, ImportError) as exc:
        print(f"agl-fast curate: {exc}", file=sys.stderr)
        return 2
    except RunInterrupted as exc:
        # the finished rows are saved: exit as the signal's convention says
        print(f"agl-fast curate: {exc}; continue with --resume --out {out}", file=sys.stderr)
        return 128 + exc.signum
    finally:
        if demo_dir is not None:
            if not args.quiet:
                _show_demo(Path(out))
            print(output_note(out, demo_dir))
    return _exit_status(args, out, summary)


def _executor(args: argparse.Namespace) -> Executor | None:
    """The executor ``--engine`` names (None: the default on this machine)."""
    if args.engine == "ray":
        from .engines.ray_run import RayActors

        return RayActors(args.ray_address)
    if args.ray_address:
        raise AglError("--ray-address needs --engine ray")
    return None


def _config(args: argparse.Namespace) -> CurateConfig:
    """The run configuration the parsed flags ask for."""

    return CurateConfig(
        sr=args.sr,
        mono=args.mono,
        features=args.features,
        workers=args.workers,
        threads=args.threads,
        batch_size=args.batch_size,
        max_duration=args.max_duration,
        min_duration=args.min_duration,
        long_clips=args.long_clips,
        allow_cut_sources=args.allow_cut_sources,
        channels_policy="mono-to-binaural" if args.mono_to_binaural else "refuse",
        res_type=args.res_type,
        file_timeout=args.file_timeout or None,
        memory_limit=args.memory_limit,
        part_rows=args.part_rows,
        resume=args.resume,
        retry_failed=args.retry_failed,
        tag=tuple(dict.fromkeys(args.tag)),
        tag_model=args.tag_model,
        tag_device=args.tag_device,
        allow_cpu=args.allow_cpu,
        stages=tuple(dict.fromkeys([*args.stage, *(["fingerprint"] if args.dedup else [])])),
        **filter_options(args),
    )


def _exit_status(args: argparse.Namespace, out: str, summary: dict[str, Any]) -> int:
    """Print the counts; 3 when more than ``--max-failed-fraction`` failed, else 0."""
    if not args.quiet:
        dedup = {"dedup": summary["dedup"]} if "dedup" in summary else {}
        print(
            json.dumps({"out": out, **summary["counts"], **summary["this_run"], **dedup}, indent=2)
        )
    counts = summary["counts"]
    failed, rows = counts["failed"], counts["rows"]
    share = failed / rows if rows else 0.0
    reasons = ", ".join(f"{k}: {v}" for k, v in counts["errors_by_reason"].items())
    line = f"{failed} of {rows} files failed" + (f" ({reasons})" if reasons else "")
    if args.max_failed_fraction is not None and share > args.max_failed_fraction:
        print(
            f"agl-fast curate: {line}, more than --max-failed-fraction "
            f"{args.max_failed_fraction:g}",
            file=sys.stderr,
        )
        return 3
    if not args.quiet:
        print(f"agl-fast curate: {line}", file=sys.stderr)
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
