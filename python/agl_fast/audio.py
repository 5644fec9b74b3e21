"""Audio file loading and resampling, decoded in Rust.

MP3 (gapless: the LAME/Xing encoder delay and padding are trimmed, so sample
counts match ffmpeg), FLAC, WAV (PCM 8/16/24/32-bit and float), Ogg Vorbis
and AAC in MP4/M4A are decoded to float32 in [-1, 1], then mapped to the
requested channels and resampled with a band-limited polyphase filter while
decoding (long files are never held at their source rate). MP3 ``offset``
seeks to the exact sample; damaged MP3 frames are skipped, as ffmpeg does.

Sources can be paths, whole files in memory (``bytes``, ``bytearray``,
``memoryview``) or binary file-like objects (``io.BytesIO``, an open file, an
object-store stream): the result is the same as from the file on disk. An
optional ``format`` hint (``"mp3"``, ``"flac"``, ...) stands in for the
extension; without one the content decides.

Hostile input: header fields that would size an allocation (sample rate,
channels, sample-table counts) are checked against what the file can hold
before anything is allocated, rates are limited to 1..``MAX_SAMPLE_RATE`` Hz
and conversions to a factor of ``MAX_RATIO``; a lossy frame that decodes to
samples beyond ``CORRUPT_LEVEL`` (damaged data) is replaced by silence and
counted in ``corrupt_frames``. An allocation the system refuses raises
:class:`~agl_fast.exceptions.ResourceLimitError` (a ``MemoryError``) with the
size instead of ending the process.

``res_type`` picks the resampling filter:

* ``"fast"``: 8 zero crossings a side, about 60 dB stop band, pass band to
  0.85 of the lower Nyquist frequency.
* ``"hq"`` (default): 32 zero crossings, about 100 dB, pass band to 0.95.
* ``"vhq"``: 64 zero crossings, about 130 dB, pass band to 0.97.

Against ``soxr`` (``VHQ``), ``"hq"`` differs by less than -80 dB relative to
the signal for content below 0.85 of the output Nyquist frequency (the test
suite checks this bound).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from . import _native
from ._internal.args import array, text
from ._internal.config import resolve_threads
from ._internal.decoded import meta_table, samples_column
from .exceptions import ParameterError, ShapeError

if TYPE_CHECKING:
    # imported where a table is built: load() and resample() need no pyarrow
    import pyarrow as pa

__all__ = [
    "AUDIO_EXTENSIONS",
    "CORRUPT_LEVEL",
    "DURATION_DECODES",
    "MAX_RATIO",
    "MAX_SAMPLE_RATE",
    "AudioSource",
    "duration",
    "load",
    "load_arrays",
    "load_many",
    "resample",
]

PathLike = str | os.PathLike[str]
#: What the loaders accept for one file: a path, the file's bytes, or a
#: binary file-like object (anything with ``read()`` returning bytes).
AudioSource: TypeAlias = "str | os.PathLike[str] | bytes | bytearray | memoryview | Any"

#: Highest sample rate accepted (a target ``sr`` or a file's header), in Hz.
MAX_SAMPLE_RATE: int = int(_native.MAX_SAMPLE_RATE)
#: Largest resampling factor, up or down.
MAX_RATIO: float = float(_native.MAX_RATIO)
#: Peak above which a decoded lossy frame counts as damaged.
CORRUPT_LEVEL: float = float(_native.CORRUPT_LEVEL)
#: File extensions (lower case, with the dot) of the formats the loaders
#: read: what a directory scan of ``agl-fast curate`` picks up.
AUDIO_EXTENSIONS: frozenset[str] = frozenset(
    {".mp3", ".flac", ".wav", ".wave", ".ogg", ".oga", ".opus", ".m4a", ".mp4", ".aac"}
    | {".webm", ".mka", ".aiff", ".aif", ".aifc"}
)


def _source(obj: Any, what: str) -> str | bytes:
    """One source as the native loader takes it: a path string or bytes."""
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    if isinstance(obj, str | os.PathLike):
        p = os.fspath(obj)
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        return p
    read = getattr(obj, "read", None)
    if callable(read):
        data = read()
        if isinstance(data, bytearray | memoryview):
            data = bytes(data)
        if not isinstance(data, bytes):
            raise ParameterError(
                f"{what} is a file-like object whose read() gave {type(data).__name__}, "
                "not bytes: open it in binary mode"
            )
        return data
    raise ParameterError(
        f"{what} must be a path, bytes or a binary file-like object, got {type(obj).__name__}"
    )


def _label(src: str | bytes, i: int) -> str:
    """A source's name in the ``path`` and default ``key`` columns."""
    return src if isinstance(src, str) else f"<in-memory file #{i}, {len(src)} bytes>"


