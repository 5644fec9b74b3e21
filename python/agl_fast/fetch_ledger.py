"""The fetch manifest: one JSON line per fetch outcome, appended and synced.

``agl-fast agl1k fetch`` records every file it stores, and every file it
could not get, as one line of ``fetch.jsonl`` in its output folder. Each line
is written whole and ``fsync``-ed before the next file is recorded, so the
manifest survives a killed process: a rerun reads it, trusts the files whose
size and SHA-256 still match their ``ok`` line and fetches the rest.

The last line of a key wins. A line cut short by a crash (the only place one
can be) is skipped and counted. A line is at most 64 KiB: a text field longer
than :data:`MAX_FIELD` characters (a hostile server's 65,000-character
redirect URL) is stored cut, with its length and SHA-256, so the line reads
back whole.

The format sits below its two users: :mod:`agl_fast.dataset` writes it and
:func:`agl_fast.manifest.resolve_audio` reads it to vouch for a fetched clip.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._internal.safe_files import open_no_follow
from .exceptions import ParameterError

__all__ = [
    "DURATION_TOLERANCE_REL",
    "DURATION_TOLERANCE_S",
    "LEDGER_NAME",
    "MAX_FIELD",
    "FetchRecord",
    "Ledger",
    "duration_agrees",
    "read_ledger",
]

log = logging.getLogger("agl_fast.dataset")

#: File name of the fetch manifest in the output folder.
LEDGER_NAME = "fetch.jsonl"
#: A decoded duration agrees with ``mp3seconds`` when they differ by at most
#: the larger of this many seconds ...
DURATION_TOLERANCE_S = 0.5
#: ... and this share of ``mp3seconds`` (MP3 encoder delay and padding move
#: a decoded length by some tens of milliseconds; a wrong recording differs
#: by seconds).
DURATION_TOLERANCE_REL = 0.01
#: Longest line read back from a manifest, in bytes (a longer one is damage).
_MAX_LINE = 1 << 16
#: Longest text field stored whole, in characters; a longer one is cut to
#: this length and followed by ``...[N chars, sha256 HEX]``. Five such fields
#: escaped at 6 bytes a character stay within the line limit.
MAX_FIELD = 2048
_TEXT_FIELDS = ("key", "mp3name", "url", "final_url", "path", "reason")


def _fit(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters, its length and its SHA-256."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{text[:limit]}...[{len(text)} chars, sha256 {digest}]"


def duration_agrees(decoded: float | None, expected: float | None) -> bool | None:
    """Whether a decoded duration matches the manifest's ``mp3seconds``
    (seconds, within :data:`DURATION_TOLERANCE_S` or
    :data:`DURATION_TOLERANCE_REL`, whichever is larger); None when either
    is unknown.

    Examples
    --------
    >>> duration_agrees(140.382, 140.387), duration_agrees(90.9, 105.5), duration_agrees(3.0, None)
    (True, False, None)
    """
    if decoded is None or expected is None:
        return None
    if not (math.isfinite(decoded) and math.isfinite(expected)):
        return None
    tol = max(DURATION_TOLERANCE_S, DURATION_TOLERANCE_REL * abs(expected))
    return abs(decoded - expected) <= tol


@dataclass
class FetchRecord:
    """One line of the fetch manifest.

    Attributes
    ----------
    key : str
        The clip's key (its identity; the file is ``path``).
    mp3name : str or None
        The released file name (not unique across keys).
    url : str
        The URL requested first.
    status : str
        ``ok`` (stored and verified) or ``failed``.
    path : str or None
        The stored file, relative to the output folder (``{key}.mp3``).
    final_url : str or None
        The URL that answered, after redirects.
    bytes : int or None
        Size of the stored file.
    sha256 : str or None
        SHA-256 of the stored file, hex.
    seconds : float or None
        Duration decoded by agl-fast's own decoder, in seconds.
    mp3seconds : float or None
        The manifest's ``mp3seconds``.
    duration_ok : bool or None
        :func:`duration_agrees` of the two (None: one is unknown).
    error_type : str or None
        The failure's kind: ``http_404``, ``http_503``, ``too_large``,
        ``truncated``, ``timeout``, ``connection``, ``redirects``,
        ``redirect_refused``, ``deadline``, ``not_audio``, ``bad_name``,
        ``retry_after``, ``encoding``, ``bad_url``.
    reason : str or None
        The failure in words.
    attempts : int
        Requests made for this file in this run.
    """

    key: str
    mp3name: str | None
    url: str
    status: str
    path: str | None = None
    final_url: str | None = None
    bytes: int | None = None
    sha256: str | None = None
    seconds: float | None = None
    mp3seconds: float | None = None
    duration_ok: bool | None = None
    error_type: str | None = None
    reason: str | None = None
    attempts: int = 0

    def to_json(self) -> str:
        """The record as one JSON line (without the newline), within the line
        limit: over-long text fields cut (:data:`MAX_FIELD`)."""
        d = dataclasses.asdict(self)
        for limit in (MAX_FIELD, 256):
            for name in _TEXT_FIELDS:
                if isinstance(d[name], str):
                    d[name] = _fit(d[name], limit)
            line = json.dumps(d, ensure_ascii=False, allow_nan=False)
            if len(line.encode("utf-8", "surrogatepass")) < _MAX_LINE:
                break
        return line

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FetchRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class Ledger:
    """The fetch manifest of one output folder (``{out}/fetch.jsonl``).

    Parameters
    ----------
    out : Path
        The output folder (created when missing).
    """

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / LEDGER_NAME
        self.records, self.damaged = _read_records(self.path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._fh = os.fdopen(open_no_follow(self.path, flags), "a", encoding="utf-8")
        _lock(self._fh, out)
        if self.damaged and not _ends_a_line(self.path):
            # end the torn line, so the next record starts a line of its own
            self._fh.write("\n")
            self._fh.flush()

    def append(self, rec: FetchRecord) -> None:
        """Write ``rec`` as one line and sync it to disk before returning."""
        line = rec.to_json()
        self._fh.write(line + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        stored = FetchRecord.from_dict(json.loads(line))  # as a rerun reads it
        self.records[stored.key] = stored

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lock(fh: Any, out: Path) -> None:
    """Hold an exclusive lock on the open manifest (released when the process
    ends, also by ``kill -9``): two fetches never write one folder."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise ParameterError(f"another fetch is writing to {out}") from None


