"""The accelerated names whose signature differs in librosa 0.10, in 0.10's
form; the package serves them when the installed librosa is 0.10 (see
:mod:`._version`).

* ``feature.mfcc`` has no ``mel_norm`` (0.11 added it): the mel spectrogram
  always has librosa's default ``"slaney"`` normalisation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._errors import HandOver, librosa_api

__all__ = ["mfcc"]


@librosa_api
def mfcc(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_mfcc: int = 20,
    dct_type: int = 2,
    norm: str | None = "ortho",
    lifter: float = 0,
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.feature.mfcc`` of librosa 0.10: ``[shape=(..., n_mfcc, t)]``
    (see :func:`.feature.mfcc`)."""
    from . import feature

    if "mel_norm" in kwargs:
        raise HandOver("mel_norm= is a filter keyword in librosa 0.10")
    # the 0.11 form, unwrapped so that the call is counted once
    later = feature.mfcc_with_mel_norm.__wrapped__  # type: ignore[attr-defined]
    return later(  # type: ignore[no-any-return]
        y=y, sr=sr, S=S, n_mfcc=n_mfcc, dct_type=dct_type, norm=norm, lifter=lifter, **kwargs
    )
