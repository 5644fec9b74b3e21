"""Spatial audio data, shared by the spatial models: binaural scene
simulation (scenes, room acoustics, HRTFs, depth panoramas, mixtures), the
simulated datasets and their QA, BiDepth as released, reading and scoring
spatial answers, and the metrics. The models are :mod:`agl_fast.sage` and
:mod:`agl_fast.owl`.

Submodules import their optional dependencies (``pyroomacoustics``,
``h5py``) when used, not when this package is imported.
"""

from __future__ import annotations