def _rate(name: str, v: Any) -> int:
    """``v`` as a sample rate in ``1..MAX_SAMPLE_RATE`` Hz, or a ``ParameterError``."""
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 1 <= v <= MAX_SAMPLE_RATE:
        raise ParameterError(
            f"{name} must be an integer between 1 and {MAX_SAMPLE_RATE} Hz, got {name}={v!r}"
        )
    return int(v)


def _format(name: str, v: Any) -> str | None:
    """A format hint: ``None`` or a short name such as ``"mp3"``."""
    if v is not None and not isinstance(v, str):
        raise ParameterError(f"{name} must be a format name such as 'mp3' or None, got {v!r}")
    return v


def _decode_options(
    sr: Any,
    mono: Any,
    channel: Any,
    offset: Any,
    duration: Any,
    max_duration: Any,
    res_type: Any,
) -> dict[str, Any]:
    """The decoding options of the native loaders, each checked once."""
    return {
        "res_type": text("res_type", res_type),
        "sr": None if sr is None else _rate("sr", sr),
        "mono": _flag("mono", mono),
        "channel": _check_channel(channel),
        "offset": _seconds("offset", offset),
        "duration": _opt_seconds("duration", duration),
        "max_duration": _opt_seconds("max_duration", max_duration),
    }


def _check_channel(channel: Any) -> int | None:
    if channel is None:
        return None
    if isinstance(channel, bool) or not isinstance(channel, int | np.integer) or channel < 0:
        raise ParameterError(f"channel must be a non-negative integer, got channel={channel!r}")
    return int(min(int(channel), 2**32))


