"""Spectral and binaural features with librosa's names, defaults and shapes.

Every function takes one clip or a batch (see :mod:`agl_fast._internal.batch` for the
accepted inputs and the output that each gives) and runs in parallel in the
Rust core with the GIL released. Results are identical for any thread count
and identical to calling the function on one clip at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _native
from ._internal.args import array, count, flag, opt_real, real, text
from ._internal.batch import (
    Output,
    _is_arrow,
    check_output,
    prepare_mono,
    prepare_stereo,
    run,
    to_float32,
)
from ._internal.config import resolve_threads
from .exceptions import NonFiniteError, ParameterError, ShapeError

__all__ = [
    "amplitude_to_db",
    "ipd_features",
    "kaldi_mel_filterbank",
    "logmel",
    "mel_filterbank",
    "melspectrogram",
    "n_frames",
    "power_to_db",
    "spectrogram",
    "stft",
]

Window = str | tuple[Any, ...] | Callable[[int], Any] | np.ndarray

# Window names the Rust core computes itself (periodic unless "_symmetric").
NATIVE_WINDOWS = frozenset(
    {
        "hann",
        "hann_periodic",
        "hanning",
        "hann_symmetric",
        "hamming",
        "hamming_periodic",
        "hamming_symmetric",
        "rectangular",
        "boxcar",
        "rect",
        "ones",
        "box",
    }
)
# Padding the Rust core applies itself when ``center``; the other numpy.pad
# modes librosa allows are applied here before the transform.
NATIVE_PAD_MODES = ("constant", "reflect")
NUMPY_PAD_MODES = ("edge", "linear_ramp", "symmetric", "empty")
# numpy.pad modes that librosa refuses for the STFT (they look at the whole
# signal, not at the frame being padded).
REFUSED_PAD_MODES = ("wrap", "maximum", "mean", "median", "minimum")


def _window(window: Window, length: int | None = None, dtype: Any = np.float32) -> Any:
    """A window as the core takes it: a native name or float32 coefficients.

    Other names and ``(name, parameter)`` tuples go through
    ``scipy.signal.get_window(window, length, fftbins=True)`` (periodic, as
    librosa); a callable is called with ``length``.
    """
    if isinstance(window, str) and window in NATIVE_WINDOWS:
        return window
    if isinstance(window, (str, tuple)) or (
        isinstance(window, (int, float)) and not isinstance(window, bool)
    ):
        if length is None:
            raise ParameterError(f"window={window!r} needs a window length")
        if isinstance(window, (int, float)) and not math.isfinite(window):
            raise ParameterError(f"window={window!r} (a Kaiser beta) must be finite")
        try:
            from scipy.signal import get_window
        except ImportError as exc:  # pragma: no cover - scipy is installed with the tests
            raise ParameterError(
                f"window={window!r} is not one of the native windows "
                f"({', '.join(sorted(NATIVE_WINDOWS))}) and scipy is not installed"
            ) from exc
        try:
            coefficients = get_window(window, length, fftbins=True)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise ParameterError(f"window={window!r} is not a known window: {exc}") from exc
        return _finite_window(np.ascontiguousarray(coefficients, dtype=dtype), window)
    if callable(window):
        if length is None:
            raise ParameterError("a window function needs a window length")
        window = window(length)
    try:
        w = np.ascontiguousarray(np.asarray(window, dtype=dtype))
    except (TypeError, ValueError) as exc:
        raise ParameterError(
            f"window must be a name, a tuple, a function or an array: {exc}"
        ) from exc
    if w.ndim != 1:
        raise ParameterError(f"window array must be 1-D, got shape {w.shape}")
    if length is not None and w.shape[0] != length:
        raise ParameterError(f"window size mismatch: {w.shape[0]} != {length}")
    return _finite_window(w, "array")


def _finite_window(w: Any, what: Any) -> Any:
    if not np.isfinite(w).all():
        raise ParameterError(f"window={what!r} has non-finite coefficients")
    return w


def _win_len(n_fft: Any, win_length: Any) -> int | None:
    """The window length a callable or scipy window is built at."""
    wl = n_fft if win_length is None else win_length
    if isinstance(wl, (int, np.integer)) and not isinstance(wl, (bool, np.bool_)) and wl > 0:
        return int(wl)
    return None


def _pad_outside(y: Any, n_fft: Any, center: bool, pad_mode: str) -> tuple[Any, bool, str]:
    """Apply a numpy.pad mode the core lacks: ``(y, center, pad_mode)`` for
    the native call. ``center`` and ``pad_mode`` are checked here, for
    every STFT-based function."""
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
    if not isinstance(y, np.ndarray) or _win_len(n_fft, None) is None:
        raise ParameterError(
            f"pad_mode={pad_mode!r} needs a numpy array input and a positive integer n_fft"
        )
    if y.size == 0:
        raise ShapeError(f"input signal is empty (shape {y.shape})")
    half = int(n_fft) // 2
    widths = [(0, 0)] * (y.ndim - 1) + [(half, half)]
    return np.pad(y, widths, mode=pad_mode), False, "constant"  # type: ignore[call-overload]


def n_frames(
    n_samples: int, *, n_fft: int = 2048, hop_length: int | None = None, center: bool = True
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
    n_samples = count("n_samples", n_samples)
    n_fft = count("n_fft", n_fft)
    center = flag("center", center)
    hop = count("hop_length", hop_length) if hop_length is not None else n_fft // 4
    if hop < 1:
        raise ParameterError(
            f"hop_length must be a positive integer, got the default n_fft // 4 = {hop}"
        )
    padded = n_samples + (2 * (n_fft // 2) if center else 0)
    if n_samples < 1 or padded < n_fft:
        raise ShapeError(f"n_fft={n_fft} is too large for an input signal of length={n_samples}")
    return 1 + (padded - n_fft) // hop


def _is_double(y: Any) -> bool:
    return isinstance(y, np.ndarray) and y.dtype == np.float64


def _stft_double(
    y: np.ndarray,
    n_fft: Any,
    hop_length: Any,
    win_length: Any,
    window: Window,
    center: bool,
    pad_mode: str,
    n_threads: int | None,
    allow_copy: bool = True,
) -> np.ndarray:
    """The float64 STFT ``[..., 1 + n_fft // 2, t]`` (complex128): every
    step in double precision, as librosa does for float64 input."""
    if y.ndim == 0 or y.size == 0:
        raise ShapeError(f"input signal is empty or a scalar (shape {y.shape})")
    if not y.flags.c_contiguous and not allow_copy:
        raise ParameterError(
            f"audio buffer (dtype={y.dtype}, C-contiguous=False) needs a copy to become "
            "C-contiguous, and allow_copy=False"
        )
    lead = y.shape[:-1]
    rows = np.ascontiguousarray(y.reshape(-1, y.shape[-1]))
    w = _window(window, _win_len(n_fft, win_length), dtype=np.float64)
    n_t, data = _native.stft_f64(
        rows,
        n_fft,
        hop_length,
        win_length,
        w,
        center,
        pad_mode,
        resolve_threads(n_threads),
    )
    return data.reshape(*lead, int(n_fft) // 2 + 1, n_t)  # type: ignore[no-any-return]


def stft(
    y: Any,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
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
    check_output(output)
    if output == "arrow":
        raise ParameterError(
            "stft returns complex values, which have no Arrow output; use output='list' or 'padded'"
        )
    if output == "auto" and _is_arrow(y):
        # Complex values have no Arrow form: an Arrow batch gives a list.
        output = "list"
    y, center, pad_mode = _pad_outside(y, n_fft, center, pad_mode)
    if _is_double(y) and isinstance(output, str) and output in ("auto", "numpy"):
        return _stft_double(
            y, n_fft, hop_length, win_length, window, center, pad_mode, n_threads, allow_copy
        )
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    return run(
        _native.stft,
        prep,
        lambda t: (n_fft // 2 + 1, t),
        output,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=_window(window, _win_len(n_fft, win_length)),
        center=center,
        pad_mode=pad_mode,
        n_threads=resolve_threads(n_threads),
    )


def _power(S: np.ndarray, power: float) -> np.ndarray:
    """``|S| ** power`` of a complex128 STFT, in float64."""
    if not (0 < power <= _native.MAX_POWER):
        raise ParameterError(
            f"power must be a positive exponent <= {_native.MAX_POWER}, got power={power}"
        )
    P = S.real**2 + S.imag**2
    return P if power == 2.0 else P ** (power / 2.0)  # type: ignore[no-any-return]


def spectrogram(
    y: Any,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
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
    check_output(output)
    if output == "auto" and _is_arrow(y):
        # Complex values have no Arrow form: an Arrow batch gives a list.
        output = "list"
    y, center, pad_mode = _pad_outside(y, n_fft, center, pad_mode)
    if _is_double(y) and isinstance(output, str) and output in ("auto", "numpy"):
        S = _stft_double(
            y, n_fft, hop_length, win_length, window, center, pad_mode, n_threads, allow_copy
        )
        return _power(S, power)
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    return run(
        _native.spectrogram,
        prep,
        lambda t: (n_fft // 2 + 1, t),
        output,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=_window(window, _win_len(n_fft, win_length)),
        center=center,
        pad_mode=pad_mode,
        power=real("power", power),
        n_threads=resolve_threads(n_threads),
    )


def mel_filterbank(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = "slaney",
) -> np.ndarray:
    """Mel filterbank, as ``librosa.filters.mel``.

    Parameters
    ----------
    sr : float > 0
        Sample rate in Hz.
    n_fft : int > 0
        FFT length.
    n_mels : int > 0
        Number of bands.
    fmin, fmax : float
        Band edges in Hz; ``fmax=None`` means ``sr / 2``.
    htk : bool
        HTK mel scale instead of Slaney's.
    norm : {'slaney', None} or float
        ``'slaney'`` divides each triangle by its width (area
        normalisation); a number p scales each row to unit Lp norm.

    Returns
    -------
    np.ndarray [shape=(n_mels, 1 + n_fft // 2), dtype=float32]
    """
    return _native.mel_filterbank(
        real("sr", sr),
        n_fft,
        n_mels,
        real("fmin", fmin),
        opt_real("fmax", fmax),
        flag("htk", htk),
        norm,
    )


def kaldi_mel_filterbank(
    *, sr: float, n_fft: int, n_mels: int = 128, fmin: float = 0.0, fmax: float = 0.0
) -> np.ndarray:
    """Kaldi triangular mel banks, as ``torchaudio.compliance.kaldi.get_mel_banks``
    (no VTLN), with the zero column EfficientAT appends for the Nyquist bin.

    Parameters
    ----------
    sr : float
        Sample rate in Hz.
    n_fft : int
        FFT length (Kaldi's padded window size).
    n_mels : int
        Number of bands.
    fmin : float
        Low edge in Hz.
    fmax : float
        High edge in Hz; ``<= 0`` counts back from Nyquist as in Kaldi.

    Returns
    -------
    np.ndarray [shape=(n_mels, 1 + n_fft // 2), dtype=float32]
        Mel scale ``1127 ln(1 + f / 700)``, unnormalised triangles.
    """
    return _native.kaldi_mel_filterbank(
        real("sr", sr), n_fft, n_mels, real("fmin", fmin), real("fmax", fmax)
    )


def _db_ref(ref: float | Callable[..., Any]) -> float | None:
    """``None`` for a per-item maximum (``np.max``/``np.amax``)."""
    if callable(ref):
        if ref in (np.max, np.amax, max):
            return None
        raise ParameterError(
            "ref must be a number or np.max for the native path, got a callable "
            f"{getattr(ref, '__name__', ref)!r}"
        )
    return real("ref", ref)


def _mel_native(y: Any, allow_copy: bool, output: Output, n_threads: int | None, **kw: Any) -> Any:
    """One native mel-spectrogram call (optionally in dB) shared by
    :func:`melspectrogram` and :func:`logmel`."""
    y, center, pad_mode = _pad_outside(y, kw["n_fft"], kw["center"], kw["pad_mode"])
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    fmax = kw["fmax"]
    kw.update(
        center=center,
        pad_mode=pad_mode,
        sr=real("sr", kw["sr"]),
        window=_window(kw["window"], _win_len(kw["n_fft"], kw["win_length"])),
        power=real("power", kw["power"]),
        fmin=real("fmin", kw["fmin"]),
        fmax=opt_real("fmax", fmax),
        htk=flag("htk", kw["htk"]),
    )
    n_mels = kw["n_mels"]
    if n_mels is None:
        raise ParameterError("n_mels must be a positive integer, got None")
    return run(
        _native.melspectrogram,
        prep,
        lambda t: (n_mels, t),
        output,
        n_threads=resolve_threads(n_threads),
        **kw,
    )


def melspectrogram(
    y: Any = None,
    *,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = "slaney",
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Mel spectrogram, as ``librosa.feature.melspectrogram``.

    Parameters
    ----------
    y : audio (see :func:`stft`) or None
        Audio at ``sr`` Hz.
    S : np.ndarray [shape=(..., 1 + n_fft // 2, t)] or None
        A precomputed spectrogram used instead of ``y``.
    sr : float
        Sample rate in Hz.
    n_fft, hop_length, win_length, window, center, pad_mode
        As in :func:`stft`.
    power : float > 0
        Exponent of the magnitude (2 = power).
    n_mels, fmin, fmax, htk, norm
        As in :func:`mel_filterbank`.

    Returns
    -------
    np.ndarray [shape=(..., n_mels, t), dtype=float32 or float64]
        float64 for a float64 numpy array (librosa: float64 spectrogram, float32 basis).
    """
    if S is not None:
        S = array("S", S)
        if S.ndim < 2:
            raise ShapeError(f"S must be a spectrogram [..., freq, t], got shape {S.shape}")
        basis = mel_filterbank(
            sr=sr,
            n_fft=2 * (S.shape[-2] - 1),
            n_mels=n_mels,
            fmin=fmin,
            fmax=fmax,
            htk=htk,
            norm=norm,
        )
        return np.einsum("...ft,mf->...mt", S, basis, optimize=True)
    if y is None:
        raise ParameterError("melspectrogram needs audio y or a spectrogram S")
    if _is_double(y) and isinstance(output, str) and output in ("auto", "numpy"):
        # librosa's float64 path: a float64 power spectrogram projected on
        # the float32 mel basis.
        P = spectrogram(
            y,
            n_fft=n_fft,
            hop_length=hop_length,
            win_length=win_length,
            window=window,
            center=center,
            pad_mode=pad_mode,
            power=power,
            n_threads=n_threads,
            allow_copy=allow_copy,
        )
        basis = mel_filterbank(
            sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm
        )
        return np.einsum("...ft,mf->...mt", P, basis, optimize=True)
    return _mel_native(
        y,
        allow_copy,
        output,
        n_threads,
        sr=sr,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=window,
        center=center,
        pad_mode=pad_mode,
        power=power,
        n_mels=n_mels,
        fmin=fmin,
        fmax=fmax,
        htk=htk,
        norm=norm,
    )


def logmel(
    y: Any,
    *,
    sr: float = 22050,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: str | float | None = "slaney",
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Log-mel spectrogram in one pass: ``power_to_db(melspectrogram(y))``
    with ``ref`` (a number or ``np.max``) and ``top_db`` applied **per clip**.

    Parameters are those of :func:`melspectrogram` and :func:`power_to_db`.

    Returns
    -------
    np.ndarray [shape=(..., n_mels, t), dtype=float32]
        Decibels.
    """
    return _mel_native(
        y,
        allow_copy,
        output,
        n_threads,
        sr=sr,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=window,
        center=center,
        pad_mode=pad_mode,
        power=power,
        n_mels=n_mels,
        fmin=fmin,
        fmax=fmax,
        htk=htk,
        norm=norm,
        to_db=True,
        db_ref=_db_ref(ref),
        amin=real("amin", amin),
        top_db=opt_real("top_db", top_db),
    )


def _to_db(
    S: Any,
    ref: float | Callable[..., Any],
    amin: float,
    top_db: float | None,
    per_item: bool,
    amplitude: bool,
    n_threads: int | None,
) -> Any:
    """dB conversion; float32 arrays take the float32 kernel, float64 arrays,
    scalars and integers the float64 one (as librosa, which computes in the
    input's precision). A 0-d input gives a 0-d result."""
    amin = real("amin", amin)
    top_db = opt_real("top_db", top_db)
    if isinstance(S, (bool, np.bool_)):
        raise ParameterError(f"S must be numeric, got {S!r}")
    raw = S if isinstance(S, np.ndarray) else array("S", S, complex_ok=True)
    if raw.dtype.kind == "c":
        raw = np.abs(raw)
    if raw.dtype.kind not in "fiu":
        raise ParameterError(f"S must be a numeric array, got dtype={raw.dtype}")
    double = raw.dtype != np.float32
    # float64 stays as given (no copy); the double kernel reports NaN itself.
    a = np.asarray(raw, dtype=np.float64) if double else to_float32(raw, what="S")
    if a.size == 0:
        raise ShapeError(f"S is empty (shape {a.shape})")
    if not double and np.isnan(a).any():
        raise NonFiniteError("S holds NaN values")
    if not (np.isfinite(amin) and amin > 0):
        raise ParameterError(f"amin must be strictly positive, got amin={amin}")
    if callable(ref) and ref not in (np.max, np.amax, max):
        r: float | None = float(ref(np.abs(a) if amplitude else a))
    else:
        r = _db_ref(ref)
    if r is not None and not np.isfinite(r):
        raise ParameterError(f"ref must be finite, got ref={r}")
    if top_db is not None and not (top_db >= 0):
        raise ParameterError(f"top_db must be non-negative, got top_db={top_db}")
    shape = a.shape
    # A float32 amplitude reference above ~1.8e19 overflows when squared in
    # float32: such calls take the double-precision kernel and come back as
    # float32.
    wide = amplitude and not double and ((r is not None and abs(r) > 1e18) or amin < 1e-18)
    kernel = _native.to_db_f64 if (double or wide) else _native.to_db
    if double and not per_item and a.ndim > 1 and a.flags.f_contiguous:
        # A Fortran-ordered array (librosa's STFT layout) is converted in
        # memory order, without a transposing copy, and keeps its layout.
        out = kernel(
            a.ravel(order="F").reshape(1, -1),
            r,
            float(amin),
            None if top_db is None else float(top_db),
            amplitude,
            resolve_threads(n_threads),
        )
        return out.reshape(shape[::-1]).T
    flat = a.reshape(1, -1) if a.ndim == 0 else a
    rows = flat.reshape(flat.shape[0], -1) if (per_item and flat.ndim > 1) else flat.reshape(1, -1)
    out = kernel(
        np.ascontiguousarray(rows, dtype=np.float64) if (double or wide) else rows,
        r,
        float(amin),
        None if top_db is None else float(top_db),
        amplitude,
        resolve_threads(n_threads),
    )
    if wide:
        out = out.astype(np.float32)
    return out.reshape(shape)


def power_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
    per_item: bool = False,
    n_threads: int | None = None,
) -> np.ndarray:
    """Power to decibels, as ``librosa.power_to_db``.

    ``10 * log10(max(amin, S)) - 10 * log10(max(amin, ref))``, then clipped
    to ``max - top_db``.

    Parameters
    ----------
    S : np.ndarray
        Power values.
    ref : float or callable
        Reference power; ``np.max`` uses the maximum.
    amin : float > 0
        Floor.
    top_db : float >= 0 or None
        Dynamic range kept below the maximum.
    per_item : bool
        Treat axis 0 as a batch: ``ref=np.max`` and ``top_db`` use each item's
        own maximum instead of the whole array's (librosa's behaviour).

    Returns
    -------
    np.ndarray [shape=S.shape, dtype=float32 or float64]
        float32 for float32 input; float64 (computed in double precision)
        for anything else, scalars included (a 0-d array then).
    """
    return _to_db(S, ref, amin, top_db, flag("per_item", per_item), False, n_threads)


def amplitude_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
    per_item: bool = False,
    n_threads: int | None = None,
) -> np.ndarray:
    """Amplitude to decibels, as ``librosa.amplitude_to_db``:
    ``power_to_db(|S|**2, ref=ref**2, amin=amin**2, top_db=top_db)``.

    Parameters are those of :func:`power_to_db` (``amin`` default ``1e-5``).

    Returns
    -------
    np.ndarray [shape=S.shape, dtype=float32 or float64]
        float32 for float32 input; float64 (computed in double precision)
        for anything else, scalars included (a 0-d array then).
    """
    return _to_db(S, ref, amin, top_db, flag("per_item", per_item), True, n_threads)


def ipd_features(
    y: Any,
    *,
    sr: float = 32000,
    n_fft: int = 1024,
    hop_length: int = 320,
    win_length: int | None = None,
    window: Window = "hann",
    center: bool = True,
    pad_mode: str = "reflect",
    n_mels: int = 128,
    fmin: float = 50.0,
    fmax: float | None = 14000.0,
    htk: bool = False,
    norm: str | float | None = "slaney",
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Mel-projected interaural phase difference features.

    With ``L`` and ``R`` the STFTs of the two channels and
    ``IPD = angle(R) - angle(L)``, returns ``mel @ cos(IPD)`` and
    ``mel @ sin(IPD)``, computed from the normalised cross-spectrum
    ``R conj(L) / (|R| |L|)`` (no trigonometric call per bin). A bin that is
    exactly zero has phase 0, as ``atan2(0, 0)`` gives.

    Parameters
    ----------
    y : np.ndarray [shape=(2, n) or (batch, 2, n)], list of such, or Arrow
        Stereo audio, channel 0 = left.
    Other parameters are those of :func:`stft` and :func:`mel_filterbank`.

    Returns
    -------
    np.ndarray [shape=(..., 2, n_mels, t), dtype=float32]
        Channel 0 is cos, channel 1 is sin.
    """
    if n_mels is None:
        raise ParameterError("n_mels must be a positive integer, got None")
    prep = prepare_stereo(y, allow_copy=allow_copy)
    return run(
        _native.ipd,
        prep,
        lambda t: (2, n_mels, t),
        output,
        sr=real("sr", sr),
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=_window(window, _win_len(n_fft, win_length)),
        center=flag("center", center),
        pad_mode=text("pad_mode", pad_mode),
        n_mels=n_mels,
        fmin=real("fmin", fmin),
        fmax=opt_real("fmax", fmax),
        htk=flag("htk", htk),
        norm=norm,
        n_threads=resolve_threads(n_threads),
    )
