"""pytest plugin: runs librosa's own tests with agl_fast.compat.librosa
installed into ``librosa`` (:func:`agl_fast.compat.librosa.install`), so the
attributes the tests call are agl-fast's and every case agl-fast hands back
reaches librosa's original function.

Loaded by ``tests/test_librosa_suite.py`` in a child pytest run inside a
copy of librosa's test directory.
"""

from __future__ import annotations

import librosa
import librosa.feature
import librosa.filters

import agl_fast.compat.librosa as compat

#: The functions librosa's selected tests call, which must run agl-fast.
SWAPPED = {
    librosa: ("load", "resample", "get_duration", "stft", "power_to_db", "amplitude_to_db"),
    librosa.feature: ("melspectrogram", "mfcc", "rms", "spectral_flatness"),
    librosa.filters: ("mel",),
}


def pytest_configure(config: object) -> None:
    before = {(m, n): getattr(m, n) for m, names in SWAPPED.items() for n in names}
    compat.install()
    kept = [f"{m.__name__}.{n}" for (m, n), f in before.items() if getattr(m, n) is f]
    if kept:
        raise RuntimeError(f"install() left librosa's own {kept}")
