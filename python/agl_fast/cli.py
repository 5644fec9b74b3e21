"""The ``agl-fast`` command line.

Subcommands register themselves here; each family keeps its logic in its own
module (``add_parser(subparsers)`` and ``run(args) -> int``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__, _features_cli
from .evaluate import cli as _evaluate_cli
from .pipeline import cli as _curate_cli
from .tagging import cli as _tagging_cli

_COMMANDS = [_curate_cli, _features_cli, _evaluate_cli, _tagging_cli]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agl-fast",
        description="Audio geo-localization and spatial-audio toolkit (Rust-accelerated).",
    )
    parser.add_argument("--version", action="version", version=f"agl-fast {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _COMMANDS:
        mod.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agl-fast`` script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
