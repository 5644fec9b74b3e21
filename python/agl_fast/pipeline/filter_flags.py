"""``agl-fast curate`` options of the quality filter and the taggers' fraction scheme.

One flag per registered quality filter (:mod:`agl_fast.quality_filters`;
``rms_floor`` is ``--rms-floor``), its default and help read from there,
plus ``--fraction-scheme``. The thresholds are agl-fast's choices: the
AGL1K paper names the filters but gives no values.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..quality_filters import check_thresholds, filters
from ..tagging.windows import DEFAULT_FRACTION_SCHEME, FRACTION_SCHEMES

__all__ = ["add_filter_flags", "filter_options", "flag_of"]


def flag_of(name: str) -> str:
    """The command-line flag of a threshold name."""
    return "--" + name.replace("_", "-")


def add_filter_flags(p: argparse.ArgumentParser) -> None:
    """Add the threshold flags and ``--fraction-scheme`` to ``p``."""
    g = p.add_argument_group(
        "quality filter and tagging",
        "filter thresholds are agl-fast's choices (the AGL1K paper gives none)",
    )
    for f in filters():
        g.add_argument(
            flag_of(f.name), dest=f"q_{f.name}", type=float, default=f.default, help=f.help,
        )  # fmt: skip
    g.add_argument(
        "--fraction-scheme", choices=FRACTION_SCHEMES, default=DEFAULT_FRACTION_SCHEME,
        help="tag time fractions: segments10 (share of ten equal segments, the released "
        "AGL1K layout) or time (exact share of the clip's time)",
    )  # fmt: skip


def filter_options(args: argparse.Namespace) -> dict[str, Any]:
    """``CurateConfig`` keyword arguments from the parsed flags."""
    return {
        "quality_thresholds": check_thresholds(
            {f.name: getattr(args, f"q_{f.name}") for f in filters()}
        ),
        "fraction_scheme": args.fraction_scheme,
    }
