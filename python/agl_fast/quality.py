"""Acoustic quality metrics and the AGL1K quality filter.

Clip-level metrics (AGL1K, appendix A.2), computed in one parallel pass:

``rms``
    ``sqrt(mean(x**2))`` over the clip (full scale = 1.0).
``flatness``
    Geometric over arithmetic mean of the Welch power spectral density:
    periodic Hann segments of ``welch_nperseg`` samples (the clip length if
    shorter), 50% overlap, per-segment mean removed, one-sided density
    scaling, PSD values floored at ``amin`` (in units²/Hz); i.e.
    ``scipy.signal.welch(x, sr, nperseg=welch_nperseg)`` then the ratio.
    1 for white noise, near 0 for a pure tone.
``clipping_ratio``
    The paper's ``#{n : |x[n]| = max|x|} / N`` (0 for a clip whose peak is 0).
``full_scale_ratio``
    ``#{n : |x[n]| >= full_scale_threshold} / N`` (samples at full scale).
``complexity``
    The paper's ``AC = sum_f sum_t |E[f,t+1] - E[f,t]| / sum_t E[f,t]`` with
    ``E`` the power spectrogram (periodic Hann, ``n_fft``, ``hop_length``, no
    centring), one band per frequency bin; a band with no energy adds 0.
``aci``
    The acoustic complexity index of Pieretti et al. as scikit-maad computes
    it (:func:`acoustic_complexity_index`) on the amplitude spectrogram of
    the same STFT.

The frame-wise forms :func:`rms` and :func:`spectral_flatness` follow
``librosa.feature.rms`` and ``librosa.feature.spectral_flatness``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _native
from ._internal.args import array, real
from ._internal.batch import Output, prepare_mono, run
from ._internal.config import resolve_threads
from .dsp.params import CENTER, N_FFT, PAD_MODE, WINDOW, StftParams
from .exceptions import ParameterError, ShapeError
from .quality_filters import (
    DEFAULT_THRESHOLDS,
    check_thresholds,
    computed_metrics,
    failures,
    filters,
)

__all__ = [
    "DEFAULT_THRESHOLDS",
    "METRICS",
    "METRIC_OPTIONS",
    "acoustic_complexity_index",
    "levels",
    "quality_filter",
    "quality_metrics",
    "rms",
    "spectral_flatness",
]

METRICS = ("rms", "flatness", "clipping_ratio", "full_scale_ratio", "complexity", "aci")


def levels(
    y: Any,
    *,
    threshold: float = _native.CLIP_LEVEL,
    n_threads: int | None = None,
    allow_copy: bool = True,
) -> dict[str, np.ndarray]:
    """Peak, RMS and clipped share of each clip, in one pass per clip.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (batch, n)], list of 1-D arrays, or Arrow list<float32>
        Clips; a multichannel clip is given flattened (all its samples count
        alike). Empty clips give zeros.
    threshold : float > 0
        Level counted as clipped (``|x| >= threshold``), in full-scale units.
    n_threads : int or None
        Worker threads.
    allow_copy : bool
        Allow copying a non-float32 or non-contiguous input.

    Returns
    -------
    dict of str to np.ndarray [shape=(batch,), dtype=float64]
        ``peak`` (max ``|x|``), ``rms`` (square sums in float64) and
        ``clipped_fraction`` (share of samples at or above ``threshold``).

    Raises
    ------
    NonFiniteError
        A clip holds NaN or infinite samples.
    """
    prep = prepare_mono(y, allow_copy=allow_copy)
    m = _native.levels(
        prep.native, real("threshold", threshold), n_threads=resolve_threads(n_threads)
    )
    return {name: m[:, k].copy() for k, name in enumerate(("peak", "rms", "clipped_fraction"))}


def quality_metrics(
    y: Any,
    sr: float,
    *,
    welch_nperseg: int = 1024,
    amin: float = 1e-10,
    full_scale_threshold: float = _native.CLIP_LEVEL,
    n_fft: int = _native.QUALITY_N_FFT,
    hop_length: int = 256,
    n_threads: int | None = None,
    allow_copy: bool = True,
    clip_stats: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Clip-level quality metrics of a batch (see the module docs).

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (batch, n)], list of 1-D arrays, or Arrow list<float32>
        Mono clips; empty clips are allowed.
    sr : float > 0
        Sample rate in Hz (scales the PSD).
    welch_nperseg : int >= 2
        Welch segment length in samples.
    amin : float > 0
        Floor of the PSD before the flatness means.
    full_scale_threshold : float > 0
        Level counted by ``full_scale_ratio``.
    n_fft, hop_length : int
        STFT of the complexity metrics.
    n_threads : int or None
        Worker threads.
    allow_copy : bool
        Allow copying a non-float32 or non-contiguous input.
    clip_stats : np.ndarray [shape=(batch, 3), dtype=float64] or None
        ``rms``, ``clipping_ratio`` and ``full_scale_ratio`` of each clip
        measured already (at ``full_scale_threshold``), e.g. the decoder's
        levels of a mono file (:func:`agl_fast.load_arrays`: ``rms``,
        ``peak_fraction``, ``clipped_fraction`` at 0.999). They are returned
        as given and the clips are read only for their spectra, so the
        caller vouches that the clips are finite.

    Returns
    -------
    dict of str to np.ndarray [shape=(batch,), dtype=float64]
        One entry per name in :data:`METRICS`.

    Raises
    ------
    ShapeError
        ``clip_stats`` is not ``(batch, 3)``.
    """
    prep = prepare_mono(y, allow_copy=allow_copy)
    if clip_stats is not None:
        clip_stats = np.ascontiguousarray(array("clip_stats", clip_stats), dtype=np.float64)
        if clip_stats.shape != (prep.n_items, 3):
            raise ShapeError(
                f"clip_stats must have shape ({prep.n_items}, 3), got {clip_stats.shape}"
            )
    params = {
        "sr": real("sr", sr),
        "welch_nperseg": welch_nperseg,
        "amin": real("amin", amin),
        "full_scale_threshold": real("full_scale_threshold", full_scale_threshold),
        "n_fft": n_fft,
        "hop_length": hop_length,
    }
    m = _native.quality_metrics(
        prep.native,
        params,
        n_threads=resolve_threads(n_threads),
        clip_stats=clip_stats,
    )
    return {name: m[:, k].copy() for k, name in enumerate(METRICS)}


