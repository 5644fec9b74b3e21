"""``librosa.istft``: frame-batched inverse FFT, overlap-add and librosa's
window-sum normalisation.

The inverse transforms of all frames run as one batched real inverse FFT
over a frames-major copy of the spectrogram; the overlap-add runs as
``ceil(n_fft / hop_length)`` strided block additions instead of one
addition per frame. The additions reach every output sample in librosa's
order (earliest frame first, in the output's dtype), so the result is
librosa's to the last bit. :func:`overlap_add_frames` is the one engine
entry point (a compiled inverse can replace it without touching the
argument handling).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ._errors import librosa_api

__all__ = ["istft", "overlap_add_frames"]


def _blocks_add(buf: np.ndarray, frames: np.ndarray, hop: int, first: int = 0) -> None:
    """Add ``frames`` (``[..., t, n]``, frames ``first`` to ``first + t``)
    into ``buf`` (``[..., m]``, ``m >= (first + t + K - 1) * hop`` with ``K =
    ceil(n / hop)``) at ``f * hop``, in ascending frame order for every
    sample."""
    t, n = frames.shape[-2:]
    k_max = -(-n // hop)
    rows = buf.shape[-1] // hop
    blocks = buf[..., : rows * hop].reshape(*buf.shape[:-1], rows, hop)
    # block b receives frame b - k from chunk k: descending k is ascending frame
    for k in range(k_max - 1, -1, -1):
        width = min(hop, n - k * hop)
        at = first + k
        blocks[..., at : at + t, :width] += frames[..., :, k * hop : k * hop + width]


@functools.lru_cache(maxsize=32)
def _window_sumsquare(win_sq: bytes, n_fft: int, hop: int, n_frames: int, dtype: str) -> np.ndarray:
    """librosa's ``window_sumsquare`` (``norm=None``) for ``n_frames``
    frames, in ``dtype``; cached (read-only)."""
    sq = np.frombuffer(win_sq, dtype=np.float64)
    k_max = -(-n_fft // hop)
    n = n_fft + hop * (n_frames - 1)
    x = np.zeros((n_frames + k_max - 1) * hop, dtype=dtype)
    _blocks_add(x, np.broadcast_to(sq, (n_frames, n_fft)), hop)
    out = x[:n]
    out.flags.writeable = False
    return out


#: Frames inverted per batch: the batch's windowed frames stay in cache
#: while they are added.
_BATCH = 64


def overlap_add_frames(
    stft_matrix: np.ndarray,
    window: np.ndarray,
    hop: int,
    n_fft: int,
    dtype: np.dtype,
) -> np.ndarray:
    """Windowed inverse FFT of every frame of ``stft_matrix``
    (``[..., 1 + n_fft // 2, t]``), overlap-added at ``hop``: ``[..., n_fft
    + hop * (t - 1)]`` in ``dtype``."""
    import scipy.fft

    t = stft_matrix.shape[-1]
    lead = stft_matrix.shape[:-2]
    k_max = -(-n_fft // hop)
    buf = np.zeros((*lead, (t + k_max - 1) * hop), dtype=dtype)
    spec = np.swapaxes(stft_matrix, -1, -2)
    work = np.empty((*lead, min(t, _BATCH), n_fft), dtype=np.result_type(spec.real, window))
    for first in range(0, t, _BATCH):
        frames = scipy.fft.irfft(spec[..., first : first + _BATCH, :], n=n_fft, axis=-1)
        windowed = work[..., : frames.shape[-2], :]
        np.multiply(frames, window, out=windowed)
        _blocks_add(buf, windowed, hop, first)
    return buf[..., : n_fft + hop * (t - 1)]


def _int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _unsupported(
    stft_matrix: Any,
    hop_length: Any,
    win_length: Any,
    n_fft: Any,
    window: Any,
    dtype: Any,
    length: Any,
    out: Any,
) -> str | None:
    """Why this call goes to librosa (``None``: it runs here)."""
    if out is not None:
        return "an out= array"
    if not isinstance(stft_matrix, np.ndarray) or stft_matrix.ndim < 2:
        return "a spectrogram that is not a numpy array of 2 or more dimensions"
    if stft_matrix.dtype not in (np.complex64, np.complex128) or stft_matrix.shape[-1] == 0:
        return "a spectrogram that is not complex64/complex128 or has no frames"
    for value in (hop_length, win_length, n_fft, length):
        if value is not None and (not _int(value) or value <= 0):
            return "a size that is not a positive integer"
    if callable(window) or not isinstance(window, (str, tuple, float, int, np.ndarray)):
        return "a window that is not a name, tuple, number or array"
    if dtype is not None and not (
        isinstance(dtype, (type, np.dtype, str)) and np.dtype(dtype).kind == "f"
    ):
        return "a dtype that is not a real floating type"
    return None


def _window(window: Any, win_length: int, n_fft: int) -> np.ndarray:
    import scipy.signal

    from ...exceptions import ParameterError

    if isinstance(window, np.ndarray):
        if len(window) != win_length:
            raise ParameterError(f"Window size mismatch: {len(window):d} != {win_length:d}")
        w = np.asarray(window, dtype=np.float64)
    else:
        w = np.asarray(scipy.signal.get_window(window, win_length, fftbins=True))
    if win_length > n_fft:
        raise ParameterError(
            f"Target size ({n_fft:d}) must be at least input size ({win_length:d})"
        )
    lpad = (n_fft - win_length) // 2
    return np.pad(w, (lpad, n_fft - win_length - lpad))


@librosa_api
def istft(
    stft_matrix: np.ndarray,
    *,
    hop_length: int | None = None,
    win_length: int | None = None,
    n_fft: int | None = None,
    window: Any = "hann",
    center: bool = True,
    dtype: Any = None,
    length: int | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``librosa.istft``: the signal ``[shape=(..., n)]`` of a complex STFT
    ``[shape=(..., 1 + n_fft // 2, t)]``.

    float32 for complex64 input, float64 for complex128 (or ``dtype``).
    ``out=``, callable windows and inputs that are not complex arrays are
    handed to librosa (counted in :func:`coverage`).
    """
    from ._fallback import handed_over

    reason = _unsupported(stft_matrix, hop_length, win_length, n_fft, window, dtype, length, out)
    if reason is None:
        n_fft = int(n_fft) if n_fft is not None else 2 * (stft_matrix.shape[-2] - 1)
        win_length = int(win_length) if win_length is not None else n_fft
        hop_length = int(hop_length) if hop_length is not None else win_length // 4
        if min(n_fft, hop_length) < 1:  # librosa's defaults give no hop
            reason = "a size that is not a positive integer"
    if reason is not None:
        return handed_over("istft", reason)(  # type: ignore[no-any-return]
            stft_matrix, hop_length=hop_length, win_length=win_length, n_fft=n_fft,
            window=window, center=center, dtype=dtype, length=length, out=out,
        )  # fmt: skip
    hop = int(hop_length)  # type: ignore[arg-type]
    n_fft, win_length = int(n_fft), int(win_length)  # type: ignore[arg-type]
    out_dtype = np.dtype(dtype) if dtype is not None else np.dtype(stft_matrix.real.dtype)
    ifft_window = _window(window, win_length, n_fft)
    n_frames = stft_matrix.shape[-1]
    if length:
        padded = length + 2 * (n_fft // 2) if center else length
        n_frames = min(n_frames, int(np.ceil(padded / hop)))
    full = overlap_add_frames(stft_matrix[..., :n_frames], ifft_window, hop, n_fft, out_dtype)
    start = n_fft // 2 if center else 0
    if length:
        size = length
    else:
        size = n_fft + hop * (n_frames - 1) - (2 * (n_fft // 2) if center else 0)
    y = np.zeros((*stft_matrix.shape[:-2], size), dtype=out_dtype)
    kept = full[..., start : start + size]
    y[..., : kept.shape[-1]] = kept
    wss = _window_sumsquare((ifft_window**2).tobytes(), n_fft, hop, n_frames, out_dtype.str)
    w = np.zeros(size, dtype=out_dtype)
    part = wss[start : start + size]
    w[: part.shape[0]] = part
    w[~(w > np.finfo(out_dtype).tiny)] = 1.0
    y /= w
    return y
