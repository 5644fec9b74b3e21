"""SAGE, the binaural encoder: its model, data, training and inference.

* :mod:`.model` (the encoder, in PyTorch) and :mod:`.rir` (its RIR branch);
* :mod:`.stream` (scenes made on the fly from a BRIR bank) and
  :mod:`.bidepth` (BiDepth's released clips as a stream);
* :mod:`.train` (stored data), :mod:`.fit` (streamed data, DDP) and
  :mod:`.experiment` (a CPU-sized run on held-out rooms), three recipes of
  the one training loop (:mod:`agl_fast.torch.loop`);
* :mod:`.infer` (ONNX export and inference).

Importing this package imports neither torch nor onnxruntime; the
submodules that need them do.
"""

from __future__ import annotations
