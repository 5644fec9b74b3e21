"""``agl-fast judge``: see :mod:`agl_fast.alm.cli` and ``docs/alm.md``."""

from __future__ import annotations

import httpx  # noqa: F401  (the command's dependency: checked on import)

from .cli import add_judge_parser as add_parser
from .cli import run_judge as run

__all__ = ["add_parser", "run"]