def _lengths(prep: Any) -> np.ndarray:
    if prep.kind == "array":
        return np.full(prep.n_items, prep.native.shape[1], dtype=np.int64)
    if prep.kind == "list":
        return np.array([len(v) for v in prep.native], dtype=np.int64)
    return np.asarray(prep.native.value_lengths().to_numpy(zero_copy_only=False), np.int64)


#: Keyword arguments of :func:`quality_filter` that go to :func:`quality_metrics`.
METRIC_OPTIONS = (
    "welch_nperseg",
    "amin",
    "full_scale_threshold",
    "n_fft",
    "hop_length",
    "clip_stats",
)


def quality_filter(
    y: Any,
    sr: float,
    *,
    ids: Any = None,
    n_threads: int | None = None,
    **options: Any,
) -> Any:
    """Apply the registered quality filters (the four AGL1K filters and any
    plugin's) to a batch of clips.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (batch, n)], list of 1-D arrays, or Arrow list<float32>
        Mono clips.
    sr : float > 0
        Sample rate in Hz.
    ids : sequence or None
        Clip identifiers, stored in an ``id`` column.
    n_threads : int or None
        Worker threads.
    **options
        Thresholds by filter name (:data:`DEFAULT_THRESHOLDS`: ``rms_floor``,
        ``flatness_ceiling``, ``clipping_ceiling``, ``full_scale_ceiling``,
        ``complexity_floor`` and those of plugins; see
        :mod:`agl_fast.quality_filters`), and the :data:`METRIC_OPTIONS` of
        :func:`quality_metrics`. A clip passes when ``rms >= rms_floor``,
        ``flatness <= flatness_ceiling``, ``clipping_ratio <=
        clipping_ceiling``, ``full_scale_ratio <= full_scale_ceiling`` and
        ``complexity >= complexity_floor``.

    Returns
    -------
    pyarrow.Table
        One row per clip: ``id`` (if given), ``n_samples``, every metric,
        ``passed`` (bool) and ``reasons`` (list<string>): any of ``empty``,
        ``too_short`` (fewer than ``n_fft`` samples: no complexity),
        ``low_rms``, ``noise_like``, ``clipped``, ``full_scale``,
        ``low_complexity`` (and plugin filters' reasons). Silent, constant,
        empty and one-sample clips give a failing row with its reasons,
        never an error.
    """
    import pyarrow as pa

    names = set(DEFAULT_THRESHOLDS)
    unknown = set(options) - names - set(METRIC_OPTIONS)
    if unknown:
        allowed = sorted(names | set(METRIC_OPTIONS))
        raise ParameterError(f"unknown argument(s) {sorted(unknown)}; allowed: {allowed}")
    limits = check_thresholds({k: v for k, v in options.items() if k in names})
    metric_kwargs = {k: v for k, v in options.items() if k in METRIC_OPTIONS}
    prep = prepare_mono(y)
    if prep.n_items == 0:
        raise ShapeError("the batch is empty (0 items)")
    m = dict(quality_metrics(prep.native, sr, n_threads=n_threads, **metric_kwargs))
    extra = computed_metrics(_clip_list(prep), float(sr)) if _needs_clips() else {}
    m.update(extra)
    n = _lengths(prep)
    reasons = _reasons(
        n, int(metric_kwargs.get("n_fft", _native.QUALITY_N_FFT)), failures(m, limits)
    )
    cols: dict[str, Any] = {}
    if ids is not None:
        cols["id"] = pa.array(_ids(ids, prep.n_items))
    cols["n_samples"] = pa.array(n)
    for name in (*METRICS, *extra):
        cols[name] = pa.array(m[name])
    cols["passed"] = pa.array([not r for r in reasons], pa.bool_())
    cols["reasons"] = pa.array(reasons, pa.list_(pa.string()))
    return pa.table(cols)


