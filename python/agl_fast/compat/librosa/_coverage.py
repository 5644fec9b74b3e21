"""What the compatibility layer accelerates, when it hands a call to
librosa, and the counters that tell which calls did.

:data:`ACCELERATED` is the one table: :func:`coverage`, :func:`install`'s
patch list and the README's coverage list (``scripts/compat_table.py``
writes it; ``tests/test_librosa_dropin.py`` checks it) all read it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["ACCELERATED", "Coverage", "coverage", "markdown_table", "reset_counters"]

_log = logging.getLogger("agl_fast.compat.librosa")

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

_lock = threading.Lock()
_calls: Counter[str] = Counter()
_fallbacks: Counter[tuple[str, str]] = Counter()
_resolved: Counter[str] = Counter()


@dataclass(frozen=True)
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

    accelerated: tuple[str, ...]
    fallback_cases: dict[str, tuple[str, ...]]
    calls: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[tuple[str, str]] = field(default_factory=Counter)
    librosa_names: Counter[str] = field(default_factory=Counter)

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
    _log.debug("librosa.%s handed to librosa: %s", name, reason)


def record_librosa_name(name: str) -> None:
    with _lock:
        _resolved[name] += 1
    _log.debug("librosa.%s is librosa's own (not accelerated)", name)


def markdown_table() -> str:
    """The coverage table as Markdown (the README's list)."""
    lines = ["| librosa function | handed to librosa when |", "|---|---|"]
    for name, cases in ACCELERATED.items():
        lines.append(f"| `librosa.{name}` | {'; '.join(cases) or 'never'} |")
    return "\n".join(lines)
