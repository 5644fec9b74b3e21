"""Spectral and binaural features with librosa's names, defaults and shapes.

Every function takes one clip or a batch (see :mod:`agl_fast._internal.batch` for the
accepted inputs and the output that each gives) and runs in parallel in the
Rust core with the GIL released. Results are identical for any thread count
and identical to calling the function on one clip at a time.

Modules: :mod:`.params` (:class:`StftParams`), :mod:`.stft` (windows,
padding, :func:`stft`, :func:`spectrogram`), :mod:`.mel` (filterbanks, mel
spectrograms), :mod:`.db` (decibels) and :mod:`.ipd` (binaural features).
"""

from __future__ import annotations

from .db import amplitude_to_db, power_to_db
from .ipd import ipd_features
from .mel import kaldi_mel_filterbank, logmel, mel_filterbank, melspectrogram
from .params import StftParams
from .stft import n_frames, spectrogram, stft

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
