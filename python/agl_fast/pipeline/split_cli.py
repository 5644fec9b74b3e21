"""``agl-fast split TABLE --out FILE``: train / validation / test splits that
no recording crosses (see :mod:`agl_fast.pipeline.split`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..exceptions import AglError
from .split import DEFAULT_FRACTIONS, SPLIT_COLUMN, SPLIT_NAMES, split_by_group, split_by_place

__all__ = ["add_parser", "run"]


def _fractions(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {len(SPLIT_NAMES)} comma-separated shares like 0.8,0.1,0.1, got {text!r}"
        ) from None


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``split`` subcommand."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "split",
        help="train/validation/test splits by duplicate group or by place",
        description="Add a split column (" + ", ".join(SPLIT_NAMES) + ") to a deduplicated "
        "table (agl-fast dedup, or curate --dedup) and write it to --out. Every duplicate "
        "group lands in one split, so no recording crosses a split; with --by place, clips "
        "whose recording sites lie closer than --min-km also share a split, so the splits' "
        "sites are at least --min-km apart (rows without coordinates get no split). Exit "
        "status 2 when a split with a share gets no row (too few groups or places).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("table", type=Path, help="curate output directory or table (.parquet, .csv)")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="table to write (.parquet, or .csv without the binary fingerprint column)",
    )
    p.add_argument(
        "--fractions",
        type=_fractions,
        default=list(DEFAULT_FRACTIONS),
        help="shares of rows per split: " + ",".join(SPLIT_NAMES),
    )
    p.add_argument("--by", choices=("group", "place"), default="group", help="what keeps together")
    p.add_argument(
        "--min-km",
        type=float,
        default=None,
        help="with --by place: kilometres that the splits' recording sites keep apart at least",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the order units are dealt in")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Execute ``split``; returns the process exit status."""
    from .. import manifest

    path = args.table / "curated.parquet" if args.table.is_dir() else args.table
    table = manifest.read_manifest(path)
    if args.by == "place":
        if args.min_km is None:
            raise AglError("--by place needs --min-km KM")
        split, counts = split_by_place(table, args.fractions, min_km=args.min_km, seed=args.seed)
    else:
        if args.min_km is not None:
            raise AglError("--min-km applies to --by place")
        split, counts = split_by_group(table, args.fractions, seed=args.seed)
    if SPLIT_COLUMN in table.column_names:
        table = table.drop_columns([SPLIT_COLUMN])
    table = table.append_column(SPLIT_COLUMN, split)
    print(json.dumps({"out": str(args.out), **counts}), file=sys.stderr)
    wanted = [n for n, f in zip(SPLIT_NAMES, args.fractions, strict=False) if f > 0]
    empty = [n for n in counts["empty"] if n in wanted]
    if empty:
        raise AglError(
            f"split(s) {empty} got no row: {counts['units']} units (groups or places) are too "
            "few for these fractions; lower --min-km or change --fractions"
        )
    if args.out.suffix.lower() == ".csv":
        # CSV has no bytes: the fingerprints stay in the Parquet table
        binary = [f.name for f in table.schema if pa.types.is_binary(f.type)]
        table = table.drop_columns(binary)
    manifest.write_manifest(table, args.out)
    return 0
