"""Landmark audio fingerprints and near-duplicate pairing.

A fingerprint finds the same recording again after re-encoding (MP3, Opus,
AAC), resampling, gain, mono downmix, added noise and trims. It is computed
in the Rust core from the clip's own spectrum:

1. the clip is downmixed (mean of its channels) and resampled to
   :data:`ANALYSIS_SR` Hz with the core's resampler;
2. Hann frames of 64 ms every :data:`HOP_S` seconds give a log power
   spectrum between 62.5 Hz and 3.375 kHz, whitened by subtracting each
   bin's mean over the clip (gain and static equalisation cancel out);
3. a *peak* is the largest point of its neighbourhood (±12 bins, ±8 frames)
   standing at least 6.5 dB above its bin's mean, and more than 70 dB above
   silence relative to the clip's loudest bin;
4. each peak is paired with the next three peaks up to 2 s later; a pair
   ``(f1, f2, dt)`` is a 22-bit hash stored with the anchor's frame.

:func:`pair` files every hash in an inverted index and lets each clip vote
for the time offset of every other clip sharing a hash (or the hash of the
same two bins one frame closer or further apart, as a trim that is not a
whole number of hops shifts the frame grid); a pair matches when
the best offset (±1 frame) gathers at least :data:`MIN_MATCHES` votes and
its score, the votes over the number of hashes of the sparser clip inside the
overlap, reaches ``min_score`` (default :data:`MIN_SCORE`).

**Tones, silence and clicks.** Such clips fingerprint without error. A
steady tone has no bin rising above its own mean and silence none above the
floor, so neither has peaks; a strictly periodic click train repeats a few
hashes. The rule: a clip with fewer than :data:`MIN_DISTINCT` distinct hashes
is *not fingerprintable* (:attr:`Fingerprint.fingerprintable` is ``False``)
and is never paired, so tones never match across files. In clips that are
paired, a hash repeated more than four times in one clip (a steady texture)
and a hash held by more than 2,048 clips cast no votes.

Examples
--------
>>> import numpy as np
>>> from agl_fast import fingerprint as fpm
>>> rng = np.random.default_rng(0)
>>> y = rng.standard_normal(16000 * 20).astype(np.float32)
>>> fps = fpm.fingerprint_many([y, y[16000 * 5 :]], [16000, 16000])
>>> m = fpm.pair(fps)
>>> (int(m.a[0]), int(m.b[0]), round(float(m.start_a_s[0])))
(0, 1, 5)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native
from ._internal.args import count, real
from ._internal.batch import to_float32
from ._internal.config import resolve_threads
from .exceptions import FingerprintFormatError, ParameterError, ShapeError

__all__ = [
    "ANALYSIS_SR",
    "FORMAT_VERSION",
    "HOP_S",
    "MIN_DISTINCT",
    "MIN_MATCHES",
    "MIN_SCORE",
    "Fingerprint",
    "Matches",
    "fingerprint",
    "fingerprint_many",
    "pair",
]

ANALYSIS_SR: int = int(_native.FP_ANALYSIS_SR)
"""Analysis sample rate in Hz: every clip is resampled to it."""
HOP_S: float = int(_native.FP_HOP) / ANALYSIS_SR
"""Frame step in seconds (the unit of :attr:`Fingerprint.times`)."""
MIN_DISTINCT: int = int(_native.FP_MIN_DISTINCT)
"""Fewest distinct hashes of a fingerprintable clip (see the module notes)."""
MIN_SCORE: float = float(_native.FP_MIN_SCORE)
"""Default least score of a match: votes at the offset over the hashes of
the sparser clip inside the overlap, in [0, 1]."""
MIN_MATCHES: int = int(_native.FP_MIN_MATCHES)
"""Least number of hashes agreeing on the offset of a match."""
HASH_BITS: int = int(_native.FP_HASH_BITS)
FORMAT_VERSION = 1
"""Version of the :meth:`Fingerprint.to_bytes` layout."""

_MAGIC = b"AGFP"
# magic, version, flags, hop_s, duration_s, n_frames, distinct, n hashes
_HEADER = struct.Struct("<4sHHddIII")


@dataclass(frozen=True, eq=False)
class Fingerprint:
    """One clip's fingerprint.

    Attributes
    ----------
    hashes : np.ndarray [shape=(n,), dtype=uint32]
        Landmark hashes (below ``2**22``), in anchor-frame order.
    times : np.ndarray [shape=(n,), dtype=uint32]
        Anchor frame of each hash (frames of :attr:`hop_s` seconds),
        non-decreasing.
    hop_s : float
        Frame step in seconds.
    duration_s : float
        Duration of the clip in seconds.
    distinct : int
        Number of distinct hashes.
    n_frames : int
        Analysis frames of the clip.
    """

    hashes: np.ndarray
    times: np.ndarray
    hop_s: float
    duration_s: float
    distinct: int
    n_frames: int

    @property
    def fingerprintable(self) -> bool:
        """Whether the clip has at least :data:`MIN_DISTINCT` distinct
        hashes; clips that have not are never paired."""
        return self.distinct >= MIN_DISTINCT

    def to_bytes(self) -> bytes:
        """Compact versioned encoding: a 36-byte header, then the hashes and
        the times as little-endian uint32 (8 bytes a hash)."""
        head = _HEADER.pack(
            _MAGIC,
            FORMAT_VERSION,
            0,
            self.hop_s,
            self.duration_s,
            self.n_frames,
            self.distinct,
            self.hashes.size,
        )
        return head + self.hashes.astype("<u4").tobytes() + self.times.astype("<u4").tobytes()

    @classmethod
    def from_bytes(cls, b: bytes) -> Fingerprint:
        """Decode :meth:`to_bytes` output, checking every field.

        Raises
        ------
        FingerprintFormatError
            The bytes are not a fingerprint of a known version, are cut
            short or too long, or hold values a fingerprint cannot have.
        """
        if not isinstance(b, (bytes, bytearray, memoryview)):
            raise FingerprintFormatError(f"fingerprint must be bytes, got {type(b).__name__}")
        b = bytes(b)
        if len(b) < _HEADER.size:
            raise FingerprintFormatError(
                f"fingerprint of {len(b)} bytes is shorter than its {_HEADER.size}-byte header"
            )
        magic, version, flags, hop_s, duration_s, n_frames, distinct, n = _HEADER.unpack_from(b)
        if magic != _MAGIC:
            raise FingerprintFormatError(f"not a fingerprint: magic {magic!r}, want {_MAGIC!r}")
        if version != FORMAT_VERSION or flags != 0:
            raise FingerprintFormatError(
                f"fingerprint format version {version} (flags {flags}) is not supported, "
                f"want version {FORMAT_VERSION}"
            )
        want = _HEADER.size + 8 * n
        if len(b) != want:
            raise FingerprintFormatError(
                f"fingerprint header says {n} hashes ({want} bytes) but {len(b)} bytes were given"
            )
        if hop_s != HOP_S or not (np.isfinite(duration_s) and duration_s >= 0):
            raise FingerprintFormatError(
                f"fingerprint has hop_s={hop_s}, duration_s={duration_s} "
                f"(want hop_s={HOP_S} and a finite duration >= 0)"
            )
        hashes = np.frombuffer(b, "<u4", n, _HEADER.size).astype(np.uint32)
        times = np.frombuffer(b, "<u4", n, _HEADER.size + 4 * n).astype(np.uint32)
        _check_arrays(hashes, times, distinct, n_frames)
        return cls(hashes, times, hop_s, duration_s, int(distinct), int(n_frames))


def _check_arrays(hashes: np.ndarray, times: np.ndarray, distinct: int, n_frames: int) -> None:
    """Values a decoded fingerprint must hold."""
    if hashes.size and int(hashes.max()) >> HASH_BITS:
        raise FingerprintFormatError(f"fingerprint holds a hash above 2^{HASH_BITS}")
    if times.size and (np.any(np.diff(times.astype(np.int64)) < 0) or times[-1] >= n_frames):
        raise FingerprintFormatError(
            f"fingerprint times must be non-decreasing and below n_frames={n_frames}"
        )
    if distinct != np.unique(hashes).size:
        raise FingerprintFormatError(
            f"fingerprint says {distinct} distinct hashes but holds {np.unique(hashes).size}"
        )


@dataclass(frozen=True, eq=False)
class Matches:
    """Matching clip pairs, one row per pair (equal-length arrays).

    Attributes
    ----------
    a, b : np.ndarray [shape=(m,), dtype=int64]
        Indices into the fingerprints given to :func:`pair`, ``a < b``,
        sorted by ``a`` then ``b``.
    start_a_s, start_b_s : np.ndarray [shape=(m,), dtype=float64]
        Where the shared audio starts in clip ``a`` and clip ``b``, seconds.
    overlap_s : np.ndarray [shape=(m,), dtype=float64]
        Length of the shared audio in seconds (from the clips' extents).
    score : np.ndarray [shape=(m,), dtype=float64]
        Votes at the matched offset over the hashes of the sparser clip in
        the overlap, in [0, 1].
    votes : np.ndarray [shape=(m,), dtype=int64]
        Hashes agreeing on the offset.
    """

    a: np.ndarray
    b: np.ndarray
    start_a_s: np.ndarray
    start_b_s: np.ndarray
    overlap_s: np.ndarray
    score: np.ndarray
    votes: np.ndarray

    def __len__(self) -> int:
        return int(self.a.size)


def _clip(y: Any, i: int | None) -> np.ndarray:
    """One clip as C-contiguous float32 ``[channels, samples]``."""
    what = "y" if i is None else f"ys[{i}]"
    x = to_float32(y, what=what)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ShapeError(f"{what} must have shape (n,) or (channels, n), got {x.shape}")
    return np.ascontiguousarray(x)


def fingerprint_many(
    ys: Sequence[Any], srs: Sequence[int], n_threads: int | None = None
) -> list[Fingerprint]:
    """Fingerprints of many clips, computed in parallel.

    Parameters
    ----------
    ys : sequence of np.ndarray [shape=(n,) or (channels, n)]
        Clips (float32 or float64; more channels are averaged).
    srs : sequence of int
        Sample rate of each clip in Hz.
    n_threads : int or None
        Worker threads (default: the library setting).

    Returns
    -------
    list of Fingerprint
        One per clip, in order.

    Raises
    ------
    NonFiniteError
        A clip holds NaN or infinite samples.
    ShapeError
        A clip is empty or not 1-D/2-D, or ``ys`` and ``srs`` differ in length.
    ParameterError
        A rate is not a positive integer the resampler accepts.
    """
    clips = [_clip(y, i) for i, y in enumerate(ys)]
    rates = [count("sr", sr) for sr in srs]
    if len(rates) != len(clips):
        raise ShapeError(f"{len(clips)} clips but {len(rates)} rates")
    out = _native.fingerprint_many(
        clips, np.asarray(rates, dtype=np.int64), resolve_threads(n_threads)
    )
    return [
        Fingerprint(h, t, HOP_S, c.shape[1] / sr, int(d), int(nf))
        for (h, t, d, nf), c, sr in zip(out, clips, rates, strict=True)
    ]


def fingerprint(y: Any, sr: int) -> Fingerprint:
    """Fingerprint of one clip.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (channels, n)]
        The clip (float32 or float64; more channels are averaged).
    sr : int
        Its sample rate in Hz.

    Returns
    -------
    Fingerprint
    """
    return fingerprint_many([y], [sr], n_threads=1)[0]


def pair(
    fps: Sequence[Fingerprint], *, min_score: float | None = None, n_threads: int | None = None
) -> Matches:
    """Every pair of clips sharing audio, through an inverted hash index.

    Parameters
    ----------
    fps : sequence of Fingerprint
        The clips' fingerprints.
    min_score : float or None
        Least score of a match in [0, 1] (default :data:`MIN_SCORE`).
    n_threads : int or None
        Worker threads (default: the library setting).

    Returns
    -------
    Matches
        Pairs ``a < b``; clips that are not fingerprintable never appear.
    """
    score = MIN_SCORE if min_score is None else real("min_score", min_score)
    for i, f in enumerate(fps):
        if not isinstance(f, Fingerprint):
            raise ParameterError(f"fps[{i}] must be a Fingerprint, got {type(f).__name__}")
    a, b, sa, sb, ov, sc, votes = _native.pair(
        [f.hashes for f in fps],
        [f.times for f in fps],
        np.array([f.n_frames for f in fps], dtype=np.uint32),
        score,
        MIN_MATCHES,
        resolve_threads(n_threads),
    )
    return Matches(
        a=a,
        b=b,
        start_a_s=sa * HOP_S,
        start_b_s=sb * HOP_S,
        overlap_s=ov * HOP_S,
        score=sc,
        votes=votes.astype(np.int64),
    )
