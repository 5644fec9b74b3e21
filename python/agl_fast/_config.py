"""Process-wide settings: the default worker thread count."""

from __future__ import annotations

import os

from .exceptions import ParameterError

_NUM_THREADS: int | None = None


def set_num_threads(n: int | None) -> None:
    """Set the default number of worker threads for every call.

    Parameters
    ----------
    n : int or None
        Positive thread count, or ``None`` to go back to the default
        (``AGL_FAST_NUM_THREADS`` if set, else the number of CPUs).
    """
    global _NUM_THREADS
    if n is not None and (not isinstance(n, int) or n < 1):
        raise ParameterError(f"n_threads must be a positive integer or None, got n_threads={n!r}")
    _NUM_THREADS = n


def get_num_threads() -> int:
    """Number of worker threads a call uses when it passes none."""
    if _NUM_THREADS is not None:
        return _NUM_THREADS
    from . import _native

    return int(_native.default_threads())


def resolve_threads(n_threads: int | None) -> int | None:
    """Per-call thread count, falling back to :func:`set_num_threads`."""
    if n_threads is None:
        return _NUM_THREADS
    if not isinstance(n_threads, int) or isinstance(n_threads, bool) or n_threads < 1:
        raise ParameterError(f"n_threads must be a positive integer, got n_threads={n_threads!r}")
    return n_threads


def env_threads() -> str | None:
    """Value of ``AGL_FAST_NUM_THREADS`` (read by the Rust core)."""
    return os.environ.get("AGL_FAST_NUM_THREADS")
