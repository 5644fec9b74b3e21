"""Spatial audio: binaural scene simulation, SAGE inference and metrics.

Submodules import their optional dependencies (``pyroomacoustics``,
``h5py``, ``onnxruntime``) when used, not when this package is imported.
"""

from __future__ import annotations
