"""Parameter objects of the short-time transforms, with librosa's defaults.

librosa's framing defaults are declared here, once (:data:`N_FFT`,
:data:`WINDOW`, :data:`CENTER`, :data:`PAD_MODE`); every signature of the
package that takes them refers to these names. :class:`StftParams` is the
one object the native kernels take for a framing: built once from
librosa's keywords, checked once, in the core, which also resolves the
defaults that depend on other parameters (``win_length`` defaults to
``n_fft`` and ``hop_length`` to ``win_length // 4``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass
from functools import partial
from typing import Any

import numpy as np

from .. import _native
from .._internal import args as _args
from ..exceptions import ParameterError

__all__ = [
    "CENTER",
    "MEL_NORM",
    "NATIVE_PAD_MODES",
    "NATIVE_WINDOWS",
    "NUMPY_PAD_MODES",
    "N_FFT",
    "N_MELS",
    "PAD_MODE",
    "REFUSED_PAD_MODES",
    "WINDOW",
    "MelParams",
    "StftParams",
    "Window",
    "default_hop_length",
    "default_win_length",
    "resolve_window",
]

#: librosa's default FFT length in samples.
N_FFT = 2048
#: librosa's default window (periodic Hann).
WINDOW = "hann"
#: librosa's default: frames centred on ``t * hop_length``.
CENTER = True
#: librosa's default padding of a centred transform.
PAD_MODE = "constant"
#: librosa's default number of mel bands.
N_MELS = 128
#: librosa's default mel-filter normalisation (area).
MEL_NORM = "slaney"


def default_win_length(n_fft: int, win_length: int | None) -> int:
    """The window length in samples: ``win_length``, or ``n_fft`` when None.

    Parameters
    ----------
    n_fft : int
        FFT length in samples.
    win_length : int or None
        Window length in samples.

    Returns
    -------
    int
        Window length in samples.
    """
    return n_fft if win_length is None else win_length


def default_hop_length(n_fft: int, win_length: int | None, hop_length: int | None) -> int:
    """The hop in samples: ``hop_length``, or ``win_length // 4`` when None.

    Parameters
    ----------
    n_fft : int
        FFT length in samples.
    win_length : int or None
        Window length in samples (``n_fft`` when None).
    hop_length : int or None
        Samples between frames.

    Returns
    -------
    int
        Samples between frames (possibly < 1: the caller validates).
    """
    if hop_length is not None:
        return hop_length
    win = default_win_length(n_fft, win_length)
    return int(_native.default_hop_length(win)) if win >= 1 else 0


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
#: Padding the core applies itself when ``center``.
NATIVE_PAD_MODES: tuple[str, ...] = tuple(_native.Framing.NATIVE_PAD_MODES)
#: The other numpy.pad modes librosa allows: applied to the signal first.
NUMPY_PAD_MODES: tuple[str, ...] = tuple(_native.Framing.NUMPY_PAD_MODES)
# numpy.pad modes that librosa refuses for the STFT (they look at the whole
# signal, not at the frame being padded).
REFUSED_PAD_MODES = ("wrap", "maximum", "mean", "median", "minimum")


def resolve_window(window: Window, length: int | None = None, dtype: Any = np.float32) -> Any:
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


class StftParams(_native.Framing):
    """The framing of a short-time Fourier transform, built and checked once.

    librosa's keywords are resolved here (a window the core does not
    compute is made by :func:`resolve_window`); the native base type checks
    the framing once, in the core, resolves ``win_length`` and
    ``hop_length`` by its rule, and is what the kernels take as it is.

    Parameters
    ----------
    n_fft : int > 0
        FFT length in samples.
    hop_length : int > 0 or None
        Samples between frames; None gives ``win_length // 4``.
    win_length : int <= n_fft or None
        Window length in samples; None gives ``n_fft``.
    window : str, tuple, callable or np.ndarray
        Window name or coefficients (see :func:`agl_fast.dsp.stft.stft`).
    center : bool
        Pad ``n_fft // 2`` samples on both sides.
    pad_mode : str
        Padding when ``center``: one the core applies
        (:data:`NATIVE_PAD_MODES`) or one numpy applies to the signal first
        (:data:`NUMPY_PAD_MODES`, see :func:`agl_fast.dsp.stft.pad_signal`).

    Attributes
    ----------
    win_length : int
        The resolved window length in samples.
    hop_length : int
        The resolved hop in samples.
    outside_pad : str or None
        The numpy mode the signal is padded with before the transform.
    """

    __slots__ = ()

    def __new__(
        cls,
        n_fft: int = N_FFT,
        hop_length: int | None = None,
        win_length: int | None = None,
        window: Any = WINDOW,
        center: bool = CENTER,
        pad_mode: str = PAD_MODE,
    ) -> StftParams:
        native = isinstance(window, str) and window in NATIVE_WINDOWS
        coefficients = None if native else partial(resolve_window, window, dtype=np.float64)
        return super().__new__(
            cls, n_fft, hop_length, win_length, window, center, pad_mode, coefficients
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.as_kwargs().items())
        return f"StftParams({fields})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StftParams):
            return NotImplemented
        return self.as_kwargs() == other.as_kwargs()

    def __hash__(self) -> int:
        return hash(tuple(self.as_kwargs().values()))

    def __reduce__(self) -> tuple[type[StftParams], tuple[Any, ...]]:
        return StftParams, tuple(self.as_kwargs().values())

    def as_kwargs(self) -> dict[str, Any]:
        """The parameters as keyword arguments of :func:`agl_fast.dsp.stft.stft`.

        Returns
        -------
        dict of str to Any
            ``n_fft``, ``hop_length``, ``win_length``, ``window``, ``center``
            and ``pad_mode``.
        """
        return {
            "n_fft": self.n_fft,
            "hop_length": self.hop_length,
            "win_length": self.win_length,
            "window": self.window,
            "center": self.center,
            "pad_mode": self.pad_mode,
        }


@dataclass(frozen=True)
class MelParams:
    """A mel filterbank's parameters (librosa's ``filters.mel``), checked.

    Parameters
    ----------
    sr : float
        Sample rate in Hz.
    n_mels : int
        Number of bands.
    fmin : float
        Lowest band edge in Hz.
    fmax : float or None
        Highest band edge in Hz; None is ``sr / 2``.
    htk : bool
        HTK mel scale instead of Slaney's.
    norm : {'slaney', None} or float
        Row normalisation: triangle area, none, or unit Lp norm.
    """

    sr: float
    n_mels: int = N_MELS
    fmin: float = 0.0
    fmax: float | None = None
    htk: bool = False
    norm: str | float | None = MEL_NORM

    def __post_init__(self) -> None:
        # types here; ranges in the core, where the bank is built
        if self.n_mels is None:
            raise ParameterError("n_mels must be a positive integer, got None")
        object.__setattr__(self, "sr", _args.real("sr", self.sr))
        object.__setattr__(self, "fmin", _args.real("fmin", self.fmin))
        object.__setattr__(self, "fmax", _args.opt_real("fmax", self.fmax))
        object.__setattr__(self, "htk", _args.flag("htk", self.htk))