def _seconds(name: str, v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number of seconds, got {name}={v!r}") from None


def _opt_seconds(name: str, v: Any) -> float | None:
    return None if v is None else _seconds(name, v)


def load(
    path: AudioSource,
    *,
    sr: int | None = 32000,
    mono: bool = False,
    offset: float = 0.0,
    duration: float | None = None,
    channel: int | None = None,
    max_duration: float | None = None,
    res_type: str = "hq",
    format: str | None = None,
) -> tuple[np.ndarray, int]:
    """Load an audio file as float32, resampled to ``sr``.

    Parameters
    ----------
    path : str, os.PathLike, bytes, bytearray, memoryview or binary file-like
        Audio file (MP3, FLAC, WAV, Ogg Vorbis, AAC/M4A), on disk or in
        memory.
    sr : int or None
        Target rate in Hz (32000, the rate of EfficientAT and BAT); ``None``
        keeps the file's own rate.
    mono : bool
        Average the channels into one.
    offset : float
        Start reading this many seconds in: at frame ``round(offset * sr_file)``
        of the full decode, whatever the format (see ``docs/robustness.md``,
        "Seeking").
    duration : float or None
        Read at most this many seconds (``round(duration * sr_file)`` frames).
    channel : int or None
        Keep only this channel (0-based); exclusive with ``mono``.
    max_duration : float or None
        Hard cap in seconds, for untrusted inputs.
    res_type : {"fast", "hq", "vhq"}
        Resampling quality (see the module notes).
    format : str or None
        Format hint (``"mp3"``, ``"wav"``, ...) in place of the extension.

    Returns
    -------
    y : np.ndarray [shape=(n,) or (channels, n), dtype=float32]
        One-dimensional when a single channel remains, as in librosa.
    sr : int
        Sample rate of ``y`` in Hz.

    Raises
    ------
    AudioDecodeError
        The file is missing, unreadable or not audio (the message names it).
    NonFiniteError
        The decoded audio holds NaN or infinite samples.
    ParameterError
        An option is out of range (e.g. ``channel`` beyond the file's count).
    ResourceLimitError
        The output could not be allocated (the message gives the size).

    Examples
    --------
    >>> y, sr = agl_fast.load("clip.mp3", sr=32000)  # doctest: +SKIP
    >>> y.shape  # doctest: +SKIP
    (2, 320000)
    """
    options = _decode_options(sr, mono, channel, offset, duration, max_duration, res_type)
    y, out_sr, _, _, _ = _native.load(
        _source(path, "path"), options, format=_format("format", format)
    )
    if y.shape[0] == 1:
        y = y[0]
    return y, int(out_sr)


#: Calls of :func:`duration` that decoded the stream because the header does
#: not state its length exactly, by format hint (the file's extension).
DURATION_DECODES: Counter[str] = Counter()
_log = logging.getLogger("agl_fast.audio")


def duration(path: AudioSource, *, format: str | None = None) -> float:
    """A file's length in seconds, from its header where that states it.

    WAV, FLAC, Ogg Vorbis and MP3 with a Xing/Info tag (less the encoder
    delay and padding of its LAME extension) are read from the header, as
    libsndfile reads them. Other files (MP3 without a tag, MP4/AAC, Opus,
    WAV whose sizes disagree with the file) are decoded: logged and counted
    in :data:`DURATION_DECODES`.

    Parameters
    ----------
    path : str, os.PathLike, bytes or binary file-like
        Audio file.
    format : str or None
        Format hint in place of the extension.

    Returns
    -------
    float
        Frames (samples per channel) divided by the file's sample rate, s.

    Raises
    ------
    AudioDecodeError
        The file is missing, unreadable or not audio.
    """
    src, hint = _source(path, "path"), _format("format", format)
    rate, _, frames = _native.probe(src, format=hint)
    if frames is not None:
        return float(frames) / rate
    kind = hint or (os.path.splitext(src)[1].lower().lstrip(".") if isinstance(src, str) else "")
    DURATION_DECODES[kind or "unknown"] += 1
    _log.info("duration: the header of %s does not state its length; decoding it", _label(src, 0))
    y, sr = load(src, sr=None, mono=True, format=hint)
    return float(y.shape[-1]) / sr


def _flag(name: str, v: Any) -> bool:
    if not isinstance(v, bool | np.bool_):
        raise ParameterError(f"{name} must be True or False, got {name}={v!r}")
    return bool(v)


def load_many(
    paths: Sequence[AudioSource],
    *,
    keys: Sequence[str] | None = None,
    sr: int | None = 32000,
    mono: bool = False,
    offset: float = 0.0,
    duration: float | None = None,
    channel: int | None = None,
    max_duration: float | None = None,
    res_type: str = "hq",
    n_threads: int | None = None,
    formats: Sequence[str | None] | None = None,
) -> pa.Table:
    """Decode many files in parallel into an Arrow table, one row per path.

    A file that fails becomes a row with a null ``samples`` and its error in
    ``error_type`` / ``error_message``; the call itself only raises for
    invalid options (or ``KeyboardInterrupt``).

    Parameters
    ----------
    paths : sequence of sources
        Files to decode: paths, ``bytes``-like objects or binary file-like
        objects (see :func:`load`), mixed freely.
    keys : sequence of str or None
        Row identities (default: the paths; ``<in-memory file #i, N bytes>``
        for a file given in memory).
    sr, mono, offset, duration, channel, max_duration, res_type
        As in :func:`load`.
    n_threads : int or None
        Worker threads (default: :func:`agl_fast.set_num_threads` or the
        CPU count); one file per task.
    formats : sequence of str or None, optional
        A format hint per source (``None`` entries: the extension or the
        content decides).

    Returns
    -------
    pyarrow.Table
        Columns ``key``, ``path`` (null for a file given in memory),
        ``samples`` (``list<list<float32>>`` ``[channels][n]``, or
        ``list<float32>`` when ``mono`` or ``channel`` is given), ``sr``,
        ``channels``, ``frames``, ``duration`` (seconds), ``source_sr``,
        ``source_channels``, ``truncated``, ``corrupt_frames`` (damaged lossy
        frames replaced by silence), ``error_type``, ``error_message``.
        Every integer column is int64.
    """
    str_paths, keys = _paths_and_keys(paths, keys)
    data, meta = _decode_batch(
        str_paths,
        formats=formats,
        join=True,
        sr=sr,
        mono=mono,
        channel=channel,
        offset=offset,
        duration=duration,
        max_duration=max_duration,
        res_type=res_type,
        n_threads=n_threads,
    )
    samples = samples_column(data, meta, flat=mono or channel is not None)
    table = meta_table(keys, str_paths, meta)
    return table.add_column(2, "samples", samples)


def load_arrays(
    paths: Sequence[AudioSource],
    *,
    keys: Sequence[str] | None = None,
    sr: int | None = 32000,
    mono: bool = False,
    offset: float = 0.0,
    duration: float | None = None,
    channel: int | None = None,
    max_duration: float | None = None,
    res_type: str = "hq",
    n_threads: int | None = None,
    formats: Sequence[str | None] | None = None,
) -> tuple[list[np.ndarray | None], pa.Table]:
    """Decode many files in parallel into one array per file.

    :func:`load_many` without the join into one Arrow column: each file's
    samples stay in the buffer the decoder wrote (no copy for mono output),
    which is what a pipeline that works file by file wants.

    Parameters
    ----------
    paths, keys, sr, mono, offset, duration, channel, max_duration, res_type, n_threads, formats
        As in :func:`load_many`.

    Returns
    -------
    arrays : list of np.ndarray [shape=(channels, n), dtype=float32] or None
        One entry per path; ``None`` where the file failed.
    table : pyarrow.Table
        :func:`load_many`'s table without the ``samples`` column, plus
        ``peak`` (max ``|x|``), ``rms``, ``clipped_fraction`` (share of
        samples with ``|x| >= 0.999``) and ``peak_fraction`` (share of
        samples with ``|x| == peak``) of each file's output over all its
        channels, taken in the decoder's finiteness pass (null for a failed
        file).
    """
    str_paths, keys = _paths_and_keys(paths, keys)
    data, meta = _decode_batch(
        str_paths,
        formats=formats,
        join=False,
        sr=sr,
        mono=mono,
        channel=channel,
        offset=offset,
        duration=duration,
        max_duration=max_duration,
        res_type=res_type,
        n_threads=n_threads,
    )
    arrays = [
        None if a is None else a.reshape(int(c), -1)
        for a, c in zip(data, meta["channels"], strict=True)
    ]
    import pyarrow as pa

    table = meta_table(keys, str_paths, meta)
    lv, failed = meta["levels"], meta["failed"]
    for k, name in enumerate(("peak", "rms", "clipped_fraction", "peak_fraction")):
        table = table.append_column(name, pa.array(lv[:, k], pa.float64(), mask=failed))
    return arrays, table


def _paths_and_keys(
    paths: Sequence[AudioSource], keys: Sequence[str] | None
) -> tuple[list[str | bytes], Sequence[str]]:
    if isinstance(paths, str | bytes | bytearray | memoryview | os.PathLike) or not isinstance(
        paths, Sequence
    ):
        raise ParameterError(
            "paths must be a sequence of sources (a list of paths, bytes or file-like "
            f"objects), got a single {type(paths).__name__}: wrap it in a list"
        )
    sources = [_source(p, f"paths[{i}]") for i, p in enumerate(paths)]
    if keys is None:
        return sources, [_label(s, i) for i, s in enumerate(sources)]
    if not hasattr(keys, "__len__") or isinstance(keys, str | bytes):
        raise ParameterError(f"keys must be a sequence of strings, got keys={type(keys).__name__}")
    if len(keys) != len(sources):
        n = len(keys)
        raise ParameterError(
            f"keys must have one entry per path, got {n} keys for {len(sources)} paths"
        )
    for i, k in enumerate(keys):
        text(f"keys[{i}]", k)
    return sources, keys


def _decode_batch(
    str_paths: list[str | bytes],
    *,
    formats: Sequence[str | None] | None,
    join: bool,
    sr: int | None,
    mono: bool,
    channel: int | None,
    offset: float,
    duration: float | None,
    max_duration: float | None,
    res_type: str,
    n_threads: int | None,
) -> tuple[Any, dict[str, Any]]:
    """The native batch decode: the sample data (joined or per file) and the
    per-file layout, metadata and errors."""
    if formats is not None and (
        isinstance(formats, str)
        or not hasattr(formats, "__len__")
        or len(formats) != len(str_paths)
    ):
        raise ParameterError(
            f"formats must be a sequence with one entry per path ({len(str_paths)}), "
            f"got {formats!r}"
        )
    out = _native.load_many(
        str_paths,
        _decode_options(sr, mono, channel, offset, duration, max_duration, res_type),
        n_threads=resolve_threads(n_threads),
        join=join,
        formats=None
        if formats is None
        else [_format(f"formats[{i}]", f) for i, f in enumerate(formats)],
    )
    data, chans, frames, srs, src_srs, src_chs, trunc, kinds, msgs, levels, corrupt, declared = out
    meta = {
        "channels": chans.astype(np.int64),
        "frames": frames.astype(np.int64),
        "sr": srs,
        "source_sr": src_srs,
        "source_channels": src_chs,
        "truncated": trunc,
        "kinds": kinds,
        "messages": msgs,
        "failed": np.array([k is not None for k in kinds], dtype=bool),
        "levels": levels,
        "corrupt_frames": corrupt,
        "decoded_fraction": _decoded_fraction(
            frames, srs, src_srs, declared, trunc, offset, duration
        ),
    }
    return data, meta


def _decoded_fraction(
    frames: np.ndarray,
    srs: Sequence[int],
    src_srs: Sequence[int],
    declared: Sequence[int | None],
    truncated: Sequence[bool],
    offset: float,
    duration: float | None,
) -> list[float | None]:
    """Share of the seconds a file's header declares (past ``offset``, up
    to ``duration``) that decoded: about 1 for a whole file, less for one
    cut short; None where nothing is declared or the read stopped on
    purpose (``max_duration``)."""
    out: list[float | None] = []
    for n, sr, src_sr, total, cut in zip(frames, srs, src_srs, declared, truncated, strict=True):
        if total is None or cut or not sr or not src_sr:
            out.append(None)
            continue
        expected = max(0.0, total / src_sr - offset)
        if duration is not None:
            expected = min(expected, duration)
        out.append(min(1.0, float(n) / sr / expected) if expected > 0 else None)
    return out


def resample(y: Any, *, orig_sr: int, target_sr: int, res_type: str = "hq") -> np.ndarray:
    """Resample ``y`` from ``orig_sr`` to ``target_sr`` Hz (librosa's names).

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (channels, n)]
        Audio (converted to float32).
    orig_sr, target_sr : int
        Rates in Hz.
    res_type : {"fast", "hq", "vhq"}
        Filter quality (see the module notes).

    Returns
    -------
    np.ndarray [shape=(ceil(n * target_sr / orig_sr),) or (channels, ...), dtype=float32]
    """
    rates = (_rate("orig_sr", orig_sr), _rate("target_sr", target_sr))
    if not isinstance(res_type, str):
        raise ParameterError(f"res_type must be a name, got res_type={res_type!r}")
    x = np.ascontiguousarray(array("y", y, np.float32))
    if x.ndim not in (1, 2):
        raise ShapeError(f"y must be 1-D or 2-D, got shape {x.shape}")
    out = _native.resample_array(np.atleast_2d(x), rates[0], rates[1], res_type)
    return out[0] if x.ndim == 1 else out
