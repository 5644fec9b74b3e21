"""Binaural features: the mel-projected interaural phase difference."""

from __future__ import annotations

from typing import Any

from .. import _native
from .._internal.args import flag, opt_real, real, text
from .._internal.batch import Output, prepare_stereo, run
from .._internal.config import resolve_threads
from ..exceptions import ParameterError
from .stft import Window, resolve_window, window_length

__all__ = ["ipd_features"]


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
        window=resolve_window(window, window_length(n_fft, win_length)),
        center=flag("center", center),
        pad_mode=text("pad_mode", pad_mode),
        n_mels=n_mels,
        fmin=real("fmin", fmin),
        fmax=opt_real("fmax", fmax),
        htk=flag("htk", htk),
        norm=norm,
        n_threads=resolve_threads(n_threads),
    )
