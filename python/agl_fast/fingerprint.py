"""Landmark audio fingerprints and near-duplicate pairing.

A fingerprint finds the same recording again after re-encoding (MP3, Opus,
AAC), resampling, gain, mono downmix, added noise and trims. It is computed
in the Rust core from the clip's own spectrum:

1. the clip is downmixed (mean of its channels) and resampled to
   :data:`ANALYSIS_SR` Hz with the core's resampler;
2. Hann frames of 128 ms every :data:`HOP_S` seconds (32 ms) give a log
   power spectrum in bands of 15.6 Hz (two FFT bins each) between 62.5 Hz
   and 3.375 kHz, whitened by subtracting each band's mean over the clip
   (gain and static equalisation cancel out). The frame is four hops long,
   so a trim that is not a whole number of hops shifts the grid by at most
   an eighth of a frame and the same peaks are found;
3. a *peak* is the largest point of its neighbourhood (±12 bands, ±8
   frames) standing at least 6.5 dB above its band's mean, and more than
   70 dB above silence relative to the clip's loudest band;
4. each peak is paired with the next three peaks up to 2 s later; a pair
   ``(f1, f2, dt)`` is a 22-bit hash stored with the anchor's frame.

:func:`pair` files every hash in an inverted index and lets each clip vote
for the time offset of every other clip sharing a hash (or the hash of the
same two bands one frame closer or further apart, as a peak may move by a
frame); a pair matches when the best offset (±1 frame) gathers at least
:data:`MIN_MATCHES` votes and its score, the votes over the number of
hashes of the sparser clip inside the overlap, reaches ``min_score``
(default :data:`MIN_SCORE`). :func:`pair_sharded` gives the same pairs from
an index per shard, probed block by block, with the hash counts of the
shards summed (:func:`hash_counts`); ``agl-fast dedup --engine ray`` runs
those blocks as Ray tasks.

**Tones, silence and clicks.** Such clips fingerprint without error. A
steady tone has no band rising above its own mean and silence none above
the floor, so neither has peaks; a strictly periodic click train repeats a few
hashes. The rule: a clip with fewer than :data:`MIN_DISTINCT` distinct hashes
is *not fingerprintable* (:attr:`Fingerprint.fingerprintable` is ``False``)
and is never paired, so tones never match across files. In clips that are
paired, a hash repeated more than four times in one clip (a steady texture)
and a hash held more than :data:`MAX_POSTINGS` (2,048) times in the corpus
cast no votes.

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

import itertools
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
    "MAX_POSTINGS",
    "MIN_DISTINCT",
    "MIN_MATCHES",
    "MIN_SCORE",
    "Fingerprint",
    "Matches",
    "blocks",
    "fingerprint",
    "fingerprint_many",
    "hash_counts",
    "merge_blocks",
    "pair",
    "pair_sharded",
    "shard_bounds",
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
MAX_POSTINGS: int = int(_native.FP_MAX_POSTINGS)
"""A hash held more often than this in the corpus casts no votes."""
HASH_BITS: int = int(_native.FP_HASH_BITS)
FORMAT_VERSION = 2
"""Version of the :meth:`Fingerprint.to_bytes` layout and of the analysis
behind it (version 1: 64 ms frames, whose hashes do not match version 2's
128 ms frames; such fingerprints are refused and must be recomputed)."""

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
                f"want version {FORMAT_VERSION}: fingerprint the audio again "
                "(curate --stage fingerprint)"
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


def _side(fps: Sequence[Fingerprint], what: str) -> tuple[list[Any], list[Any], np.ndarray]:
    """Hash arrays, time arrays and frame counts of ``fps`` for the core."""
    for i, f in enumerate(fps):
        if not isinstance(f, Fingerprint):
            raise ParameterError(f"{what}[{i}] must be a Fingerprint, got {type(f).__name__}")
    return (
        [f.hashes for f in fps],
        [f.times for f in fps],
        np.array([f.n_frames for f in fps], dtype=np.uint32),
    )


def hash_counts(fps: Sequence[Fingerprint], n_threads: int | None = None) -> np.ndarray:
    """Postings of every hash over the fingerprintable clips of ``fps``.

    Summed over the shards of a corpus, the counts let :func:`pair` index
    one shard at a time and still drop exactly the hashes that are common
    in the whole corpus (held more than :data:`MAX_POSTINGS` times), as one
    index over the whole corpus does.

    Parameters
    ----------
    fps : sequence of Fingerprint
        One shard's fingerprints.
    n_threads : int or None
        Worker threads (default: the library setting).

    Returns
    -------
    np.ndarray [shape=(2**HASH_BITS,), dtype=uint32]
        Count of each hash value (16 MiB).
    """
    h, t, _ = _side(fps, "fps")
    return _native.hash_counts(h, t, resolve_threads(n_threads))


def pair(
    fps: Sequence[Fingerprint],
    *,
    others: Sequence[Fingerprint] | None = None,
    counts: np.ndarray | None = None,
    min_score: float | None = None,
    n_threads: int | None = None,
) -> Matches:
    """Every pair of clips sharing audio, through an inverted hash index.

    Parameters
    ----------
    fps : sequence of Fingerprint
        The clips' fingerprints.
    others : sequence of Fingerprint or None
        When given, the index holds these clips and only pairs between a
        clip of ``fps`` (``a``) and one of ``others`` (``b``, an index into
        ``others``) are returned: one block of a sharded corpus
        (:func:`pair_sharded`).
    counts : np.ndarray [shape=(2**HASH_BITS,), dtype=uint32] or None
        The corpus's :func:`hash_counts`, summed over its shards, when the
        clips given are part of it (default: the clips given decide which
        hashes are too common to vote).
    min_score : float or None
        Least score of a match in [0, 1] (default :data:`MIN_SCORE`).
    n_threads : int or None
        Worker threads (default: the library setting).

    Returns
    -------
    Matches
        Pairs ``a < b`` (without ``others``); clips that are not
        fingerprintable never appear.
    """
    score = MIN_SCORE if min_score is None else real("min_score", min_score)
    clips = _side(fps, "fps")
    other = None if others is None else _side(others, "others")
    if counts is not None:
        counts = np.asarray(counts)
        if counts.dtype != np.uint32 or counts.shape != (1 << HASH_BITS,):
            raise ShapeError(
                f"counts must be uint32 of shape ({1 << HASH_BITS},), "
                f"got {counts.dtype} {counts.shape}"
            )
    a, b, sa, sb, ov, sc, votes = _native.pair(
        clips, score, MIN_MATCHES, resolve_threads(n_threads), other, counts
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


def shard_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` ranges cutting ``n`` clips into ``shards``
    nearly equal shards (fewer when ``n < shards``)."""
    shards = count("shards", shards)
    cuts = np.linspace(0, n, min(shards, max(n, 1)) + 1).round().astype(int).tolist()
    return list(itertools.pairwise(cuts))


