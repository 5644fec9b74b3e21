"""Binaural features: the mel-projected interaural phase difference."""

from __future__ import annotations

from typing import Any

from .. import _native
from .._internal.batch import Output, prepare_stereo, run
from .._internal.config import resolve_threads
from .params import CENTER, MEL_NORM, N_MELS, WINDOW, MelParams, StftParams, Window

__all__ = ["ipd_features"]


def ipd_features(
    y: Any,
    *,
    sr: float = 32000,
    n_fft: int = _native.PRESET_N_FFT,
    hop_length: int = 320,
    win_length: int | None = None,
    window: Window = WINDOW,
    center: bool = CENTER,
    pad_mode: str = "reflect",
    n_mels: int = N_MELS,
    fmin: float = 50.0,
    fmax: float | None = 14000.0,
    htk: bool = False,
    norm: str | float | None = MEL_NORM,
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
    mel = MelParams(sr=sr, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm)
    frame = StftParams(n_fft, hop_length, win_length, window, center, pad_mode)
    prep = prepare_stereo(y, allow_copy=allow_copy)
    return run(
        _native.ipd,
        prep,
        lambda t: (2, mel.n_mels, t),
        output,
        framing=frame,
        mel=mel,
        n_threads=resolve_threads(n_threads),
    )
