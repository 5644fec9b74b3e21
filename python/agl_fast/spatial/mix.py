"""Binaural mixtures: dry mono sources rendered through their BRIRs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..exceptions import ParameterError
from ..room import fftconvolve
from .defaults import CLIP_SECONDS, LOUDNESS_DBFS, SR

__all__ = ["normalize", "render_indices", "spatialize"]


def normalize(y: np.ndarray, dbfs: float) -> np.ndarray:
    """``y`` scaled to an RMS level of ``dbfs`` (silence is returned as it is).

    Parameters
    ----------
    y : np.ndarray
        A signal.
    dbfs : float
        The RMS level wanted, in dB relative to full scale.

    Returns
    -------
    np.ndarray
        The scaled signal.
    """
    rms = float(np.sqrt(np.mean(np.asarray(y, dtype=np.float64) ** 2)))
    return y if rms == 0 else y * (10 ** (dbfs / 20) / rms)


def spatialize(
    sources: list[np.ndarray],
    brirs: list[np.ndarray],
    *,
    sr: int = SR,
    seconds: float = CLIP_SECONDS,
    loudness_dbfs: float = LOUDNESS_DBFS,
) -> np.ndarray:
    """Binaural mixture ``[2, seconds * sr]`` (float32) of mono sources.

    As OWL's loader does (``SpatialAudioDatasetJsonl.load_waveform``), each
    source is scaled to ``loudness_dbfs`` RMS, rendered through its BRIR and
    cut or zero-padded to ``seconds`` (here: zero-padded or cut first, then
    ``fftconvolve(mode='truncate')``, the same first ``seconds`` of the full
    convolution); the renders are averaged, not summed (two sources: half
    their sum; one source: as it is).
    """
    if len(sources) != len(brirs) or not sources:
        raise ParameterError(
            f"one BRIR per source required, got {len(sources)} sources and {len(brirs)} BRIRs"
        )
    n = round(seconds * sr)
    out = np.zeros((2, n), dtype=np.float32)
    for s, h in zip(sources, brirs, strict=True):
        s = np.asarray(s, dtype=np.float32)
        if s.ndim != 1:
            raise ParameterError(f"sources must be mono 1-D arrays, got shape {s.shape}")
        x = np.zeros(n, dtype=np.float32)
        x[: min(n, len(s))] = normalize(s, loudness_dbfs)[:n]
        out += fftconvolve(x, np.asarray(h, dtype=np.float32), mode="truncate")
    return out / np.float32(len(sources))


def render_indices(
    row: dict,
    rir: Callable[[int], np.ndarray],
    source: Callable[[int], np.ndarray],
    *,
    sr: int = SR,
    seconds: float = CLIP_SECONDS,
) -> np.ndarray:
    """The mixture ``[2, seconds * sr]`` of an index-built QA row
    (:func:`agl_fast.spatial.qa.qa_from_indices`): ``source(i)`` (mono) of each
    of its ``sources`` through ``rir(j)`` (``[2, L]``) of its ``rirs``, mixed
    by :func:`spatialize`."""
    rirs, sources = list(row.get("rirs", [])), list(row.get("sources", []))
    if not rirs or len(rirs) != len(sources):
        raise ParameterError(f"row needs as many 'rirs' as 'sources', got {rirs} and {sources}")
    return spatialize([source(int(i)) for i in sources], [rir(int(j)) for j in rirs], sr=sr,
                      seconds=seconds)  # fmt: skip
