"""``librosa.filters`` subset: ``mel``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ... import features as _f
from ..._internal import args as _args
from ...exceptions import ParameterError
from . import _accept
from ._errors import librosa_api
from ._fallback import module_getattr

__all__ = ["mel"]


@librosa_api
def mel(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Any = "slaney",
    dtype: Any = np.float32,
) -> np.ndarray:
    """``librosa.filters.mel``: ``[shape=(n_mels, 1 + n_fft // 2)]``.

    Warns, as librosa, when a band above 0 Hz has no FFT bin in it."""
    dtype = _args.dtype("dtype", dtype)
    # librosa reads its numbers as numpy does and the flag by its truth
    # value (the MATLAB fixtures of its tests pass numpy scalars)
    sr, fmin, fmax = (
        _accept.real("sr", sr),
        _accept.real("fmin", fmin),
        _accept.opt_real("fmax", fmax),
    )
    n_fft, n_mels = _accept.count("n_fft", n_fft), _accept.count("n_mels", n_mels)
    htk = _accept.flag(htk)
    if isinstance(norm, str) and norm != "slaney":
        raise ParameterError(f"Unsupported norm={norm}")
    weights = _f.mel_filterbank(
        sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm
    ).astype(dtype, copy=False)
    empty = weights.max(axis=1) <= 0
    if fmin == 0:
        empty[0] = False  # librosa exempts a band whose lower edge is 0 Hz
    if empty.any():
        warnings.warn(
            "Empty filters detected in mel frequency basis. "
            "Some channels will produce empty responses. "
            "Try increasing your sampling rate (and fmax) or "
            "reducing n_mels.",
            UserWarning,
            stacklevel=3,
        )
    return weights


__getattr__ = module_getattr("filters", {})
