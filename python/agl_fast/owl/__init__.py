"""OWL, the spatial audio language model on SAGE: its model, data, training
and inference.

* :mod:`.model` (SAGE, Q-Former, projection and a LoRA decoder) and
  :mod:`.slam` (the authors' checkpoints);
* :mod:`.stream` (questions and features made on the fly) and the QA sources
  of :mod:`.cli`;
* :mod:`.train` (the paper's curriculum, a recipe of the one training loop,
  :mod:`agl_fast.torch.loop`) and :mod:`.infer` (batched answers);
* :mod:`.cli` (``agl-fast spatial owl``).

Importing this package does not import torch.
"""

from __future__ import annotations
