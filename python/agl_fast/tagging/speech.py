"""A real speech tagger out of the box: the Silero VAD network (MIT licence).

The ONNX file ships inside the ``silero-vad`` package; it is read from the
installed package's data folder without importing the package (whose Python
side needs torch). The network is recurrent: 16 kHz audio in frames of 512
samples (32 ms), each frame preceded by the last 64 samples of the previous
one, with a ``[2, batch, 128]`` state carried from frame to frame. Clips at
32 kHz are low-pass filtered (windowed-sinc, cut-off 7.6 kHz) and decimated
by 2 first.

The tagger has one class, ``Speech``; a clip's ``speech_fraction`` is the
share of its ten segments (``fraction_scheme="segments10"``) or of its time
(``"time"``) in which a 32 ms frame's speech probability is ``>= threshold``
(0.5, Silero's own default). It writes no AudioSet group fractions: the
AGL1K *Human sounds* split comes from EfficientAT over all 527 classes
(laughter, crowds, footsteps, ... count there, not only speech).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ..exceptions import ParameterError
from .onnx_backend import BackendError, Device, make_session
from .ontology import ontology
from .tagger import Tagger, check_clip
from .windows import DEFAULT_FRACTION_SCHEME, Aggregation, ClipFrames, FractionScheme

__all__ = ["SpeechTagger", "silero_model_path"]

_FRAME = 512
_CONTEXT = 64
_RATE = 16000


def silero_model_path() -> Path:
    """Location of ``silero_vad.onnx`` inside the installed ``silero-vad``
    package (found without importing it)."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("the speech tagger needs the silero-vad package: pip install silero-vad")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "silero_vad.onnx"
    if not path.is_file():
        raise BackendError(
            f"silero-vad is installed but has no data/silero_vad.onnx ({path.parent})"
        )
    return path


def _lowpass_taps(factor: int, n_taps: int = 63) -> np.ndarray:
    cutoff = 0.95 / factor  # of the Nyquist rate
    m = np.arange(n_taps) - (n_taps - 1) / 2
    taps = cutoff * np.sinc(cutoff * m) * np.kaiser(n_taps, 8.0)
    return (taps / taps.sum()).astype(np.float32)


def decimate(y: np.ndarray, factor: int) -> np.ndarray:
    """Low-pass filter (63-tap Kaiser windowed sinc) and keep every
    ``factor``-th sample; ``[n]`` to ``[ceil(n / factor)]``."""
    if factor == 1:
        return np.asarray(y, dtype=np.float32)
    taps = _lowpass_taps(factor)
    filtered = np.convolve(y, taps, mode="same")
    return filtered[::factor].astype(np.float32)


class SpeechTagger(Tagger):
    """Speech time fraction from Silero VAD (ONNX Runtime, CPU by default).

    Parameters
    ----------
    sr : int
        Rate of the clips given to :meth:`tag` (a multiple of 16000).
    threshold : float
        Speech probability threshold per 32 ms frame.
    batch_size : int
        Clips streamed through the network together.
    device, allow_cpu_fallback, n_threads
        See :func:`~agl_fast.tagging.onnx_backend.make_session`.
    """

    name = "speech"
    reports_groups = False

    def __init__(
        self,
        *,
        sr: int = 32000,
        threshold: float = 0.5,
        aggregation: Aggregation = "max",
        fraction_scheme: FractionScheme = DEFAULT_FRACTION_SCHEME,
        batch_size: int = 64,
        device: Device = "cpu",
        allow_cpu_fallback: bool = False,
        n_threads: int | None = None,
        model_path: str | Path | None = None,
    ) -> None:
        super().__init__(
            threshold=threshold, aggregation=aggregation, fraction_scheme=fraction_scheme
        )
        if sr < _RATE or sr % _RATE:
            raise ParameterError(f"sr must be a multiple of 16000 Hz, got sr={sr}")
        if batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got batch_size={batch_size}")
        self.sr = int(sr)
        self.factor = self.sr // _RATE
        self.batch_size = int(batch_size)
        path = Path(model_path) if model_path is not None else silero_model_path()
        self.session, self.provider = make_session(
            path, device=device, allow_cpu_fallback=allow_cpu_fallback, n_threads=n_threads or 1
        )
        onto = ontology()
        self.class_names = ("Speech",)
        self.group_keys = onto.group_keys
        speech_groups = onto.groups_of(onto.mids[onto.index("Speech")])
        self.group_matrix = np.array([[k in speech_groups] for k in onto.group_keys], dtype=bool)

    def stream(self, x16: np.ndarray) -> np.ndarray:
        """Speech probability per 512-sample frame of 16 kHz audio.

        Parameters
        ----------
        x16 : np.ndarray [shape=(batch, n), dtype=float32]

        Returns
        -------
        np.ndarray [shape=(batch, ceil(n / 512)), dtype=float32]
        """
        b, n = x16.shape
        n_frames = max(1, -(-n // _FRAME))
        padded = np.zeros((b, _CONTEXT + n_frames * _FRAME), np.float32)
        padded[:, _CONTEXT : _CONTEXT + n] = x16
        state = np.zeros((2, b, 128), np.float32)
        sr = np.array(_RATE, dtype=np.int64)
        out = np.empty((b, n_frames), np.float32)
        for f in range(n_frames):
            chunk = padded[:, f * _FRAME : f * _FRAME + _CONTEXT + _FRAME]
            prob, state = self.session.run(None, {"input": chunk, "state": state, "sr": sr})
            out[:, f] = prob[:, 0]
        return out

    def predict_windows(self, windows: np.ndarray) -> np.ndarray:
        """Each row streamed on its own; ``[n, 1]`` = its highest frame
        probability."""
        w = np.asarray(windows, dtype=np.float32)
        if w.ndim != 2:
            raise ParameterError(f"expected windows of shape [n, samples], got {w.shape}")
        x16 = np.stack([decimate(r, self.factor) for r in w])
        return self.stream(x16).max(axis=1, keepdims=True)

    def clip_frames(self, clips: Sequence[np.ndarray]) -> Iterator[ClipFrames]:
        clips = [check_clip(c) for c in clips]
        order = sorted(range(len(clips)), key=lambda k: clips[k].shape[0])
        done: dict[int, ClipFrames] = {}
        win = _FRAME * self.factor
        for i0 in range(0, len(order), self.batch_size):
            group = order[i0 : i0 + self.batch_size]
            lows = [decimate(clips[k], self.factor) for k in group]
            x16 = np.zeros((len(group), max(v.shape[0] for v in lows)), np.float32)
            for r, v in enumerate(lows):
                x16[r, : v.shape[0]] = v
            probs = self.stream(x16)
            for r, k in enumerate(group):
                nf = max(1, -(-lows[r].shape[0] // _FRAME))
                starts = np.arange(nf, dtype=np.int64) * win
                done[k] = ClipFrames(starts, win, clips[k].shape[0], self.sr, probs[r, :nf, None])
        for k in range(len(clips)):
            yield done.pop(k)
