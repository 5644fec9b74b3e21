"""``agl-fast dedup OUT``: find the duplicate recordings of a curate output
(see :mod:`agl_fast.pipeline.dedup`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .dedup import ENGINES, PAIRS_FILE, REPRESENTATIVE_RULE, dedup_output

__all__ = ["add_dedup_options", "add_parser", "dedup_kwargs", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``dedup`` subcommand."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "dedup",
        help="group the clips of a curate output that share audio (duplicate recordings)",
        description="Read the fingerprints of OUT/curated.parquet (curate --stage fingerprint), "
        "pair every clip with every other through the fingerprints' inverted index and join "
        "matched clips into groups. Writes duplicate_group, duplicate_of, duplicate_status, "
        "the overlap (start in each clip, duration) and the match score per row into "
        f"OUT/curated.parquet, every matched pair into OUT/{PAIRS_FILE} and the counts into "
        "OUT/summary.json (the report's duplicates section). A group's representative: "
        + ", then ".join(REPRESENTATIVE_RULE)
        + ".",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_dedup_options(p)
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="'local': pair in this process; 'ray': as Ray tasks, an index per shard probed "
        "block by block (pip install 'agl-fast[ray]'); the same pairs either way",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="with --engine ray: the cluster to join ('auto', 'ray://host:10001'; "
        "default: RAY_ADDRESS or a new local cluster)",
    )
    p.add_argument("out", type=Path, help="curate output directory")
    p.add_argument(
        "--report", action="store_true", help="also write OUT/report.html (as 'agl-fast report')"
    )
    p.add_argument("--quiet", action="store_true", help="do not print the counts")
    p.set_defaults(run=run)
    return p


def add_dedup_options(p: argparse.ArgumentParser) -> None:
    """The pairing options (shared by ``dedup`` and ``curate --dedup``)."""
    p.add_argument(
        "--min-score",
        type=float,
        default=None,
        help="score a match needs (None: the fingerprint pairing's own)",
    )
    p.add_argument(
        "--shards",
        type=int,
        default=None,
        help="cut the corpus into this many shards, an index each, probed block by block "
        "(None: one index locally; on Ray, enough blocks for the cluster's CPUs)",
    )


def dedup_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`~agl_fast.pipeline.dedup.dedup_output`
    that the parsed options give (``dedup``, and ``curate --dedup``, whose
    ``--engine`` and ``--ray-address`` are the run's)."""
    return {
        "min_score": args.min_score,
        "shards": args.shards,
        "engine": args.engine,
        "address": args.ray_address,
    }


def run(args: argparse.Namespace) -> int:
    """Execute ``dedup``; returns the process exit status."""
    if args.report:
        from ..report import check_dependencies

        check_dependencies()
    counts = dedup_output(args.out, **dedup_kwargs(args))
    if args.report:
        from ..report import write_report

        write_report(args.out)
    if not args.quiet:
        print(json.dumps({"out": str(args.out), **counts}, indent=2))
    return 0
