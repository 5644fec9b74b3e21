"""Spectral and binaural features with librosa's names, defaults and shapes.

The public face of :mod:`agl_fast.dsp`, where the code lives:
:mod:`agl_fast.dsp.stft`, :mod:`agl_fast.dsp.mel`, :mod:`agl_fast.dsp.db`
and :mod:`agl_fast.dsp.ipd`.
"""

from __future__ import annotations

from .dsp import (
    StftParams,
    amplitude_to_db,
    ipd_features,
    kaldi_mel_filterbank,
    logmel,
    mel_filterbank,
    melspectrogram,
    n_frames,
    power_to_db,
    spectrogram,
    stft,
)
from .dsp.stft import NATIVE_PAD_MODES as NATIVE_PAD_MODES
from .dsp.stft import NATIVE_WINDOWS as NATIVE_WINDOWS
from .dsp.stft import NUMPY_PAD_MODES as NUMPY_PAD_MODES
from .dsp.stft import REFUSED_PAD_MODES as REFUSED_PAD_MODES
from .dsp.stft import Window as Window

__all__ = [
    "StftParams",
    "amplitude_to_db",
    "ipd_features",
    "kaldi_mel_filterbank",
    "logmel",
    "mel_filterbank",
    "melspectrogram",
    "n_frames",
    "power_to_db",
    "spectrogram",
    "stft",
]
