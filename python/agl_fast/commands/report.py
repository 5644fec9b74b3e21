"""``agl-fast report OUT``: write the HTML report of a curate output
directory (see :mod:`agl_fast.report`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..report import FAILED_ROWS_SHOWN, check_dependencies, write_report

__all__ = ["add_parser", "run"]

_DESCRIPTION = (
    "Read OUT/curated.parquet and OUT/summary.json and write OUT/report.html: the summary "
    "table, a world map of the manifest's coordinates coloured by outcome, a sortable table "
    "of every file that did not pass with its reason, the distributions of the levels, "
    "quality metrics and tag fractions by outcome with the run's thresholds drawn on them, "
    "and the failure reasons. The page opens offline and can be mailed."
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="write the HTML report of a curate output directory",
        description=_DESCRIPTION,
    )
    p.add_argument("out", type=Path, help="curate output directory")
    p.add_argument("--html", type=Path, default=None, help="page to write (None: OUT/report.html)")
    p.add_argument(
        "--max-rows",
        type=int,
        default=FAILED_ROWS_SHOWN,
        help="rows of the failed-files table written at most (the rest are counted)",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    check_dependencies()
    print(write_report(args.out, args.html, max_rows=args.max_rows))
    return 0
