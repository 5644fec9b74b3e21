"""The quality-filter registry: one entry per filter, with its threshold.

A :class:`Filter` compares one per-clip metric with a threshold and names
the reason a clip fails it. Everything that knows about filters reads this
registry: :func:`agl_fast.quality.quality_filter` (which filters run and
why a clip fails), ``agl-fast curate`` (one flag per threshold, its help
and default), :class:`agl_fast.pipeline.BatchConfig` and the benchmark's
``[curate.thresholds]`` table (which names exist and what a valid value
is: :func:`check_thresholds`, the one validation). A plugin (see
:mod:`agl_fast.plugins`) adds a filter with :func:`register_filter`; a
filter on a metric the native pass does not compute brings its own
``compute``.

The thresholds are agl-fast's choices: the AGL1K paper names the filters
but gives no values.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._internal.args import flag
from .exceptions import ParameterError
from .plugins import load_plugins

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Filter",
    "check_thresholds",
    "computed_metrics",
    "defaults",
    "failures",
    "filters",
    "register_filter",
]

#: ``compute(mono_clips, sr) -> one value per clip`` (float64).
MetricFn = Callable[[Sequence[np.ndarray], float], np.ndarray]


@dataclass(frozen=True)
class Filter:
    """One quality filter.

    Attributes
    ----------
    name : str
        The threshold's name (``rms_floor``; the flag ``--rms-floor``).
    metric : str
        The per-clip metric it reads (a column of the output table).
    op : {"min", "max"}
        ``"min"``: a clip passes when ``metric >= threshold`` (a floor);
        ``"max"``: when ``metric <= threshold`` (a ceiling).
    default : float
        Default threshold.
    help : str
        What the filter rejects (``--help``).
    reason : str
        The reason a failing clip carries (``low_rms``).
    compute : callable or None
        For a metric the native pass does not compute: ``compute(clips,
        sr)`` on the mono clips, one float per clip.
    """

    name: str
    metric: str
    op: Literal["min", "max"]
    default: float
    help: str
    reason: str
    compute: MetricFn | None = None

    def fails(self, values: np.ndarray, threshold: float) -> np.ndarray:
        """Boolean mask of the clips that fail at ``threshold``.

        Parameters
        ----------
        values : np.ndarray [shape=(batch,)]
            The metric per clip.
        threshold : float

        Returns
        -------
        np.ndarray [shape=(batch,), dtype=bool]
        """
        values = np.asarray(values)
        return values < threshold if self.op == "min" else values > threshold


_FILTERS: dict[str, Filter] = {}


def register_filter(f: Filter, *, replace: bool = False) -> Filter:
    """Add ``f`` to the registry.

    Raises
    ------
    ParameterError
        A name taken (unless ``replace``), not an identifier, an unknown
        ``op`` or a default that is not a finite number.
    """
    if not isinstance(f, Filter):
        raise ParameterError(f"register_filter takes a Filter, got {type(f).__name__}")
    if not f.name.isidentifier():
        raise ParameterError(f"a filter name must be an identifier, got {f.name!r}")
    if f.op not in ("min", "max"):
        raise ParameterError(f"a filter's op must be 'min' or 'max', got {f.op!r}")
    replace = flag("replace", replace)
    if f.name in _FILTERS and not replace:
        raise ParameterError(f"a quality filter named {f.name!r} is registered already")
    _number(f.name, f.default)
    _FILTERS[f.name] = f
    return f


def filters() -> list[Filter]:
    """The registered filters (plugins included), in registration order."""
    load_plugins()
    return list(_FILTERS.values())


def defaults() -> dict[str, float]:
    """Every filter's default threshold, by name."""
    return {f.name: f.default for f in filters()}


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ParameterError(f"quality threshold {name} must be a number, got {value!r}")
    return float(value)


