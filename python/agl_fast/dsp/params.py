"""Parameter objects of the short-time transforms, with librosa's defaults.

librosa's framing defaults are declared here, once (:data:`N_FFT`,
:data:`WINDOW`, :data:`CENTER`, :data:`PAD_MODE`); every signature of the
package that takes them refers to these names. The defaults that depend on
other parameters are resolved here too: ``win_length`` defaults to ``n_fft``
and ``hop_length`` to ``win_length // 4`` (the core's rule, read from it).
:class:`StftParams` is the one object the native kernels take for a
framing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _native
from .._internal import args as _args
from ..exceptions import ParameterError

__all__ = [
    "CENTER",
    "MEL_NORM",
    "N_FFT",
    "N_MELS",
    "PAD_MODE",
    "WINDOW",
    "MelParams",
    "StftParams",
    "default_hop_length",
    "default_win_length",
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


@dataclass(frozen=True)
class StftParams:
    """The framing of a short-time Fourier transform, defaults resolved.

    Parameters
    ----------
    n_fft : int
        FFT length in samples.
    hop_length : int or None
        Samples between frames; None gives ``win_length // 4``.
    win_length : int or None
        Window length in samples; None gives ``n_fft``.
    window : str, tuple, callable or np.ndarray
        Window name or coefficients (see :func:`agl_fast.dsp.stft.stft`).
    center : bool
        Pad ``n_fft // 2`` samples on both sides.
    pad_mode : str
        Padding when ``center``.

    Attributes
    ----------
    win_length : int
        The resolved window length in samples.
    hop_length : int
        The resolved hop in samples.
    """

    n_fft: int = N_FFT
    hop_length: int | None = None
    win_length: int | None = None
    window: Any = WINDOW
    center: bool = CENTER
    pad_mode: str = PAD_MODE

    def __post_init__(self) -> None:
        # the one validation of the framing: counts by the core's own rule
        n_fft = _args.count("n_fft", self.n_fft)
        given_win = None if self.win_length is None else _args.count("win_length", self.win_length)
        given_hop = None if self.hop_length is None else _args.count("hop_length", self.hop_length)
        win = default_win_length(n_fft, given_win)
        if win > n_fft:
            raise ParameterError(
                f"n_fft must be >= win_length (win_length={win}), got n_fft={n_fft}"
            )
        hop = default_hop_length(n_fft, win, given_hop)
        if hop < 1:
            raise ParameterError(
                f"hop_length must be a positive integer, got hop_length={hop} (win_length // 4)"
            )
        object.__setattr__(self, "n_fft", n_fft)
        object.__setattr__(self, "win_length", win)
        object.__setattr__(self, "hop_length", hop)
        object.__setattr__(self, "center", _args.flag("center", self.center))
        object.__setattr__(self, "pad_mode", _args.text("pad_mode", self.pad_mode))

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
