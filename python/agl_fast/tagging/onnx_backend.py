"""ONNX Runtime sessions for the taggers.

* Sessions come from :func:`agl_fast._internal.onnx.make_session`, the package's one
  session factory (re-exported here): ``device="auto"`` runs on CUDA when it
  really starts and on the CPU otherwise, with a logged warning;
  ``device="cuda"`` raises a :class:`BackendError` when CUDA is not active,
  unless ``allow_cpu_fallback=True``; ``providers=`` passes execution
  providers (TensorRT, CUDA, CPU) through. The provider in use is recorded in
  :attr:`OnnxModel.provider` and in the tagging output.
* Fixed shapes: the window length is fixed and batch sizes are rounded up to
  one of a few buckets (padding with zeros), each warmed up once, so the
  runtime plans every shape once.
* I/O binding: one input and one output buffer per bucket, allocated once on
  the device (on the CPU the input buffer is a numpy array shared with
  ONNX Runtime, filled in place).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._internal.onnx import BackendError, Device, default_intra_threads, load_ort, make_session
from ..exceptions import ParameterError

__all__ = ["BackendError", "Device", "OnnxModel", "default_intra_threads", "make_session"]

DEFAULT_BUCKETS: tuple[int, ...] = (1, 8, 32, 128)


class OnnxModel:
    """A single-input, single-output ONNX model run on fixed-size batches.

    Parameters
    ----------
    model : path or bytes
        ONNX model with input ``[batch, *item_shape]`` (dynamic batch axis)
        and output ``[batch, n_outputs]``.
    item_shape : tuple of int
        Shape of one item, e.g. ``(1, 128, 1000)``.
    device, allow_cpu_fallback, providers, device_id, n_threads
        See :func:`make_session`.
    buckets : sequence of int
        Batch sizes the runtime sees; a batch is split into chunks of the
        largest bucket and each chunk is padded up to the next bucket.
    io_binding : bool
        Run through preallocated I/O bound buffers (default) or plain
        ``session.run``.
    warmup : bool
        Run every bucket once at construction.
    """

    def __init__(
        self,
        model: str | Path | bytes,
        item_shape: Sequence[int],
        *,
        device: Device = "auto",
        allow_cpu_fallback: bool = False,
        providers: Sequence[Any] | None = None,
        device_id: int = 0,
        n_threads: int | None = None,
        buckets: Sequence[int] = DEFAULT_BUCKETS,
        io_binding: bool = True,
        warmup: bool = True,
    ) -> None:
        b = sorted({int(x) for x in buckets})
        if not b or b[0] < 1:
            raise ParameterError(f"buckets must be positive batch sizes, got {list(buckets)}")
        self.buckets = tuple(b)
        self.item_shape = tuple(int(x) for x in item_shape)
        self.session, self.provider = make_session(
            model,
            device=device,
            allow_cpu_fallback=allow_cpu_fallback,
            providers=providers,
            device_id=device_id,
            n_threads=n_threads,
        )
        self.device_id = int(device_id)
        self.input_name = self.session.get_inputs()[0].name
        self.output_name = self.session.get_outputs()[0].name
        self.io_binding = bool(io_binding)
        self._on_gpu = self.provider in ("CUDAExecutionProvider", "TensorrtExecutionProvider")
        self._bound: dict[int, tuple[Any, np.ndarray | None, Any, Any]] = {}
        if warmup:
            for size in self.buckets:
                self._run_bucket(np.zeros((size, *self.item_shape), np.float32), size)

    def _bucket_for(self, n: int) -> int:
        for size in self.buckets:
            if size >= n:
                return size
        return self.buckets[-1]

    def _binding(self, size: int) -> tuple[Any, np.ndarray | None, Any, Any]:
        got = self._bound.get(size)
        if got is not None:
            return got
        ort = load_ort()
        binding = self.session.io_binding()
        # On the CPU the session reads ``host`` itself. On a GPU a full batch
        # goes straight from the caller's array to the device, and ``host``
        # is the staging buffer of partly filled ones, made at the first
        # (once per bucket: a fresh one per call costs more in page faults
        # than the copy to the device).
        host: np.ndarray | None = None
        if self._on_gpu:
            x_val = ort.OrtValue.ortvalue_from_shape_and_type(
                (size, *self.item_shape), np.float32, "cuda", self.device_id
            )
        else:
            host = np.zeros((size, *self.item_shape), np.float32)
            x_val = ort.OrtValue.ortvalue_from_numpy(host)
        binding.bind_ortvalue_input(self.input_name, x_val)
        n_out = self.session.get_outputs()[0].shape[-1]
        out_val: Any = None
        if isinstance(n_out, int):
            if self._on_gpu:
                out_val = ort.OrtValue.ortvalue_from_shape_and_type(
                    (size, n_out), np.float32, "cuda", self.device_id
                )
            else:
                out_val = ort.OrtValue.ortvalue_from_numpy(np.zeros((size, n_out), np.float32))
            binding.bind_ortvalue_output(self.output_name, out_val)
        else:
            if self._on_gpu:
                binding.bind_output(self.output_name, "cuda", self.device_id)
            else:
                binding.bind_output(self.output_name, "cpu")
        self._bound[size] = (binding, host, x_val, out_val)
        return self._bound[size]

    def _run_bucket(self, x: np.ndarray, size: int) -> np.ndarray:
        n = x.shape[0]
        if not self.io_binding:
            if n < size:
                pad = np.zeros((size - n, *self.item_shape), np.float32)
                x = np.concatenate([x, pad])
            out = self.session.run([self.output_name], {self.input_name: x})[0]
            return np.asarray(out[:n], dtype=np.float32)
        binding, host, x_val, out_val = self._binding(size)
        if self._on_gpu and n == size:
            x_val.update_inplace(x)
        else:
            if host is None:  # a GPU's staging buffer, made once
                host = np.zeros((size, *self.item_shape), np.float32)
                self._bound[size] = (binding, host, x_val, out_val)
            host[:n] = x
            host[n:] = 0.0
            if self._on_gpu:
                x_val.update_inplace(host)
        self.session.run_with_iobinding(binding)
        out = out_val.numpy() if out_val is not None else binding.get_outputs()[0].numpy()
        return np.array(out[:n], dtype=np.float32)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Run a batch ``[n, *item_shape]`` and return ``[n, n_outputs]``."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.shape[1:] != self.item_shape:
            raise ParameterError(
                f"expected items of shape {self.item_shape}, got batch shape {x.shape}"
            )
        top = self.buckets[-1]
        parts = []
        for i in range(0, x.shape[0], top):
            chunk = x[i : i + top]
            parts.append(self._run_bucket(chunk, self._bucket_for(chunk.shape[0])))
        if not parts:
            n_out = self.session.get_outputs()[0].shape[-1]
            return np.zeros((0, n_out if isinstance(n_out, int) else 0), np.float32)
        return np.concatenate(parts)
