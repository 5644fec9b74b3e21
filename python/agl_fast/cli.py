"""The ``agl-fast`` command line: one subcommand per task."""

from __future__ import annotations

import argparse
import sys

from .evaluate import cli as evaluate_cli


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``agl-fast``."""
    parser = argparse.ArgumentParser(prog="agl-fast")
    sub = parser.add_subparsers(dest="command", required=True)
    evaluate_cli.add_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
