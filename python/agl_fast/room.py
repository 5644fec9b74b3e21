"""Room acoustics from impulse responses, and FFT convolution.

Impulse responses (IRs) are ``[L]`` (one channel), ``[channels, L]`` (a
binaural RIR is ``[2, L]``), ``[batch, channels, L]``, or a list of
``[L_i]`` / ``[channels_i, L_i]`` arrays. Every channel is analysed on its
own, and results keep the leading ``batch``/``channels`` axes.

Noise handling (``method``):

``'none'``
    Plain Schroeder backward integration ``EDC[n] = sum_{k>=n} h[k]**2``
    (what ``pyrato.schroeder_integration`` computes).
``'lundeby'``
    Lundeby's iterative truncation: 30 ms block averages, noise from the last
    10% of the IR (then from 10 dB of decay past the crossing point), up to
    five regressions of the late decay (from 25 to 5 dB above the noise), and
    the crossing point with the noise level. The EDC is integrated to the
    crossing point, the energy of the fitted exponential beyond it is added
    (tail correction), and later samples are NaN.
``'lundeby_chu'``
    Both (ISO 3382-1's recommendation): the noise energy found by Lundeby's
    iteration is subtracted from every sample, then the curve is truncated
    at the crossing point with the tail correction. The most accurate on
    noisy IRs, and the default.
``'chu'``
    Chu's noise subtraction: the mean energy of the last 10% of the IR is
    subtracted from every sample before integration; samples where the EDC
    is not positive or is less than 10 dB above the noise-to-peak ratio are
    NaN.

Parameters (:func:`room_parameters`), measured from the onset (ISO 3382-1:
first sample within 20 dB of the peak energy): EDT, T20, T30, T60 by least
squares on the dB EDC between the first samples at or below 0/-10, -5/-25,
-5/-35 and -5/-65 dB, in seconds; DRR (dB) with the direct part the
samples within ``direct_ms`` of the peak; C50, C80 (dB); D50 (fraction);
centre time ``ts`` (s). Every value comes with a status: ``'ok'``,
``'insufficient_dynamic_range'``, ``'no_onset'`` or ``'too_short'``
(the value is NaN unless ``'ok'``); short or noisy IRs never raise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _native
from ._internal.args import flag, real
from ._internal.batch import prepare_mono, to_float32
from ._internal.config import resolve_threads
from .exceptions import ParameterError, ShapeError

__all__ = [
    "PARAMETERS",
    "STATUSES",
    "edc_distance",
    "fftconvolve",
    "room_parameters",
    "schroeder_edc",
]

PARAMETERS = ("edt", "t20", "t30", "t60", "drr", "c50", "c80", "d50", "ts")
STATUSES = ("ok", "insufficient_dynamic_range", "no_onset", "too_short")
_METHODS = ("none", "lundeby", "chu", "lundeby_chu")


class _Curves:
    """IR channels flattened to one batch of curves, and how to regroup."""

    def __init__(self, ir: Any, what: str = "ir") -> None:
        if isinstance(ir, (list, tuple)) and ir and not np.isscalar(ir[0]):
            items = [to_float32(v, what=f"{what} item {i}") for i, v in enumerate(ir)]
            curves: list[np.ndarray] = []
            self.counts: list[int] = []
            for i, v in enumerate(items):
                if v.ndim == 1:
                    v = v.reshape(1, -1)
                if v.ndim != 2:
                    raise ShapeError(
                        f"{what} item {i} must be [L] or [channels, L], got shape {v.shape}"
                    )
                curves.extend(v)
                self.counts.append(v.shape[0])
            self.native: Any = [np.ascontiguousarray(c) for c in curves]
            self.lead: tuple[int, ...] | None = None
            self.n_samples = [len(c) for c in curves]
            return
        a = to_float32(ir, what=what)
        if a.size == 0:
            raise ShapeError(f"{what} is empty (shape {a.shape})")
        if a.ndim not in (1, 2, 3):
            raise ShapeError(
                f"{what} must be [L], [channels, L] or [batch, channels, L], got shape {a.shape}"
            )
        self.lead = a.shape[:-1]
        self.native = np.ascontiguousarray(a.reshape(-1, a.shape[-1]))
        self.counts = [a.shape[-2] if a.ndim > 1 else 1] * (a.shape[0] if a.ndim == 3 else 1)
        self.n_samples = [a.shape[-1]] * self.native.shape[0]

    @property
    def n(self) -> int:
        return int(sum(self.counts))

    def shape(self, per_curve: np.ndarray) -> Any:
        """Per-curve results ``[n_curves, ...]`` back to the input layout."""
        if self.lead is not None:
            return per_curve.reshape(self.lead + per_curve.shape[1:])
        out, k = [], 0
        for c in self.counts:
            out.append(per_curve[k : k + c])
            k += c
        return out


def _method(method: str) -> str:
    if not isinstance(method, str) or method not in _METHODS:
        raise ParameterError(f"method must be one of {_METHODS}, got method={method!r}")
    return method


def schroeder_edc(
    ir: Any,
    sr: float,
    *,
    method: str = "lundeby_chu",
    normalize: bool = True,
    db: bool = False,
    n_threads: int | None = None,
) -> Any:
    """Schroeder energy decay curves of impulse responses.

    Parameters
    ----------
    ir : np.ndarray [shape=(L,), (channels, L) or (batch, channels, L)] or list
        Impulse responses (see the module docs).
    sr : float > 0
        Sample rate in Hz.
    method : {'lundeby_chu', 'lundeby', 'chu', 'none'}
        Noise handling (module docs).
    normalize : bool
        Divide each curve by its first value (0 dB at the start).
    db : bool
        Return ``10 log10(EDC)`` instead of energies.
    n_threads : int or None
        Worker threads.

    Returns
    -------
    np.ndarray [shape=ir.shape, dtype=float64] or list of arrays
        NaN beyond the usable range (``'lundeby'``, ``'chu'``).
    """
    c = _Curves(ir)
    data, offsets = _native.edc(
        c.native,
        real("sr", sr),
        method=_method(method),
        normalize=flag("normalize", normalize),
        db=flag("db", db),
        n_threads=resolve_threads(n_threads),
    )
    if c.lead is not None:
        return data.reshape((*c.lead, -1))
    per = [data[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
    out, k = [], 0
    for n in c.counts:
        out.append(np.stack(per[k : k + n]))
        k += n
    return out


def room_parameters(
    ir: Any,
    sr: float,
    *,
    method: str = "lundeby_chu",
    direct_ms: float = 2.5,
    n_threads: int | None = None,
) -> dict[str, Any]:
    """Decay times and energy ratios of impulse responses.

    Parameters
    ----------
    ir : np.ndarray [shape=(L,), (channels, L) or (batch, channels, L)] or list
        Impulse responses.
    sr : float > 0
        Sample rate in Hz.
    method : {'lundeby_chu', 'lundeby', 'chu', 'none'}
        Noise handling of the EDC used for the fits and energy sums.
    direct_ms : float >= 0
        Half-width of the direct-sound window around the peak (DRR), in ms.
    n_threads : int or None
        Worker threads.

    Returns
    -------
    dict
        For each name in :data:`PARAMETERS` an array of shape ``ir.shape[:-1]``
        (float64; seconds for edt/t20/t30/t60/ts, dB for drr/c50/c80, a
        fraction for d50), and under ``'status_' + name`` the matching array
        of status strings (:data:`STATUSES`). List input gives lists.
    """
    c = _Curves(ir)
    values, status = _native.room_parameters(
        c.native,
        real("sr", sr),
        method=_method(method),
        direct_ms=real("direct_ms", direct_ms),
        n_threads=resolve_threads(n_threads),
    )
    names = np.array(STATUSES)
    out: dict[str, Any] = {}
    for k, name in enumerate(PARAMETERS):
        out[name] = c.shape(values[:, k])
        out["status_" + name] = c.shape(names[status[:, k]])
    return out


def edc_distance(
    pred: Any,
    reference: Any,
    sr: float,
    *,
    method: str = "none",
    floor_db: float = -60.0,
    return_status: bool = False,
    n_threads: int | None = None,
) -> Any:
    """Mean absolute difference of two normalised dB energy decay curves.

    The EDC loss of OWL: for each pair of curves, the mean over samples of
    ``|EDC_pred_dB - EDC_ref_dB|`` where both are finite and the reference
    is at or above ``floor_db`` (over the first ``min(L_pred, L_ref)``
    samples). :func:`agl_fast.torch.edc_loss` is the differentiable twin.

    Parameters
    ----------
    pred, reference : np.ndarray or list
        Impulse responses of the same layout (see the module docs).
    sr : float > 0
        Sample rate in Hz.
    method : {'none', 'lundeby', 'lundeby_chu', 'chu'}
        Noise handling of both EDCs.
    floor_db : float <= 0
        Lowest reference level taken into account.
    return_status : bool
        Also return the status strings (``'insufficient_dynamic_range'`` and
        NaN when no sample qualifies).
    n_threads : int or None
        Worker threads.

    Returns
    -------
    np.ndarray [shape=pred.shape[:-1], dtype=float64] (dB), and statuses if asked
    """
    p, r = _Curves(pred, "pred"), _Curves(reference, "reference")
    if p.counts != r.counts:
        raise ShapeError(
            f"pred and reference must have the same channels per item, got {p.counts} "
            f"and {r.counts}"
        )
    d, s = _native.edc_distance(
        p.native,
        r.native,
        real("sr", sr),
        method=_method(method),
        floor_db=real("floor_db", floor_db),
        n_threads=resolve_threads(n_threads),
    )
    if flag("return_status", return_status):
        return p.shape(d), p.shape(np.array(STATUSES)[s])
    return p.shape(d)


def fftconvolve(
    sources: Any,
    irs: Any,
    *,
    mode: str = "full",
    n_threads: int | None = None,
) -> Any:
    """Convolve mono sources with (multichannel) impulse responses.

    Overlap-add FFT convolution; the output ranges are those of
    ``scipy.signal.fftconvolve``, plus ``'truncate'``.

    Parameters
    ----------
    sources : np.ndarray [shape=(N,) or (batch, N)] or list of 1-D arrays
        Mono sources.
    irs : np.ndarray [shape=(L,), (channels, L) or (batch, channels, L)] or list
        Impulse responses: one shared by every source (``[L]`` or
        ``[channels, L]``) or one per source.
    mode : {'full', 'same', 'valid', 'truncate'}
        ``'full'``: ``N + L - 1`` samples; ``'same'``: ``N`` samples centred
        on the full result; ``'valid'``: ``|N - L| + 1`` samples where the
        shorter input overlaps fully; ``'truncate'``: the first ``N``
        samples (a source rendered through a RIR, as BAT and OWL do).
    n_threads : int or None
        Worker threads.

    Returns
    -------
    np.ndarray [shape=(channels, M) or (batch, channels, M), dtype=float32] or list
        ``M`` as given by ``mode``; a 1-D IR gives ``channels = 1``.
    """
    if not isinstance(mode, str) or mode not in ("full", "same", "valid", "truncate"):
        raise ParameterError(
            f"mode must be 'full', 'same', 'valid' or 'truncate', got mode={mode!r}"
        )
    prep = prepare_mono(sources, what="sources")
    if prep.n_items == 0:
        raise ShapeError("the batch of sources is empty (0 items)")
    c = _Curves(irs, "irs")
    shared = c.lead is not None and len(c.lead) <= 1
    if shared:
        counts = np.full(prep.n_items, c.n, dtype=np.uint64)
        native_irs = [c.native[k] for k in range(c.n)] * prep.n_items
    else:
        if len(c.counts) != prep.n_items:
            raise ShapeError(
                f"one impulse response per source required, got {prep.n_items} sources and "
                f"{len(c.counts)} impulse responses"
            )
        counts = np.asarray(c.counts, dtype=np.uint64)
        native_irs = c.native
    data, offsets, chans, lengths = _native.fftconvolve(
        prep.native, native_irs, counts, mode=mode, n_threads=resolve_threads(n_threads)
    )
    if prep.kind == "array" and len(set(chans.tolist())) == 1 and len(set(lengths.tolist())) == 1:
        # Uniform batch: the flat buffer already is [batch, channels, M].
        out = data.reshape(prep.n_items, int(chans[0]), int(lengths[0]))
        return out[0] if prep.single else out
    return [
        data[offsets[i] : offsets[i + 1]].reshape(int(chans[i]), int(lengths[i]))
        for i in range(prep.n_items)
    ]