def _ends_a_line(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def _read_records(path: Path) -> tuple[dict[str, FetchRecord], int]:
    """The last record of each key, and the count of damaged lines skipped."""
    out: dict[str, FetchRecord] = {}
    damaged = 0
    if not os.path.lexists(path):
        return out, 0
    with os.fdopen(open_no_follow(path), "rb") as fh:
        for raw in fh:
            rec = _parse_line(raw)
            if rec is None:
                damaged += 1
                continue
            out[rec.key] = rec
    if damaged:
        log.warning(
            "%s: %d damaged line(s) skipped (a run cut short); their files are fetched again",
            path,
            damaged,
        )
    return out, damaged


def _parse_line(raw: bytes) -> FetchRecord | None:
    if len(raw) > _MAX_LINE or not raw.endswith(b"\n"):
        return None
    try:
        d = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(d, dict) or not isinstance(d.get("key"), str):
        return None
    try:
        return FetchRecord.from_dict(d)
    except TypeError:
        return None


def read_ledger(out: str | Path) -> dict[str, FetchRecord]:
    """The fetch manifest of ``out`` (the last record of each key).

    Raises
    ------
    ParameterError
        When ``out`` holds no fetch manifest.
    """
    path = Path(out) / LEDGER_NAME
    if not os.path.lexists(path):
        raise ParameterError(f"no fetch manifest in {out} (expected {LEDGER_NAME})")
    return _read_records(path)[0]
