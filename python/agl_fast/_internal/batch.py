"""Batch input normalisation and output assembly shared by every kernel.

Inputs
------
* a numpy array: ``[samples]`` (one clip) or ``[batch, samples]`` for mono
  kernels; ``[2, samples]`` or ``[batch, 2, samples]`` for stereo kernels;
* a list or tuple of such per-clip arrays of different lengths (ragged);
* an Arrow array (anything with ``__arrow_c_array__``, e.g. pyarrow or
  polars) of ``list<float32>`` (mono) or ``list<list<float32>>`` (stereo).

Conversion: float32 is used as is (no copy when C-contiguous); float64 is
cast to float32; int16 is scaled by ``1/32768``, int32 by ``1/2**31`` and
uint8 (8-bit WAV) mapped by ``(x - 128)/128``. Any conversion or
contiguity fix is a copy, refused with ``allow_copy=False``.

Outputs follow the input: an array in gives an array ``[batch, ...]`` (or
one item without the batch axis for a single clip), a list gives a list,
Arrow gives a ``pyarrow.ListArray`` whose item ``i`` is the C-order
flattening of that clip's result. ``output="padded"`` gives
``(array, n_frames)`` with every clip padded with zeros to the longest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..exceptions import ParameterError, ShapeError
from . import args as _args

Output = Literal["auto", "numpy", "list", "arrow", "padded"]
_OUTPUTS = ("auto", "numpy", "list", "arrow", "padded")


def to_float32(x: Any, *, allow_copy: bool = True, what: str = "audio buffer") -> np.ndarray:
    """Convert one array to C-contiguous float32 per the module's rules."""
    if not isinstance(x, np.ndarray):
        if isinstance(x, (list, tuple)) and not x:
            raise ShapeError(f"{what} is empty")
        try:
            x = np.asarray(x)
        except Exception as exc:
            raise ParameterError(f"{what} cannot be read as an array: {exc}") from exc
    kind = x.dtype.kind
    if x.dtype == np.float32:
        y = x
    elif kind == "f":
        y = x.astype(np.float32)
    elif x.dtype == np.int16:
        y = x.astype(np.float32) / np.float32(32768.0)
    elif x.dtype == np.int32:
        y = (x.astype(np.float64) / 2.0**31).astype(np.float32)
    elif x.dtype == np.uint8:
        y = (x.astype(np.float32) - np.float32(128.0)) / np.float32(128.0)
    else:
        raise ParameterError(
            f"{what} must be float32, float64, int16, int32 or uint8, got dtype={x.dtype}"
        )
    if not y.flags.c_contiguous:
        y = np.ascontiguousarray(y)
    if y is not x and not allow_copy:
        raise ParameterError(
            f"{what} (dtype={x.dtype}, C-contiguous={x.flags.c_contiguous}) needs a copy "
            "to become C-contiguous float32, and allow_copy=False"
        )
    return y


def is_arrow(x: Any) -> bool:
    """Whether ``x`` is an Arrow array (it exports ``__arrow_c_array__``) or a chunked one."""
    return hasattr(x, "__arrow_c_array__") or type(x).__name__ == "ChunkedArray"


def _arrow_input(x: Any, depth: int, what: str = "y") -> Any:
    """Arrow input as a single list array of float32 values."""
    try:
        import pyarrow as pa
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise ParameterError("Arrow input needs pyarrow") from exc
    x = _args.arrow(what, x)
    inner = pa.float32()
    target = pa.list_(inner)
    if depth == 2:
        target = pa.list_(pa.list_(inner))
    if x.type != target and x.type != pa.large_list(inner):
        try:
            x = x.cast(target)
        except Exception as exc:
            raise ParameterError(
                f"{what}: Arrow input must be {target} (or castable to it), got {x.type}"
            ) from exc
    return x


@dataclass
class Prepared:
    """A batch ready for the native layer, and how to shape the result."""

    native: Any
    kind: Literal["array", "list", "arrow"]
    single: bool
    n_items: int
    lead_shape: tuple[int, ...] = ()


