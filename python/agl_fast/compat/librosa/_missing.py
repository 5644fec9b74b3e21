"""The error raised for librosa functions the compatibility layer lacks."""

from __future__ import annotations

from typing import NoReturn

from ...exceptions import NotAcceleratedError


def missing(module: str, name: str) -> NoReturn:
    if name.startswith("__"):
        raise AttributeError(name)
    public = module.replace("agl_fast.compat.", "")
    raise NotAcceleratedError(
        f"{module} does not provide {name!r}; agl-fast accelerates only part of librosa. "
        f"Use {public}.{name} from librosa itself."
    )
