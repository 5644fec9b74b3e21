"""The librosa release the compatibility layer follows, read once.

The version comes from the installed distribution's metadata, so reading it
imports nothing of librosa. The layer presents the signatures and meaning of
the release series it names (:data:`SERIES`): 0.10, 0.11 or 1.0. A release
before 0.10 is followed as 0.10, one after 1.0 as 1.0 (the newest series
known); without librosa installed the layer follows the newest series.
"""

from __future__ import annotations

import logging
import re
from importlib import metadata

__all__ = ["KNOWN_SERIES", "SERIES", "TEXT", "at_least"]

_log = logging.getLogger("agl_fast.compat.librosa")

#: The release series whose signatures and semantics the layer implements.
KNOWN_SERIES: tuple[tuple[int, int], ...] = ((0, 10), (0, 11), (1, 0))


def _read() -> str | None:
    try:
        return metadata.version("librosa")
    except metadata.PackageNotFoundError:
        return None


def _series(text: str | None) -> tuple[int, int]:
    """The known series that ``text`` (``"0.11.0"``, ``"1.0.0rc1"``) is
    followed as."""
    match = re.match(r"(\d+)\.(\d+)", text or "")
    if match is None:
        return KNOWN_SERIES[-1]
    found = (int(match.group(1)), int(match.group(2)))
    older = [s for s in KNOWN_SERIES if s <= found]
    series = older[-1] if older else KNOWN_SERIES[0]
    if series != found:
        _log.debug("librosa %s is followed as librosa %d.%d", text, *series)
    return series


#: The installed librosa's version string (``librosa.__version__``), or
#: ``None`` when librosa is not installed.
TEXT: str | None = _read()
#: The series the layer follows: ``(0, 10)``, ``(0, 11)`` or ``(1, 0)``.
SERIES: tuple[int, int] = _series(TEXT)


def at_least(major: int, minor: int) -> bool:
    """Whether the followed series is ``major.minor`` or later."""
    return SERIES >= (major, minor)