def prepare_mono(
    y: Any, *, allow_copy: bool = True, allow_nd: bool = False, what: str = "y"
) -> Prepared:
    """Normalise a mono batch (see module docs).

    ``allow_nd`` accepts ``[..., samples]`` of any rank (librosa's
    multichannel convention) by flattening the leading axes; ``what`` is
    the parameter's name in error messages.
    """
    if is_arrow(y):
        arr = _arrow_input(y, 1, what)
        return Prepared(arr, "arrow", False, len(arr))
    if isinstance(y, (list, tuple)) and y and not np.isscalar(y[0]):
        items = [to_float32(v, allow_copy=True, what=f"{what} item {i}") for i, v in enumerate(y)]
        for i, v in enumerate(items):
            if v.ndim != 1:
                raise ShapeError(f"{what} item {i} must be 1-D (mono samples), got shape {v.shape}")
        return Prepared(items, "list", False, len(items))
    a = to_float32(y, allow_copy=allow_copy, what=f"{what} (audio buffer)")
    if a.ndim == 0:
        raise ShapeError(f"{what} (audio buffer) must have at least one dimension, got a scalar")
    if a.ndim == 1:
        return Prepared(a.reshape(1, -1), "array", True, 1)
    if a.ndim == 2:
        return Prepared(a, "array", False, a.shape[0])
    if not allow_nd:
        raise ShapeError(
            f"{what}: mono input must be [samples] or [batch, samples], got a {a.ndim}-D array "
            f"of shape {a.shape}"
        )
    lead = a.shape[:-1]
    return Prepared(a.reshape(-1, a.shape[-1]), "array", False, int(np.prod(lead)), lead)


def prepare_stereo(y: Any, *, allow_copy: bool = True, what: str = "y") -> Prepared:
    """Normalise a stereo batch: ``[2, n]``, ``[batch, 2, n]``, a list of
    ``[2, n_i]`` arrays, or Arrow ``list<list<float32>>`` (``what`` names
    the parameter in error messages)."""
    if is_arrow(y):
        arr = _arrow_input(y, 2, what)
        return Prepared(arr, "arrow", False, len(arr))
    if isinstance(y, (list, tuple)) and y and isinstance(y[0], np.ndarray) and y[0].ndim == 2:
        items = [to_float32(v, allow_copy=True, what=f"{what} item {i}") for i, v in enumerate(y)]
        for i, v in enumerate(items):
            if v.ndim != 2 or v.shape[0] != 2:
                raise ShapeError(
                    f"stereo input required for {what}: item {i} must be [2, samples], "
                    f"got shape {v.shape}"
                )
        return Prepared(items, "list", False, len(items))
    a = to_float32(y, allow_copy=allow_copy, what=f"{what} (audio buffer)")
    if a.ndim == 2:
        if a.shape[0] != 2:
            raise ShapeError(
                f"stereo input required for {what}: expected [2, samples], got shape {a.shape} "
                "(mono or multichannel audio cannot give interaural features)"
            )
        return Prepared(a.reshape(1, 2, -1), "array", True, 1)
    if a.ndim == 3:
        if a.shape[1] != 2:
            raise ShapeError(
                f"stereo input required for {what}: expected [batch, 2, samples], "
                f"got shape {a.shape}"
            )
        return Prepared(a, "array", False, a.shape[0])
    raise ShapeError(
        f"stereo input required for {what}: expected [2, samples] or [batch, 2, samples], got a "
        f"{a.ndim}-D array of shape {a.shape}"
    )


def check_output(output: str) -> None:
    if not isinstance(output, str) or output not in _OUTPUTS:
        raise ParameterError(f"output must be one of {_OUTPUTS}, got output={output!r}")


def run(
    native_fn: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    prep: Prepared,
    item_shape: Callable[[int], tuple[int, ...]],
    output: str,
    **kwargs: Any,
) -> Any:
    """Call ``native_fn(batch, extent=..., **kwargs)`` and shape its result.

    ``item_shape(frames)`` is the shape of one clip's result with a frame
    axis of ``frames`` entries.
    """
    check_output(output)
    if prep.n_items == 0:
        raise ShapeError("the batch is empty (0 items)")
    mode = output
    if mode == "auto":
        mode = {"array": "numpy", "list": "list", "arrow": "arrow"}[prep.kind]
    if mode == "numpy" and prep.kind != "array":
        mode = "padded_only"
    extent = 0 if mode in ("padded", "padded_only") else None
    data, offsets, extents, n_frames = native_fn(prep.native, extent=extent, **kwargs)
    offsets = offsets.astype(np.int64)
    if mode in ("numpy", "padded", "padded_only"):
        ext = int(extents[0])
        out = data.reshape((prep.n_items, *item_shape(ext)))
        if prep.single and mode == "numpy":
            return out[0]
        if prep.lead_shape and mode == "numpy":
            return out.reshape(prep.lead_shape + out.shape[1:])
        if mode == "padded":
            return out, n_frames.astype(np.int64)
        return out
    if mode == "list":
        return [
            data[offsets[i] : offsets[i + 1]].reshape(item_shape(int(extents[i])))
            for i in range(prep.n_items)
        ]
    import pyarrow as pa

    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(data))


def seq_len(x: Sequence[Any]) -> int:
    return len(x)
