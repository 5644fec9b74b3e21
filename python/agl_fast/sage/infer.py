"""SAGE inference with ONNX Runtime, fed by the Rust ``bat`` features.

:func:`export_onnx` writes the encoder and heads (``agl_fast.sage.model``) to
ONNX with a dynamic batch axis; :class:`SageSession` runs it in a session of
the package's one factory (:func:`agl_fast._internal.onnx.make_session`): by default
on CUDA when it really starts, else on the CPU with a logged warning
(``device="cuda"`` insists on CUDA unless ``allow_cpu=True``; ``providers=``
passes TensorRT/CUDA/CPU providers through). The provider in use is recorded
in every result.

Inputs are binaural clips ``[2, n]`` at 32 kHz (channel 0 = left), at least
one STFT frame (1024 samples) long and finite. Each clip is zero-padded or
cut to the model's input length (10 s, as BAT, for models exported with the
default 1001 frames) before the features are computed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._internal.onnx import Device, make_session
from ..exceptions import AglIOError, NonFiniteError, ParameterError, ShapeError
from ..presets import bat
from ..spatial.defaults import CLIP_SECONDS, HOP, N_FFT, SR

__all__ = [
    "OUTPUT_NAMES",
    "SR",
    "SageResult",
    "SageSession",
    "check_binaural",
    "export_onnx",
]

OUTPUT_NAMES = ("events", "distance", "azimuth", "elevation", "embedding")


def export_onnx(model: Any, path: str, *, frames: int = 1001, opset: int = 17) -> None:
    """Export a :class:`agl_fast.sage.model.SageEncoder` to ONNX.

    The batch axis is dynamic; ``frames`` fixes the time axis of the
    ``features`` input (1001 frames = 10 s at hop 320).
    """
    import torch

    model = model.eval()
    cfg = model.config
    dummy = torch.zeros(2, 4, frames, cfg.n_mels)
    axes = {"features": {0: "batch"}, **{n: {0: "batch"} for n in OUTPUT_NAMES}}
    with warnings.catch_warnings():
        # The TorchScript exporter needs no onnxscript; torch flags it and some of
        # its internals as deprecated.
        warnings.simplefilter("ignore", DeprecationWarning)
        # The frame count is fixed at export (the time-resize matrix is a constant).
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(
            model,
            (dummy,),
            path,
            input_names=["features"],
            output_names=list(OUTPUT_NAMES),
            dynamic_axes=axes,
            opset_version=opset,
            dynamo=False,
        )


def check_binaural(y: Any, sr: int, *, what: str = "clip") -> np.ndarray:
    """Validate one binaural clip and return it as float32 ``[2, n]``."""
    if sr != SR:
        raise ParameterError(
            f"{what}: sr must be {SR} Hz (the rate SAGE was trained at), got sr={sr}; "
            "resample first (agl_fast.audio.load(path, sr=32000))"
        )
    a = np.asarray(y, dtype=np.float32)
    if a.ndim == 1 or (a.ndim == 2 and a.shape[0] == 1):
        raise ShapeError(
            f"{what}: binaural (2-channel) audio required, got a mono signal of shape {a.shape}"
        )
    if a.ndim != 2 or a.shape[0] != 2:
        raise ShapeError(f"{what}: expected shape [2, n] (left, right), got {a.shape}")
    if a.shape[1] < N_FFT:
        raise ShapeError(
            f"{what}: too short, got {a.shape[1]} samples; at least {N_FFT} "
            f"({1000 * N_FFT / SR:.0f} ms) required"
        )
    if not np.all(np.isfinite(a)):
        raise NonFiniteError(f"{what}: contains NaN or infinite samples")
    return a


@dataclass
class SageResult:
    """Predictions for one clip."""

    azimuth: int  # degrees, BAT convention (0 = right, 90 = front)
    elevation: int  # degrees above the horizontal (-90..89)
    distance_m: float  # 0.5 m classes
    event_probs: np.ndarray
    embedding: np.ndarray  # [3, embed_dim]
    provider: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, top_k: int = 5) -> dict[str, Any]:
        top = np.argsort(-self.event_probs)[:top_k]
        return {
            "azimuth": self.azimuth,
            "elevation": self.elevation,
            "distance_m": self.distance_m,
            "events": {int(i): float(self.event_probs[i]) for i in top},
            "provider": self.provider,
            **self.extra,
        }


class SageSession:
    """An ONNX Runtime session of the SAGE encoder.

    Parameters
    ----------
    model : str
        Path of the ONNX file (:func:`export_onnx`).
    device : {"auto", "cuda", "cpu"}
        Where to run (see :func:`agl_fast._internal.onnx.make_session`).
    allow_cpu : bool
        With ``device="cuda"``: run on the CPU when CUDA does not start.
    providers : sequence or None
        Execution providers passed through to ONNX Runtime (``device`` then
        stays ``"auto"``).
    device_id : int
        GPU index.
    n_threads : int or None
        Intra-op threads of ONNX Runtime (and of the feature kernels).
    """

    def __init__(
        self,
        model: str,
        *,
        device: Device = "auto",
        allow_cpu: bool = False,
        providers: Sequence[Any] | None = None,
        device_id: int = 0,
        n_threads: int | None = None,
    ):
        if not Path(model).is_file():
            raise AglIOError(f"model file not found: {model}")
        self.session, self.provider = make_session(
            model,
            device=device,
            allow_cpu_fallback=allow_cpu,
            providers=providers,
            device_id=device_id,
            n_threads=n_threads,
        )
        self.n_threads = n_threads
        shape = self.session.get_inputs()[0].shape
        self.frames = int(shape[2]) if isinstance(shape[2], int) else None

    def features(self, clips: Sequence[Any], sr: int = SR) -> np.ndarray:
        """``bat`` features ``[batch, 4, frames, 128]`` of validated clips, each
        padded or cut to the model's frame count (10 s if the model's time
        axis is dynamic)."""
        n = (self.frames - 1) * HOP if self.frames else round(CLIP_SECONDS * SR)
        batch = np.zeros((len(clips), 2, n), dtype=np.float32)
        for i, y in enumerate(clips):
            a = check_binaural(y, sr, what=f"clip {i}")
            batch[i, :, : min(n, a.shape[1])] = a[:, :n]
        return np.asarray(bat(batch, sr=SR, n_threads=self.n_threads))

    def run_features(self, feats: np.ndarray) -> list[np.ndarray]:
        """Raw model outputs (:data:`OUTPUT_NAMES`) for a feature batch."""
        if self.frames is not None and feats.shape[2] != self.frames:
            raise ShapeError(
                f"the model takes {self.frames} frames, got features with {feats.shape[2]}"
            )
        return list(self.session.run(list(OUTPUT_NAMES), {"features": feats.astype(np.float32)}))

    def predict(
        self, clips: Sequence[Any], sr: int = SR, *, batch_size: int = 8
    ) -> list[SageResult]:
        """Direction, distance, event probabilities and embeddings per clip."""
        out: list[SageResult] = []
        for s in range(0, len(clips), batch_size):
            ev, dis, az, el, emb = self.run_features(self.features(clips[s : s + batch_size], sr))
            probs = 1.0 / (1.0 + np.exp(-ev.astype(np.float64)))
            for i in range(ev.shape[0]):
                out.append(
                    SageResult(
                        azimuth=int(np.argmax(az[i])),
                        elevation=int(np.argmax(el[i])) - 90,
                        distance_m=0.5 * int(np.argmax(dis[i])),
                        event_probs=probs[i],
                        embedding=emb[i],
                        provider=self.provider,
                    )
                )
        return out
