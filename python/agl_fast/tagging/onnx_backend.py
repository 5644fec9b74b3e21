"""ONNX Runtime sessions for the taggers.

* Provider choice: ``device="cuda"`` asks for the CUDA execution provider
  (package ``onnxruntime-gpu``) with cuDNN convolution algorithm search set to
  ``HEURISTIC``; after the session is made, ``session.get_providers()`` is
  checked and a :class:`~agl_fast.exceptions.BackendError` is raised when
  CUDA is not active, unless ``allow_cpu_fallback=True``. ``device="cpu"``
  asks for the CPU provider only. The provider in use is recorded in
  :attr:`OnnxModel.provider` and in the tagging output.
* Fixed shapes: the window length is fixed and batch sizes are rounded up to
  one of a few buckets (padding with zeros), each warmed up once, so the
  runtime plans every shape once.
* I/O binding: one input and one output buffer per bucket, allocated once on
  the device (on the CPU the input buffer is a numpy array shared with
  ONNX Runtime, filled in place).
* Threads: ``intra_op_num_threads`` from ``n_threads`` (default: the
  agl-fast thread setting, else half the CPUs so feature extraction keeps
  the other half); one inter-op thread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._config import resolve_threads
from ..exceptions import AglError, ParameterError

__all__ = ["BackendError", "OnnxModel", "make_session"]

Device = Literal["cuda", "cpu"]
DEFAULT_BUCKETS: tuple[int, ...] = (1, 8, 32, 128)


class BackendError(AglError, RuntimeError):
    """The inference runtime cannot run as asked (e.g. CUDA not active)."""


def _ort() -> Any:
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - onnxruntime is a test requirement
        raise BackendError(
            "onnxruntime is not installed; pip install onnxruntime (or onnxruntime-gpu)"
        ) from exc
    return ort


def default_intra_threads(n_threads: int | None) -> int:
    """Intra-op threads: the caller's count, else half the CPUs (at least 1)."""
    n = resolve_threads(n_threads)
    if n is not None:
        return n
    return max(1, (os.cpu_count() or 2) // 2)


def make_session(
    model: str | Path | bytes,
    *,
    device: Device = "cuda",
    allow_cpu_fallback: bool = False,
    n_threads: int | None = None,
    device_id: int = 0,
) -> tuple[Any, str]:
    """Create an ``InferenceSession`` and return it with the provider in use.

    Raises
    ------
    BackendError
        ``device="cuda"`` and CUDA is not the active provider, without
        ``allow_cpu_fallback``.
    """
    if device not in ("cuda", "cpu"):
        raise ParameterError(f"device must be 'cuda' or 'cpu', got device={device!r}")
    ort = _ort()
    so = ort.SessionOptions()
    so.intra_op_num_threads = default_intra_threads(n_threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    providers: list[Any] = ["CPUExecutionProvider"]
    if device == "cuda":
        available = ort.get_available_providers()
        if "CUDAExecutionProvider" not in available and not allow_cpu_fallback:
            raise BackendError(
                "device='cuda' but this onnxruntime has no CUDAExecutionProvider "
                f"(available: {available}); install onnxruntime-gpu or pass "
                "allow_cpu_fallback=True"
            )
        cuda_opts = {
            "device_id": device_id,
            "cudnn_conv_algo_search": "HEURISTIC",
            "do_copy_in_default_stream": True,
        }
        providers = [("CUDAExecutionProvider", cuda_opts), "CPUExecutionProvider"]
        providers = [p for p in providers if (p[0] if isinstance(p, tuple) else p) in available]
    src = model if isinstance(model, bytes) else str(model)
    sess = ort.InferenceSession(src, sess_options=so, providers=providers)
    active = sess.get_providers()
    if device == "cuda" and "CUDAExecutionProvider" not in active and not allow_cpu_fallback:
        raise BackendError(
            f"the CUDA execution provider did not start (active providers: {active}); "
            "pass allow_cpu_fallback=True to run on the CPU"
        )
    return sess, str(active[0])


class OnnxModel:
    """A single-input, single-output ONNX model run on fixed-size batches.

    Parameters
    ----------
    model : path or bytes
        ONNX model with input ``[batch, *item_shape]`` (dynamic batch axis)
        and output ``[batch, n_outputs]``.
    item_shape : tuple of int
        Shape of one item, e.g. ``(1, 128, 1000)``.
    device, allow_cpu_fallback, n_threads
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
        device: Device = "cuda",
        allow_cpu_fallback: bool = False,
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
            model, device=device, allow_cpu_fallback=allow_cpu_fallback, n_threads=n_threads
        )
        self.input_name = self.session.get_inputs()[0].name
        self.output_name = self.session.get_outputs()[0].name
        self.io_binding = bool(io_binding)
        self._on_gpu = self.provider == "CUDAExecutionProvider"
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
        ort = _ort()
        binding = self.session.io_binding()
        host: np.ndarray | None
        if self._on_gpu:
            host = None
            x_val = ort.OrtValue.ortvalue_from_shape_and_type(
                (size, *self.item_shape), np.float32, "cuda", 0
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
                    (size, n_out), np.float32, "cuda", 0
                )
            else:
                out_val = ort.OrtValue.ortvalue_from_numpy(np.zeros((size, n_out), np.float32))
            binding.bind_ortvalue_output(self.output_name, out_val)
        else:
            binding.bind_output(self.output_name, "cuda" if self._on_gpu else "cpu")
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
        if host is not None:
            host[:n] = x
            host[n:] = 0.0
        else:
            full = np.zeros((size, *self.item_shape), np.float32)
            full[:n] = x
            x_val.update_inplace(full)
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
