"""What the compatibility layer accelerates, when it hands a call to
librosa, and the counters that tell which calls did.

:data:`ACCELERATED` is the one table: :func:`coverage`, :func:`install`'s
patch list and the coverage list of docs/compat-librosa.md (``scripts/compat_table.py``
writes it; ``tests/test_librosa_dropin.py`` checks it) all read it.
"""

from __future__ import annotations

import _thread
from collections import Counter

__all__ = [
    "ACCELERATED",
    "ORIGINALS",
    "Coverage",
    "coverage",
    "markdown_table",
    "reset_counters",
]

#: ``"feature.mfcc"`` -> librosa's own function, recorded by ``install()``
#: before it patches the package (empty when nothing is installed).
ORIGINALS: dict[str, object] = {}


def log_debug(message: str, *args: object) -> None:
    # logging is imported on the first message, not with the package (see
    # the start-up budget in benches/bench_startup.py)
    import logging

    logging.getLogger("agl_fast.compat.librosa").debug(message, *args)


#: librosa name (relative to ``librosa``) -> the cases handed to librosa
#: itself (each also a reason recorded when it happens). Every other call
#: runs agl-fast. Every name also hands over an argument the native path
#: does not read the way librosa does (a number that is not a plain Python
#: or numpy number, a count that is not an integer): librosa then takes it
#: or raises its own error.
ACCELERATED: dict[str, tuple[str, ...]] = {
    "load": (
        "a file-like object or other non-path input",
        "a file the native decoder cannot read (a container it does not know)",
        "a container librosa does not read with soundfile (MP4/M4A, Matroska, ...)",
        "Ogg Vorbis (the native decoder's samples differ from libvorbis's by up to 2e-7)",
        "a negative offset (from the end of the file in librosa 1.0)",
    ),
    "resample": (
        "res_type other than polyphase: soxr_hq (librosa's default) and the other soxr "
        "types are soxr's own filter, which only soxr reproduces to the bit",
        "non-integer rates or fix_length keywords",
        "polyphase on data that is not float32 or float64, or rates above MAX_SAMPLE_RATE",
    ),
    "get_duration": (
        "a file the native decoder cannot read, Ogg Vorbis, or a container librosa does not "
        "read with soundfile",
        "the deprecated filename= (librosa 0.10, 0.11)",
    ),
    "stft": (),
    "power_to_db": (
        "a reference array that is not one value (per channel)",
        "axes= other than the last two axes or all of them (librosa 1.0)",
    ),
    "amplitude_to_db": (
        "a reference array that is not one value (per channel)",
        "axes= other than the last two axes or all of them (librosa 1.0)",
    ),
    "feature.melspectrogram": ("keywords librosa.filters.mel does not name",),
    "feature.mfcc": ("mel_norm= (librosa 0.10, where it is a filter keyword)",),
    "feature.rms": (),
    "feature.spectral_flatness": (),
    "feature.spectral_centroid": (),
    "feature.spectral_bandwidth": (),
    "feature.spectral_rolloff": (),
    "feature.zero_crossing_rate": ("a ref_magnitude function other than np.max",),
    "effects.trim": (),
    "effects.split": (),
    "onset.onset_strength": (),
    "onset.onset_strength_multi": ("sub-band channels",),
    "filters.mel": (),
    "istft": (
        "an out= array",
        "a spectrogram that is not a numpy array of 2 or more dimensions",
        "a spectrogram that is not complex64/complex128 or has no frames",
        "a size that is not a positive integer",
        "a window that is not a name, tuple, number or array",
        "a dtype that is not a real floating type",
    ),
    "feature.spectral_contrast": (),
    "feature.chroma_stft": (
        "unhashable filter-bank keywords",
        "a tuning band at the edge of the spectrum",
    ),
    "feature.delta": ("a mode other than interp or extra filter keywords",),
    "util.normalize": ("an input that is not a float or complex array",),
    "to_mono": (),
    "pcen": ("a max-filtered reference (max_size > 1)",),
}

_lock = _thread.allocate_lock()
_calls: Counter[str] = Counter()
_fallbacks: Counter[tuple[str, str]] = Counter()
_resolved: Counter[str] = Counter()


class Coverage:
    """A snapshot of the compatibility layer's coverage and counters.

    Attributes
    ----------
    accelerated : tuple of str
        Names agl-fast computes (``"stft"``, ``"feature.mfcc"``, ...).
    fallback_cases : dict of str to tuple of str
        For each accelerated name, the cases it hands to librosa.
    calls : Counter
        Calls of each accelerated name in this process.
    fallbacks : Counter
        ``(name, reason)`` of every call an accelerated name handed to
        librosa, with counts.
    librosa_names : Counter
        Names served as librosa's own objects (not accelerated), counted per
        lookup through the compatibility module.
    """

    # A plain class, not a dataclass: dataclasses (inspect, ast) would be
    # most of the package's import time (benches/bench_startup.py).
    __slots__ = ("accelerated", "calls", "fallback_cases", "fallbacks", "librosa_names")

    def __init__(
        self,
        accelerated: tuple[str, ...],
        fallback_cases: dict[str, tuple[str, ...]],
        calls: Counter[str] | None = None,
        fallbacks: Counter[tuple[str, str]] | None = None,
        librosa_names: Counter[str] | None = None,
    ) -> None:
        self.accelerated = accelerated
        self.fallback_cases = fallback_cases
        self.calls: Counter[str] = Counter() if calls is None else calls
        self.fallbacks: Counter[tuple[str, str]] = Counter() if fallbacks is None else fallbacks
        self.librosa_names: Counter[str] = Counter() if librosa_names is None else librosa_names

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"Coverage({fields})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Coverage):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    @property
    def accelerated_calls(self) -> int:
        """Calls that ran agl-fast code (calls minus those handed over)."""
        return sum(self.calls.values()) - sum(self.fallbacks.values())


def coverage() -> Coverage:
    """Which librosa names run agl-fast, and what happened so far.

    Returns
    -------
    Coverage
        The table and this process's counters (copies).

    Examples
    --------
    >>> import agl_fast.compat.librosa as librosa
    >>> "stft" in librosa.coverage().accelerated
    True
    """
    with _lock:
        return Coverage(
            tuple(ACCELERATED),
            dict(ACCELERATED),
            Counter(_calls),
            Counter(_fallbacks),
            Counter(_resolved),
        )


def reset_counters() -> None:
    """Set every counter of :func:`coverage` back to zero."""
    with _lock:
        _calls.clear()
        _fallbacks.clear()
        _resolved.clear()


def record_call(name: str) -> None:
    with _lock:
        _calls[name] += 1


def record_fallback(name: str, reason: str) -> None:
    with _lock:
        _fallbacks[(name, reason)] += 1
    log_debug("librosa.%s handed to librosa: %s", name, reason)


def record_librosa_name(name: str) -> None:
    with _lock:
        _resolved[name] += 1
    log_debug("librosa.%s is librosa's own (not accelerated)", name)


def markdown_table() -> str:
    """The coverage table as Markdown (the list in docs/compat-librosa.md)."""
    lines = ["| librosa function | handed to librosa when |", "|---|---|"]
    for name, cases in ACCELERATED.items():
        lines.append(f"| `librosa.{name}` | {'; '.join(cases) or 'never'} |")
    return "\n".join(lines)
