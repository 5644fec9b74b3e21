"""The ``agl-fast`` command line: one subcommand per job."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .pipeline import cli as curate_cli

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run the subcommand."""
    parser = argparse.ArgumentParser(prog="agl-fast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    curate_cli.add_parser(sub).set_defaults(run=curate_cli.run)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
