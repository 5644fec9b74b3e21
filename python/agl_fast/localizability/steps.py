"""The steps of a benchmark chain: an ``agl-fast`` command run in-process
with the options it parses (``benchmark build`` and ``benchmark demo``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ..exceptions import AglError, ParameterError

__all__ = ["command_module", "run_step"]

log = logging.getLogger("agl_fast.benchmark")


def command_module(name: str) -> Any:
    """The module of the ``agl-fast`` command ``name`` (its ``add_parser``
    and ``run``), imported when its step runs."""
    if name == "curate":
        from ..pipeline import cli as curate_cli

        return curate_cli
    if name == "query":
        from ..alm import query_cli

        return query_cli
    if name == "evaluate":
        from ..evaluate import cli as evaluate_cli

        return evaluate_cli
    if name == "judge":
        from . import judge_cli

        return judge_cli
    if name == "localizability":
        from . import cli as localizability_cli

        return localizability_cli
    raise ParameterError(f"no benchmark step runs the command {name!r}")


def run_step(name: str, argv: list[str], ok: tuple[int, ...] = (0,)) -> None:
    """Run the command ``argv`` (``argv[0]`` names it) with the options it
    parses, as ``agl-fast`` would; a status outside ``ok`` stops the build.

    Its ``--quiet`` holds the package's log to errors while it runs."""
    log.info("benchmark step %s: agl-fast %s", name, " ".join(argv))
    print(f"== {name}", file=sys.stderr)
    parser = argparse.ArgumentParser(prog="agl-fast")
    command_module(argv[0]).add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    package_log = logging.getLogger("agl_fast")
    level = package_log.level
    if getattr(args, "quiet", False) is True:
        package_log.setLevel(logging.ERROR)
    try:
        code = int(args.run(args))
    finally:
        package_log.setLevel(level)
    if code not in ok:
        raise AglError(f"step {name!r} failed with exit status {code}")
