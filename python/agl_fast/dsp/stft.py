"""The short-time Fourier transform: windows, padding, frame counts,
:func:`stft` and :func:`spectrogram`, with librosa's names and defaults.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _native
from .._internal.args import flag, real, text
from .._internal.batch import Output, check_output, is_arrow, prepare_mono, run
from .._internal.config import resolve_threads
from ..exceptions import ParameterError, ShapeError
from .params import (
    CENTER,
    N_FFT,
    NATIVE_PAD_MODES,
    NATIVE_WINDOWS,
    NUMPY_PAD_MODES,
    PAD_MODE,
    REFUSED_PAD_MODES,
    WINDOW,
    MelParams,
    StftParams,
    Window,
    resolve_window,
)

__all__ = [
    "NATIVE_PAD_MODES",
    "NATIVE_WINDOWS",
    "NUMPY_PAD_MODES",
    "REFUSED_PAD_MODES",
    "Window",
    "is_double",
    "n_frames",
    "pad_outside",
    "pad_signal",
    "resolve_window",
    "spectrogram",
    "spectrogram_double",
    "stft",
    "stft_double",
    "window_length",
]


def window_length(n_fft: Any, win_length: Any) -> int | None:
    """The window length a callable or scipy window is built at."""
    wl = n_fft if win_length is None else win_length
    if isinstance(wl, (int, np.integer)) and not isinstance(wl, (bool, np.bool_)) and wl > 0:
        return int(wl)
    return None


def pad_outside(y: Any, n_fft: Any, center: bool, pad_mode: str) -> tuple[Any, bool, str]:
    """Apply a numpy.pad mode the core lacks: ``(y, center, pad_mode)`` for
    the native call of a frame-wise function that takes no
    :class:`StftParams` (``rms``); ``center`` and ``pad_mode`` are checked
    here. A framing is padded by :func:`pad_signal`."""
    if n_fft is None:
        raise ParameterError("n_fft must be a positive integer, got None")
    center = flag("center", center)
    pad_mode = text("pad_mode", pad_mode)
    if not center or pad_mode in NATIVE_PAD_MODES:
        return y, center, pad_mode
    if pad_mode in REFUSED_PAD_MODES or pad_mode not in NUMPY_PAD_MODES:
        raise ParameterError(
            f"pad_mode={pad_mode!r} is not supported for the STFT; use one of "
            f"{', '.join(NATIVE_PAD_MODES + NUMPY_PAD_MODES)}"
        )
    if not isinstance(y, np.ndarray) or window_length(n_fft, None) is None:
        raise ParameterError(
            f"pad_mode={pad_mode!r} needs a numpy array input and a positive integer n_fft"
        )
    if y.size == 0:
        raise ShapeError(f"input signal is empty (shape {y.shape})")
    half = int(n_fft) // 2
    widths = [(0, 0)] * (y.ndim - 1) + [(half, half)]
    return np.pad(y, widths, mode=pad_mode), False, "constant"  # type: ignore[call-overload]


def pad_signal(y: Any, frame: _native.Framing) -> tuple[Any, _native.Framing]:
    """Pad ``y`` by the numpy mode of ``frame`` (``frame.outside_pad``),
    which the core does not apply: ``(y, frame)`` for the native call, the
    signal padded by ``n_fft // 2`` samples at both ends and the framing
    then not centred; unchanged where the core pads.

    Parameters
    ----------
    y : np.ndarray [shape=(..., n)] or any audio input
        Audio; a numpy mode needs a numpy array.
    frame : StftParams
        The framing (or one :func:`pad_signal` gave).

    Returns
    -------
    tuple of (np.ndarray [shape=(..., n + 2 * (n_fft // 2))], _native.Framing)
        The padded signal and the framing of the native call.
    """
    mode = frame.outside_pad
    if mode is None:
        return y, frame
    if not isinstance(y, np.ndarray):
        raise ParameterError(f"pad_mode={mode!r} needs a numpy array input")
    if y.size == 0:
        raise ShapeError(f"input signal is empty (shape {y.shape})")
    half = frame.n_fft // 2
    widths = [(0, 0)] * (y.ndim - 1) + [(half, half)]
    return np.pad(y, widths, mode=mode), frame.padded()  # type: ignore[call-overload]


def n_frames(
    n_samples: int, *, n_fft: int = N_FFT, hop_length: int | None = None, center: bool = CENTER
) -> int:
    """Number of STFT frames librosa produces for ``n_samples`` samples.

    Parameters
    ----------
    n_samples : int
        Signal length in samples.
    n_fft, hop_length, center
        As in :func:`stft`.

    Returns
    -------
    int
        ``1 + (n_samples + 2 * (n_fft // 2) * center - n_fft) // hop_length``.
    """
    return StftParams(n_fft, hop_length, center=center).n_frames(n_samples)


def is_double(y: Any) -> bool:
    return isinstance(y, np.ndarray) and y.dtype == np.float64


def _double_rows(y: np.ndarray, allow_copy: bool) -> np.ndarray:
    """The signal ``[..., n]`` (float64, or float32: the kernel widens each
    sample exactly) as C-contiguous rows ``[items, n]``."""
    if y.ndim == 0 or y.size == 0:
        raise ShapeError(f"input signal is empty or a scalar (shape {y.shape})")
    if not y.flags.c_contiguous and not allow_copy:
        raise ParameterError(
            f"audio buffer (dtype={y.dtype}, C-contiguous=False) needs a copy to become "
            "C-contiguous, and allow_copy=False"
        )
    return np.ascontiguousarray(y.reshape(-1, y.shape[-1]))


def stft_double(
    y: np.ndarray,
    frame: _native.Framing,
    n_threads: int | None,
    allow_copy: bool = True,
    single: bool = False,
) -> np.ndarray:
    """The float64 STFT ``[..., 1 + n_fft // 2, t]``: every step in double
    precision, as librosa does for float64 input (and for float32 input,
    which ``y`` may also be: its samples are widened exactly); complex128, or with
    ``single`` complex64 (the double-precision result rounded once, as
    librosa's for float32 input). ``y`` is already padded by
    :func:`pad_signal`."""
    rows = _double_rows(y, allow_copy)
    n_t, data = _native.stft(
        rows,
        frame,
        n_threads=resolve_threads(n_threads),
        double=True,
        single=single,
        frame_major=True,
    )
    return _frame_major(data, y.shape[:-1], frame.n_fft // 2 + 1, n_t)


def _frame_major(data: np.ndarray, lead: tuple[int, ...], width: int, n_t: int) -> np.ndarray:
    """The kernel's frame-major values ``[items, t, width]`` as the array
    ``[*lead, width, t]``: a view with the last two axes swapped, no copy.
    For one item this is librosa's own layout (its STFT matrix is
    Fortran-ordered), each frame's values side by side."""
    return np.swapaxes(data.reshape(*lead, n_t, width), -1, -2)


def spectrogram_double(
    y: np.ndarray,
    frame: _native.Framing,
    power: float,
    n_threads: int | None,
    allow_copy: bool = True,
    mel: MelParams | None = None,
) -> np.ndarray:
    """The float64 ``|stft(y)| ** power`` ``[..., 1 + n_fft // 2, t]``, or
    its projection on the mel filterbank ``mel`` ``[..., n_mels, t]``: one
    pass in double precision, the power (``re**2 + im**2``, then the
    exponent ``power / 2``) and the mel product formed frame by frame.
    ``y`` is already padded by :func:`pad_signal`."""
    rows = _double_rows(y, allow_copy)
    # The power spectrogram keeps the STFT's frame-major layout (as
    # librosa's ``np.abs(stft) ** power`` does); a mel projection is
    # written in C order, as librosa's.
    n_t, data = _native.spectrogram(
        rows,
        frame,
        real("power", power),
        n_threads=resolve_threads(n_threads),
        mel=mel,
        frame_major=mel is None,
    )
    width = data.size // (n_t * rows.shape[0])  # 1 + n_fft // 2, or n_mels
    if mel is None:
        return _frame_major(data, y.shape[:-1], width, n_t)
    return data.reshape(*y.shape[:-1], width, n_t)  # type: ignore[no-any-return]


def _complex_output(y: Any, output: Output, refuse_arrow: bool = False) -> Output:
    """The checked ``output``; ``'auto'`` is a list for an Arrow batch
    (complex values have no Arrow form)."""
    check_output(output)
    if refuse_arrow and output == "arrow":
        raise ParameterError(
            "stft returns complex values, which have no Arrow output; use output='list' or 'padded'"
        )
    if output == "auto" and is_arrow(y):
        return "list"
    return output


def stft(
    y: Any,
    *,
    n_fft: int = N_FFT,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Window = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Short-time Fourier transform, as ``librosa.stft``.

    Parameters
    ----------
    y : np.ndarray [shape=(..., n)], list of arrays, or Arrow list<float32>
        Audio. Leading axes of an array are batch axes.
    n_fft : int > 0
        FFT length in samples.
    hop_length : int > 0 or None
        Samples between frames; default ``win_length // 4``.
    win_length : int <= n_fft or None
        Window length; default ``n_fft``. The window is zero-padded to
        ``n_fft``, centred.
    window : str or np.ndarray
        ``'hann'`` (periodic, librosa's default), ``'hann_symmetric'``,
        ``'hamming'``, ``'hamming_symmetric'``, ``'rectangular'``, or an array
        of ``win_length`` coefficients.
    center : bool
        Pad ``n_fft // 2`` samples on both sides so frame ``t`` is centred at
        ``t * hop_length``.
    pad_mode : {'constant', 'reflect'}
        Padding when ``center`` (librosa's default is ``'constant'``).
    n_threads : int or None
        Worker threads; default from :func:`agl_fast.set_num_threads`,
        ``AGL_FAST_NUM_THREADS`` or the CPU count.
    output : {'auto', 'numpy', 'list', 'padded'}
        Result container (see :mod:`agl_fast._internal.batch`); complex results have
        no Arrow form, so ``'auto'`` gives a list for Arrow input.
    allow_copy : bool
        Allow copying a non-float32 or non-contiguous input.

    Returns
    -------
    np.ndarray [shape=(..., 1 + n_fft // 2, t), dtype=complex64 or complex128]
        complex128 (computed in double precision) for a float64 numpy array.
        ``t = 1 + (n + 2 * (n_fft // 2) * center - n_fft) // hop_length``.

    Examples
    --------
    >>> import numpy as np, agl_fast
    >>> y = np.sin(2 * np.pi * 440 * np.arange(22050) / 22050).astype(np.float32)
    >>> agl_fast.stft(y, n_fft=1024).shape
    (513, 87)
    """
    output = _complex_output(y, output, refuse_arrow=True)
    frame: _native.Framing = StftParams(n_fft, hop_length, win_length, window, center, pad_mode)
    y, frame = pad_signal(y, frame)
    if is_double(y) and isinstance(output, str) and output in ("auto", "numpy"):
        return stft_double(y, frame, n_threads, allow_copy)
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    width = frame.n_fft // 2 + 1
    return run(
        _native.stft,
        prep,
        lambda t: (width, t),
        output,
        framing=frame,
        n_threads=resolve_threads(n_threads),
    )


def spectrogram(
    y: Any,
    *,
    n_fft: int = N_FFT,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Window = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    power: float = 2.0,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """``|stft(y)| ** power``: magnitude (``power=1``) or power (``power=2``).

    Parameters are those of :func:`stft` plus ``power`` (> 0).

    Returns
    -------
    np.ndarray [shape=(..., 1 + n_fft // 2, t), dtype=float32 or float64]
        float64 (computed in double precision) for a float64 numpy array.
    """
    output = _complex_output(y, output)
    frame: _native.Framing = StftParams(n_fft, hop_length, win_length, window, center, pad_mode)
    y, frame = pad_signal(y, frame)
    if is_double(y) and isinstance(output, str) and output in ("auto", "numpy"):
        return spectrogram_double(y, frame, power, n_threads, allow_copy)
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    width = frame.n_fft // 2 + 1
    return run(
        _native.spectrogram,
        prep,
        lambda t: (width, t),
        output,
        framing=frame,
        power=real("power", power),
        n_threads=resolve_threads(n_threads),
    )
