"""Feature recipes the seed papers depend on, each one call on a batch.

* ``bat``: the BAT / OWL SAGE binaural input.
* ``efficientat``: the EfficientAT ``mn`` models' eval-mode front end.
* ``librosa``: librosa's default log-mel (``melspectrogram`` +
  ``power_to_db(ref=1.0, top_db=80)``), per clip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import _native
from ._internal import args as _args
from ._internal.args import opt_real, real
from ._internal.batch import Output, prepare_mono, prepare_stereo, run
from ._internal.config import resolve_threads
from .exceptions import ParameterError, ShapeError
from .features import logmel

__all__ = [
    "CHANNEL_POLICIES",
    "PRESETS",
    "bat",
    "binaural_input",
    "efficientat",
    "librosa_logmel",
    "preset",
]

#: How a binaural recipe (``bat``) treats a clip that is not two-channel:
#: ``"refuse"`` (default: a :class:`ShapeError` naming the channel count)
#: or ``"mono-to-binaural"`` (a mono clip becomes two identical ears; other
#: counts are still refused). One rule for every entry point: ``curate
#: --features bat``, ``agl-fast features --preset bat`` and the API.
CHANNEL_POLICIES = ("refuse", "mono-to-binaural")


def binaural_input(y: np.ndarray, policy: str = "refuse", name: str = "clip") -> np.ndarray:
    """A clip as the ``[2, n]`` input of a binaural recipe, by ``policy``.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (channels, n)]
        Audio.
    policy : {"refuse", "mono-to-binaural"}
        See :data:`CHANNEL_POLICIES`.
    name : str
        What to call the clip in an error message.

    Returns
    -------
    np.ndarray [shape=(2, n)]
        ``y`` itself when it has two channels; a mono clip duplicated under
        ``"mono-to-binaural"``.

    Raises
    ------
    ShapeError
        A clip that is not two-channel and that the policy does not convert.
    ParameterError
        An unknown policy.
    """
    if not isinstance(policy, str) or policy not in CHANNEL_POLICIES:
        raise ParameterError(
            f"channels policy must be one of {CHANNEL_POLICIES}, got policy={policy!r}"
        )
    name = _args.text("name", name)
    y = _args.array("y", y)
    if y.ndim == 0:
        raise ShapeError(f"y must be audio [n] or [channels, n], got a scalar {name}")
    channels = 1 if y.ndim == 1 else int(y.shape[0])
    if y.ndim == 2 and channels == 2:
        return y
    if y.ndim <= 2 and channels == 1 and policy == "mono-to-binaural":
        mono = y.reshape(-1)
        return np.ascontiguousarray(np.stack([mono, mono]))
    hint = " (--mono-to-binaural duplicates a mono clip)" if channels == 1 else ""
    raise ShapeError(
        f"the bat recipe needs two-channel (binaural) audio; {name} has {channels} channel(s){hint}"
    )


def bat(
    y: Any,
    *,
    sr: float = 32000,
    n_fft: int = 1024,
    hop_length: int = 320,
    n_mels: int = 128,
    fmin: float = 50.0,
    fmax: float = 14000.0,
    amin: float = 1e-10,
    loudness_dbfs: float | None = None,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """BAT / OWL SAGE binaural features.

    Periodic Hann STFT (``n_fft`` 1024, hop 320 at 32 kHz, centred, reflect
    padding) of both channels; Slaney mel (128 bands, 50-14000 Hz);
    ``10 log10(max(mel @ |X|, 1e-10))`` of the **magnitude** per ear; and
    ``mel @ cos(IPD)``, ``mel @ sin(IPD)`` with ``IPD = phase(R) - phase(L)``.

    Parameters
    ----------
    y : np.ndarray [shape=(2, n) or (batch, 2, n)], list of ``[2, n_i]`` or Arrow
        Stereo audio at ``sr`` Hz (channel 0 = left).
    sr : float
        Sample rate in Hz (sets the mel bands; no resampling is done).
    loudness_dbfs : float or None
        If set (BAT uses -14), scale each clip, both channels by one gain, to
        this RMS level in dBFS first. Silent clips are left as they are.

    Returns
    -------
    np.ndarray [shape=(batch, 4, t, n_mels), dtype=float32]
        Channels: log-mel L (dB), log-mel R (dB), IPD cos, IPD sin.
        ``t = 1 + n // hop_length``.
    """
    prep = prepare_stereo(y, allow_copy=allow_copy)
    return run(
        _native.bat,
        prep,
        lambda t: (4, t, n_mels),
        output,
        sr=real("sr", sr),
        n_fft=n_fft,
        hop_length=hop_length,
        n_mels=n_mels,
        fmin=real("fmin", fmin),
        fmax=real("fmax", fmax),
        amin=real("amin", amin),
        loudness_dbfs=opt_real("loudness_dbfs", loudness_dbfs),
        n_threads=resolve_threads(n_threads),
    )


def efficientat(
    y: Any,
    *,
    sr: float = 32000,
    n_fft: int = 1024,
    win_length: int = 800,
    hop_length: int = 320,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float = 15000.0,
    preemphasis: float = 0.97,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """EfficientAT (``mn`` models, eval mode) log-mel input.

    Pre-emphasis ``y'[n] = y[n+1] - 0.97 y[n]``; STFT with a symmetric
    Hann(800) centred in ``n_fft`` 1024, hop 320, centred with reflect
    padding; power spectrum; Kaldi mel banks (128, 0-15000 Hz); then
    ``(ln(mel + 1e-5) + 4.5) / 5``.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (batch, n)], list of 1-D arrays, or Arrow
        Mono audio at ``sr`` Hz (32 kHz for the released models).

    Returns
    -------
    np.ndarray [shape=(batch, n_mels, t), dtype=float32]
        ``t = 1 + (n - 1) // hop_length``. Add the channel axis
        (``x[:, None]``) for the model's ``[batch, 1, 128, t]`` input.
    """
    prep = prepare_mono(y, allow_copy=allow_copy)
    return run(
        _native.efficientat,
        prep,
        lambda t: (n_mels, t),
        output,
        sr=real("sr", sr),
        n_fft=n_fft,
        win_length=win_length,
        hop_length=hop_length,
        n_mels=n_mels,
        fmin=real("fmin", fmin),
        fmax=real("fmax", fmax),
        preemphasis=real("preemphasis", preemphasis),
        n_threads=resolve_threads(n_threads),
    )


def librosa_logmel(
    y: Any,
    *,
    sr: float = 22050,
    n_threads: int | None = None,
    output: Output = "auto",
    **kwargs: Any,
) -> Any:
    """librosa's default log-mel: :func:`agl_fast.logmel` with librosa's
    defaults (``n_fft`` 2048, hop 512, 128 Slaney bands, power 2,
    ``ref=1.0``, ``top_db=80``), per clip.

    Returns
    -------
    np.ndarray [shape=(batch, 128, t), dtype=float32]
    """
    return logmel(y, sr=sr, n_threads=n_threads, output=output, **kwargs)


PRESETS: dict[str, Callable[..., Any]] = {
    "bat": bat,
    "efficientat": efficientat,
    "librosa": librosa_logmel,
}


def preset(name: str, y: Any, **kwargs: Any) -> Any:
    """Run the preset called ``name`` (``'bat'``, ``'efficientat'``,
    ``'librosa'``) on ``y``; keyword arguments go to that preset."""
    fn = PRESETS.get(name) if isinstance(name, str) else None
    if fn is None:
        raise ParameterError(f"unknown preset name={name!r}; choose one of {sorted(PRESETS)}")
    return fn(y, **kwargs)
