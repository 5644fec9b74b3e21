"""PyTorch code (the ``torch`` extra): differentiable counterparts of
agl-fast kernels, and the EfficientAT ``mn`` models
(:mod:`agl_fast.torch.efficientat`, which imports torch when imported).

Importing this package does not import torch; each function does so when
called.
"""

from __future__ import annotations

from .edc import edc_db, edc_loss

__all__ = ["edc_db", "edc_loss"]
