"""``agl-fast query``: see :mod:`agl_fast.alm.cli` and ``docs/alm.md``."""

from __future__ import annotations

import httpx  # noqa: F401  (the command's dependencies: checked on import)
import soundfile  # noqa: F401

from .cli import add_query_parser as add_parser
from .cli import run_query as run

__all__ = ["add_parser", "run"]
