"""``librosa.filters`` subset: ``mel``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import features as _f
from ._missing import missing

__all__ = ["mel"]


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
    """``librosa.filters.mel``: ``[shape=(n_mels, 1 + n_fft // 2)]``."""
    return _f.mel_filterbank(
        sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm
    ).astype(dtype, copy=False)


def __getattr__(name: str) -> Any:
    return missing(__name__, name)