def _clip_list(prep: Any) -> list[np.ndarray]:
    """The batch as a list of 1-D float32 clips (for plugin metrics)."""
    if prep.kind in ("array", "list"):
        return list(prep.native)
    return [
        np.asarray(prep.native[i].values.to_numpy(zero_copy_only=False), dtype=np.float32)
        for i in range(prep.n_items)
    ]


def _needs_clips() -> bool:
    return any(f.compute is not None for f in filters())


def _reasons(n: np.ndarray, n_fft: int, checks: list[tuple[str, np.ndarray]]) -> list[list[str]]:
    """Each clip's failure reasons: its length first, then the filters'."""
    reasons: list[list[str]] = []
    for i in range(len(n)):
        r = []
        if n[i] == 0:
            r.append("empty")
        elif n[i] < n_fft:
            r.append("too_short")
        r.extend(name for name, bad in checks if bad[i])
        reasons.append(r)
    return reasons


def _ids(ids: Any, n_items: int) -> list[Any]:
    if isinstance(ids, str | bytes) or not hasattr(ids, "__iter__"):
        raise ParameterError(
            f"ids must be a sequence with one id per clip, got ids={type(ids).__name__}"
        )
    ids = list(ids)
    if len(ids) != n_items:
        raise ShapeError(f"ids has {len(ids)} entries for {n_items} clips")
    return ids


def rms(
    y: Any,
    *,
    frame_length: int = N_FFT,
    hop_length: int = 512,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Frame-wise root mean square, as ``librosa.feature.rms(y=...)``.

    Parameters
    ----------
    y : np.ndarray [shape=(..., n)], list of arrays, or Arrow list<float32>
        Audio.
    frame_length, hop_length : int > 0
        Frame length and hop in samples.
    center : bool
        Pad ``frame_length // 2`` samples on both sides.
    pad_mode : {'constant', 'reflect'}
        Padding when ``center``.
    n_threads, output, allow_copy
        As in :func:`agl_fast.stft`.

    Returns
    -------
    np.ndarray [shape=(..., 1, t), dtype=float32]
    """
    from .dsp.stft import pad_outside

    if frame_length is None:
        raise ParameterError("frame_length must be a positive integer, got None")
    y, center, pad_mode = pad_outside(y, frame_length, center, pad_mode)
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    return run(
        _native.rms,
        prep,
        lambda t: (1, t),
        output,
        frame_length=frame_length,
        hop_length=hop_length,
        center=center,
        pad_mode=pad_mode,
        n_threads=resolve_threads(n_threads),
    )


def spectral_flatness(
    y: Any,
    *,
    n_fft: int = N_FFT,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = WINDOW,
    center: bool = CENTER,
    pad_mode: str = PAD_MODE,
    amin: float = 1e-10,
    power: float = 2.0,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """Frame-wise spectral flatness, as ``librosa.feature.spectral_flatness``.

    ``S = max(|STFT|**power, amin)`` and the flatness of a frame is
    ``exp(mean(log S)) / mean(S)`` over its frequency bins.

    Parameters
    ----------
    y : np.ndarray [shape=(..., n)], list of arrays, or Arrow list<float32>
        Audio.
    n_fft, hop_length, win_length, window, center, pad_mode
        As in :func:`agl_fast.stft`.
    amin : float > 0
        Floor of the spectrum.
    power : float > 0
        Exponent of the magnitude (2: power).
    n_threads, output, allow_copy
        As in :func:`agl_fast.stft`.

    Returns
    -------
    np.ndarray [shape=(..., 1, t), dtype=float32]
    """
    from .dsp.stft import pad_signal

    frame: _native.Framing = StftParams(n_fft, hop_length, win_length, window, center, pad_mode)
    y, frame = pad_signal(y, frame)
    prep = prepare_mono(y, allow_copy=allow_copy, allow_nd=True)
    return run(
        _native.spectral_flatness,
        prep,
        lambda t: (1, t),
        output,
        framing=frame,
        amin=real("amin", amin),
        power=real("power", power),
        n_threads=resolve_threads(n_threads),
    )


def acoustic_complexity_index(S: Any) -> tuple[np.ndarray, float]:
    """Acoustic complexity index of a spectrogram, as scikit-maad's.

    Parameters
    ----------
    S : np.ndarray [shape=(n_bands, t)]
        Non-negative spectrogram (scikit-maad uses the amplitude spectrogram;
        the paper's AC uses band energies).

    Returns
    -------
    per_band : np.ndarray [shape=(n_bands,), dtype=float64]
        ``sum_t |S[f, t+1] - S[f, t]| / sum_t S[f, t]`` (0 for a band with no
        energy, where scikit-maad gives NaN).
    total : float
        ``per_band.sum()``.
    """
    a = np.ascontiguousarray(array("S", S, np.float64))
    if a.ndim != 2:
        raise ShapeError(f"S must be 2-D [n_bands, t], got shape {a.shape}")
    per, total = _native.acoustic_complexity(a)
    return per, float(total)