def blocks(n_shards: int) -> list[tuple[int, int]]:
    """The blocks of a sharded pairing: ``(i, i)`` for the pairs within
    shard ``i`` and ``(i, j)``, ``i < j``, for those between two shards."""
    return [(i, j) for i in range(n_shards) for j in range(i, n_shards)]


def merge_blocks(
    parts: Sequence[tuple[int, int, Matches]], bounds: Sequence[tuple[int, int]]
) -> Matches:
    """Matches of the whole corpus from those of its blocks ``(i, j,
    matches)`` (indices local to shards ``i`` and ``j``), sorted by ``a``
    then ``b`` as :func:`pair` sorts them."""
    cols: dict[str, list[np.ndarray]] = {f: [] for f in Matches.__dataclass_fields__}
    for i, j, m in parts:
        for f in cols:
            v = getattr(m, f)
            if f == "a":
                v = np.asarray(v, np.int64) + bounds[i][0]
            elif f == "b":
                v = np.asarray(v, np.int64) + bounds[j][0]
            cols[f].append(np.asarray(v))
    merged = {
        f: np.concatenate(v) if v else np.zeros(0, np.int64 if f in "ab" else np.float64)
        for f, v in cols.items()
    }
    order = np.lexsort((merged["b"], merged["a"]))
    return Matches(**{f: v[order] for f, v in merged.items()})


def pair_sharded(
    fps: Sequence[Fingerprint],
    shards: int,
    *,
    min_score: float | None = None,
    n_threads: int | None = None,
) -> Matches:
    """:func:`pair` over a corpus cut into ``shards`` contiguous shards: an
    index per shard, probed by its own clips and by every earlier shard's
    (a block join), with the hash counts summed over the shards. The
    matches are those of :func:`pair` on the whole corpus; memory is that
    of two shards. ``agl-fast dedup --engine ray`` runs the same blocks as
    Ray tasks.

    Parameters
    ----------
    fps : sequence of Fingerprint
        The corpus's fingerprints.
    shards : int
        Number of shards (at least 1).
    min_score : float or None
        As for :func:`pair`.
    n_threads : int or None
        Worker threads of each block.

    Returns
    -------
    Matches
    """
    bounds = shard_bounds(len(fps), shards)
    parts = [fps[lo:hi] for lo, hi in bounds]
    counts = np.zeros(1 << HASH_BITS, np.uint32)
    for p in parts:
        counts += hash_counts(p, n_threads)
    found = [
        (
            i,
            j,
            pair(
                parts[i],
                others=None if i == j else parts[j],
                counts=counts,
                min_score=min_score,
                n_threads=n_threads,
            ),
        )
        for i, j in blocks(len(parts))
    ]
    return merge_blocks(found, bounds)
