"""Process-wide settings: the default worker thread count."""

from __future__ import annotations

import os

from ..exceptions import ParameterError

_NUM_THREADS: int | None = None


def set_num_threads(n: int | None) -> None:
    """Set the default number of worker threads for every call.

    Parameters
    ----------
    n : int or None
        Positive thread count, or ``None`` to go back to the default
        (``AGL_FAST_NUM_THREADS``, ``RAYON_NUM_THREADS`` or ``OMP_NUM_THREADS``
        if set, in that order, else the CPUs this process may run on).
    """
    global _NUM_THREADS
    _NUM_THREADS = None if n is None else _check(n)


def get_num_threads() -> int:
    """Number of worker threads a call uses when it passes none."""
    if _NUM_THREADS is not None:
        return _NUM_THREADS
    from .. import _native

    return int(_native.default_threads())


def resolve_threads(n_threads: int | None) -> int | None:
    """Per-call thread count, falling back to :func:`set_num_threads`."""
    if n_threads is None:
        return _NUM_THREADS
    return _check(n_threads)


def _check(n: object) -> int:
    """``n`` as a thread count in ``1..max_threads()`` or a ``ParameterError``."""
    from .. import _native

    hi = int(_native.max_threads())
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= hi:
        raise ParameterError(
            f"n_threads must be an integer between 1 and {hi} (4 per CPU), got n_threads={n!r}"
        )
    return n


def env_threads() -> str | None:
    """Value of ``AGL_FAST_NUM_THREADS`` (read by the Rust core)."""
    return os.environ.get("AGL_FAST_NUM_THREADS")
