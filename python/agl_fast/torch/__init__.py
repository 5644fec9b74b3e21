"""Differentiable PyTorch counterparts of agl-fast kernels (the ``torch`` extra).

Importing this package does not import torch; each function does so when
called.
"""

from __future__ import annotations

from .edc import edc_db, edc_loss

__all__ = ["edc_db", "edc_loss"]
