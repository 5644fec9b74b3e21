"""``librosa.resample(res_type="polyphase")``: scipy's ``resample_poly``
with librosa's arguments (``up``/``down`` the rates over their greatest
common divisor, scipy's default Kaiser window, zero padding), the filtering
in one native pass per channel.

The filter is scipy's own (``scipy.signal.firwin``, the same length,
cutoff, window and dtype), designed once per rate pair and dtype; the
native kernel keeps the same output samples of ``upfirdn`` that
``resample_poly`` keeps, summing in the input's precision in another order
(float64 outputs agree to about 1e-15 of the signal's scale, float32 to
about 1e-6).
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["resample_poly"]


@functools.lru_cache(maxsize=16)
def _filter(up: int, down: int, dtype: str) -> tuple[np.ndarray, int]:
    """``resample_poly``'s filter for ``up``/``down`` (already reduced), in
    ``dtype``, times ``up`` and with its leading zeros; and the number of
    outputs its ``upfirdn`` result starts with that are dropped."""
    import scipy.signal

    max_rate = max(up, down)
    half_len = 10 * max_rate
    h = np.asarray(scipy.signal.firwin(2 * half_len + 1, 1.0 / max_rate, window=("kaiser", 5.0)))
    h = h.astype(dtype)
    h *= up
    n_pre_pad = down - half_len % down
    h = np.concatenate((np.zeros(n_pre_pad, dtype=h.dtype), h))
    h.setflags(write=False)
    return h, (half_len + n_pre_pad) // down


def resample_poly(x: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """Rows of ``x`` ``[rows, n]`` (float32 or float64, C-contiguous) from
    ``orig_sr`` to ``target_sr`` as ``scipy.signal.resample_poly(x, up,
    down, axis=-1)`` computes them: ``[rows, ceil(n * up / down)]``, same
    dtype."""
    from ... import _native

    g = math.gcd(orig_sr, target_sr)
    up, down = target_sr // g, orig_sr // g
    n_out = -(-x.shape[-1] * up // down)
    h, offset = _filter(up, down, x.dtype.name)
    return _native.resample_poly(x, h, up, down, offset, n_out)
