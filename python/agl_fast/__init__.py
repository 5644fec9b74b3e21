"""agl-fast: Rust-accelerated audio geo-localization and spatial-audio toolkit.

The public API mirrors librosa's names and defaults; heavy work runs in the
Rust core over whole batches, in parallel, with the GIL released.

>>> import numpy as np, agl_fast
>>> clips = np.zeros((4, 2, 32000), np.float32) + 1e-3
>>> agl_fast.bat(clips).shape
(4, 4, 101, 128)
"""

from __future__ import annotations

import importlib

# typing is not imported at run time (it costs the start-up what the lazy
# names save); type checkers read this block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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

#: Where each public name lives, imported on first use (PEP 562), so that
#: ``import agl_fast`` (and ``python -m agl_fast.compat.librosa``) costs
#: nothing until a function runs: numpy, pyarrow and the native module load
#: with the first name that needs them.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_native": ("__version__",),
    "_internal.config": ("get_num_threads", "set_num_threads"),
    "audio": ("load", "load_arrays", "load_many", "resample"),
    "bands": ("band_room_parameters",),
    "features": ("StftParams", "amplitude_to_db", "ipd_features", "kaldi_mel_filterbank", "logmel",
                 "mel_filterbank", "melspectrogram", "n_frames", "power_to_db", "spectrogram",
                 "stft"),
    "presets": ("PRESETS", "bat", "efficientat", "librosa_logmel", "preset"),
    "quality": ("quality_filter", "quality_metrics"),
    "room": ("edc_distance", "fftconvolve", "room_parameters", "schroeder_edc"),
}  # fmt: skip
_HOMES = {name: module for module, names in _EXPORTS.items() for name in names}


def _submodule_exists(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(f"{__name__}.{name}") is not None


def __getattr__(name: str) -> Any:
    """A public name (or a submodule: ``agl_fast.features``), imported on
    first use and kept in the package namespace."""
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    elif not name.startswith("_") and _submodule_exists(name):
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
