"""PyTorch code shared by the models (the ``torch`` extra): differentiable
counterparts of agl-fast kernels, the EfficientAT ``mn`` models
(:mod:`agl_fast.torch.efficientat`, which imports torch when imported),
checkpoints that hold data, never code (:mod:`.checkpoint`), and the one
training loop (:mod:`.loop`) that SAGE's and OWL's trainers
(:mod:`agl_fast.sage`, :mod:`agl_fast.owl`) run.

Importing this package does not import torch; each function does so when
called.
"""

from __future__ import annotations

from .edc import edc_db, edc_loss

__all__ = ["edc_db", "edc_loss"]
