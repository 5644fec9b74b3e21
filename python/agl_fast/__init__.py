"""agl-fast: Rust-accelerated audio geo-localization and spatial-audio toolkit.

The public API mirrors librosa's names and defaults; heavy work runs in the
Rust core over whole batches, in parallel, with the GIL released.

>>> import numpy as np, agl_fast
>>> clips = np.zeros((4, 2, 32000), np.float32) + 1e-3
>>> agl_fast.bat(clips).shape
(4, 4, 101, 128)
"""

from __future__ import annotations

from . import exceptions, quality, room
from ._internal.config import get_num_threads, set_num_threads
from ._native import __version__
from .audio import load, load_arrays, load_many, resample
from .bands import band_room_parameters
from .features import (
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
from .presets import PRESETS, bat, efficientat, librosa_logmel, preset
from .quality import quality_filter, quality_metrics
from .room import edc_distance, fftconvolve, room_parameters, schroeder_edc

__all__ = [
    "PRESETS",
    "StftParams",
    "__version__",
    "amplitude_to_db",
    "band_room_parameters",
    "bat",
    "edc_distance",
    "efficientat",
    "exceptions",
    "fftconvolve",
    "get_num_threads",
    "ipd_features",
    "kaldi_mel_filterbank",
    "librosa_logmel",
    "load",
    "load_arrays",
    "load_many",
    "logmel",
    "mel_filterbank",
    "melspectrogram",
    "n_frames",
    "power_to_db",
    "preset",
    "quality",
    "quality_filter",
    "quality_metrics",
    "resample",
    "room",
    "room_parameters",
    "schroeder_edc",
    "set_num_threads",
    "spectrogram",
    "stft",
]
