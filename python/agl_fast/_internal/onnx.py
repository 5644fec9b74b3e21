"""The one ONNX Runtime session factory of agl-fast (taggers, SAGE inference).

* ``device="auto"`` (the default): the CUDA execution provider when this
  onnxruntime has it **and** it starts (``session.get_providers()`` is
  checked after the session is made), else the CPU provider with a logged
  warning (logger ``agl_fast.onnx``).
* ``device="cuda"``: CUDA or a :class:`BackendError`, unless
  ``allow_cpu_fallback=True`` (then the CPU, with a warning).
* ``device="cpu"``: the CPU provider only.
* ``providers=[...]``: passed to ONNX Runtime as given (names or ``(name,
  options)`` pairs, e.g. TensorRT then CUDA then CPU); providers this build
  lacks are dropped with a warning.

CUDA runs on GPU ``device_id`` with cuDNN's convolution algorithm search set
to ``HEURISTIC`` (no per-shape benchmarking at start). Sessions use
``intra_op_num_threads`` from ``n_threads`` (default: the agl-fast thread
setting, else half the CPUs so feature extraction keeps the other half) and
one inter-op thread.

The packages ``onnxruntime`` (extra ``cpu``) and ``onnxruntime-gpu`` (extra
``gpu``) provide the same module: install exactly one of them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ..exceptions import AglError, ParameterError
from .config import resolve_threads

__all__ = [
    "DEVICES",
    "BackendError",
    "Device",
    "default_intra_threads",
    "load_ort",
    "make_session",
]

Device = Literal["auto", "cuda", "cpu"]
DEVICES: tuple[str, ...] = ("auto", "cuda", "cpu")
_CUDA = "CUDAExecutionProvider"
_CPU = "CPUExecutionProvider"

_log = logging.getLogger("agl_fast.onnx")


class BackendError(AglError, RuntimeError):
    """The inference runtime cannot run as asked (e.g. CUDA not active)."""


def load_ort() -> Any:
    """The ``onnxruntime`` module, imported on first use."""
    # an ImportError here reaches the command line, which prints the extra
    import onnxruntime as ort

    return ort


def default_intra_threads(n_threads: int | None) -> int:
    """Intra-op threads: the caller's count, else half the CPUs (at least 1)."""
    n = resolve_threads(n_threads)
    if n is not None:
        return n
    return max(1, (os.cpu_count() or 2) // 2)


def _name(p: Any) -> str:
    return str(p[0] if isinstance(p, tuple) else p)


def make_session(
    model: str | Path | bytes,
    *,
    device: Device = "auto",
    allow_cpu_fallback: bool = False,
    providers: Sequence[Any] | None = None,
    device_id: int = 0,
    n_threads: int | None = None,
) -> tuple[Any, str]:
    """Create an ``InferenceSession``; return it and the provider in use.

    Parameters
    ----------
    model : str, Path or bytes
        ONNX file or its bytes.
    device : {"auto", "cuda", "cpu"}
        See the module notes. Must stay ``"auto"`` when ``providers`` is given.
    allow_cpu_fallback : bool
        With ``device="cuda"``: run on the CPU (with a warning) instead of
        raising when CUDA does not start.
    providers : sequence or None
        Execution providers passed through to ONNX Runtime, in priority order.
    device_id : int
        GPU index for the CUDA provider.
    n_threads : int or None
        Intra-op threads.

    Returns
    -------
    session : onnxruntime.InferenceSession
    provider : str
        The first active provider, e.g. ``"CUDAExecutionProvider"``.

    Raises
    ------
    ParameterError
        Unknown ``device``, a negative ``device_id``, or ``providers`` with a
        ``device`` other than ``"auto"``.
    BackendError
        ``device="cuda"`` and CUDA is not active (without
        ``allow_cpu_fallback``), or none of ``providers`` is available.
    """
    if device not in DEVICES:
        raise ParameterError(f"device must be one of {list(DEVICES)}, got device={device!r}")
    if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
        raise ParameterError(f"device_id must be an int >= 0, got device_id={device_id!r}")
    if providers is not None and device != "auto":
        raise ParameterError(
            f"give either device or providers, got device={device!r} and providers={providers!r}"
        )
    ort = load_ort()
    so = _session_options(ort, n_threads)
    available = list(ort.get_available_providers())
    src = model if isinstance(model, bytes) else str(model)
    if providers is not None:
        return _with_providers(ort, src, so, list(providers), available)
    if device == "cpu":
        sess = ort.InferenceSession(src, sess_options=so, providers=[_CPU])
        return sess, str(sess.get_providers()[0])
    return _on_cuda(ort, src, so, available, device_id, device == "auto" or allow_cpu_fallback)


def _session_options(ort: Any, n_threads: int | None) -> Any:
    """The package's session options: sequential, all graph optimisations."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = default_intra_threads(n_threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return so


def _with_providers(
    ort: Any, src: str | bytes, so: Any, wanted: list[Any], available: list[str]
) -> tuple[Any, str]:
    """A session on the available ones of the caller's ``providers``."""
    keep = [p for p in wanted if _name(p) in available]
    missing = [_name(p) for p in wanted if _name(p) not in available]
    if not keep:
        raise BackendError(
            f"none of the providers {[_name(p) for p in wanted]} is available "
            f"(available: {available})"
        )
    if missing:
        _log.warning("providers %s are not in this onnxruntime; using %s", missing, keep)
    sess = ort.InferenceSession(src, sess_options=so, providers=keep)
    active = sess.get_providers()
    if active[0] != _name(keep[0]):
        _log.warning("%s did not start; running on %s", _name(keep[0]), active[0])
    return sess, str(active[0])


def _on_cuda(
    ort: Any, src: str | bytes, so: Any, available: list[str], device_id: int, may_fall_back: bool
) -> tuple[Any, str]:
    """A CUDA session, or a CPU one (with a warning) when CUDA does not
    start and ``may_fall_back``; else :class:`BackendError`."""
    if _CUDA not in available:
        reason = f"this onnxruntime has no {_CUDA} (available: {available})"
        if not may_fall_back:
            raise BackendError(
                f"device='cuda' but {reason}; install agl-fast[gpu] (onnxruntime-gpu) or pass "
                "allow_cpu_fallback=True"
            )
        _log.warning("%s; running on the CPU (install agl-fast[gpu] for CUDA)", reason)
        sess = ort.InferenceSession(src, sess_options=so, providers=[_CPU])
        return sess, str(sess.get_providers()[0])
    cuda_opts = {
        "device_id": device_id,
        "cudnn_conv_algo_search": "HEURISTIC",
        "do_copy_in_default_stream": True,
    }
    try:
        sess = ort.InferenceSession(src, sess_options=so, providers=[(_CUDA, cuda_opts), _CPU])
        active = sess.get_providers()
        failure = "" if _CUDA in active else f"active providers: {active}"
    except Exception as exc:  # onnxruntime's own error types, e.g. a failed CUDA init
        if not may_fall_back:
            raise BackendError(f"the CUDA execution provider did not start: {exc}") from exc
        failure = str(exc)
        sess = None
    if failure:
        if not may_fall_back:
            raise BackendError(
                f"the CUDA execution provider did not start ({failure}); "
                "pass allow_cpu_fallback=True to run on the CPU"
            )
        _log.warning("the CUDA execution provider did not start (%s); running on the CPU", failure)
        sess = ort.InferenceSession(src, sess_options=so, providers=[_CPU])
    return sess, str(sess.get_providers()[0])