def check_thresholds(thresholds: Mapping[str, object] | None) -> dict[str, float]:
    """Validate thresholds by name and fill in the defaults.

    The one validation of a threshold table (API, command line, benchmark
    configuration).

    Parameters
    ----------
    thresholds : mapping of str to float, or None
        Names of registered filters; names left out keep their default.

    Returns
    -------
    dict of str to float
        Every registered filter's threshold.

    Raises
    ------
    ParameterError
        An unknown name, or a value that is not a number (a bool, text,
        NaN).
    """
    table = defaults()
    for name, value in (thresholds or {}).items():
        if name not in table:
            raise ParameterError(f"unknown quality threshold {name!r}; allowed: {sorted(table)}")
        table[name] = _number(name, value)
    return table


def computed_metrics(clips: Sequence[np.ndarray], sr: float) -> dict[str, np.ndarray]:
    """The metrics of the filters that bring their own ``compute``.

    Parameters
    ----------
    clips : sequence of np.ndarray [shape=(n_i,), dtype=float32]
        Mono clips.
    sr : float
        Sample rate in Hz.

    Returns
    -------
    dict of str to np.ndarray [shape=(batch,), dtype=float64]
    """
    out: dict[str, np.ndarray] = {}
    for f in filters():
        if f.compute is not None and f.metric not in out:
            values = np.asarray(f.compute(clips, sr), dtype=np.float64)
            if values.shape != (len(clips),):
                raise ParameterError(
                    f"filter {f.name}: compute gave shape {list(values.shape)} "
                    f"for {len(clips)} clips"
                )
            out[f.metric] = values
    return out


def failures(
    metrics: Mapping[str, np.ndarray], thresholds: Mapping[str, float]
) -> list[tuple[str, np.ndarray]]:
    """``(reason, failing mask)`` of every registered filter, in order.

    Parameters
    ----------
    metrics : mapping of str to np.ndarray [shape=(batch,)]
        Per-clip metrics by name (native and computed).
    thresholds : mapping of str to float
        Every filter's threshold (:func:`check_thresholds`).
    """
    return [(f.reason, f.fails(metrics[f.metric], thresholds[f.name])) for f in filters()]


class _Defaults(Mapping[str, float]):
    """The registered filters' defaults as a read-only mapping."""

    def __getitem__(self, name: str) -> float:
        return defaults()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(defaults())

    def __len__(self) -> int:
        return len(defaults())

    def __repr__(self) -> str:
        return repr(defaults())


#: Default thresholds by name: a live, read-only view of the registry.
DEFAULT_THRESHOLDS: Mapping[str, float] = _Defaults()

# The AGL1K filters (appendix A.2) with agl-fast's thresholds:
# * rms_floor 1e-3 (-60 dBFS): quieter clips are near-silent.
# * flatness_ceiling 0.5: white noise scores about 0.99 with the Welch
#   settings of agl_fast.quality, a pure tone below 1e-4, outdoor field
#   recordings about 0.01-0.15.
# * clipping_ceiling 0.001: more than 0.1% of the samples at the peak value
#   means a flat-topped (clipped) or constant signal.
# * full_scale_ceiling 0.001: the same share at or above full scale.
# * complexity_floor 100: the paper's AC summed over the 257 bands of a
#   512-point STFT. Stationary noise scores about 1 per band (about 250),
#   outdoor field recordings 250-320 over 10 s windows, a steady pure tone
#   below 100 and a constant or silent clip 0.
for _f in (
    Filter("rms_floor", "rms", "min", 1e-3,
           "reject clips whose RMS (full scale 1) is below this (near-silent)", "low_rms"),
    Filter("flatness_ceiling", "flatness", "max", 0.5,
           "reject clips whose spectral flatness is above this (noise-like)", "noise_like"),
    Filter("clipping_ceiling", "clipping_ratio", "max", 1e-3,
           "reject clips with more than this share of samples at their peak", "clipped"),
    Filter("full_scale_ceiling", "full_scale_ratio", "max", 1e-3,
           "reject clips with more than this share of samples at full scale", "full_scale"),
    Filter("complexity_floor", "complexity", "min", 100.0,
           "reject clips whose acoustic complexity (summed over 257 bands) is below this",
           "low_complexity"),
):  # fmt: skip
    register_filter(_f)
