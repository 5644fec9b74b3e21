"""What to fetch: the clips of a manifest, their URLs and files, and which of
them a rerun can keep."""

from __future__ import annotations

import hashlib
import logging
import math
import os
import stat
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .. import manifest
from .._internal.safe_files import open_no_follow
from ..exceptions import AglIOError, ParameterError
from ..fetch_ledger import FetchRecord

__all__ = [
    "ASIDE_SUFFIX",
    "DEFAULT_BASE_URL",
    "Item",
    "clip_url",
    "keep_or_fetch",
    "mp3seconds_problem",
    "read_items",
    "set_aside",
]

log = logging.getLogger("agl_fast.dataset")

#: Where the AGL1K recordings are served: ``{base}/{key}/{mp3name}`` (the
#: Internet Archive's download paths; each Aporee key is an item there).
DEFAULT_BASE_URL = "https://archive.org/download"
#: Longest ``mp3name`` accepted, in characters (a file-name limit).
_MAX_NAME = 255
#: Suffix of a stored file that the fetch manifest no longer vouches for,
#: moved aside (``.{key}.mp3.unverified``) before it is fetched again.
ASIDE_SUFFIX = ".unverified"


@dataclass(frozen=True)
class Item:
    """One clip to fetch.

    Attributes
    ----------
    key : str
        The clip's key.
    mp3name : str or None
        Its released file name.
    url : str
        Where it is fetched from (``{base_url}/{key}/{mp3name}``).
    dest : Path or None
        Where it is stored (``{out}/{key}{suffix}``); None when the key or
        the name cannot be used (``problem`` says why).
    mp3seconds : float or None
        The manifest's duration (seconds, finite and >= 0), checked against
        the decoded one; None when missing or invalid.
    problem : str or None
        Why the clip cannot be fetched (recorded as a ``bad_name`` failure).
    mp3seconds_problem : str or None
        Why the manifest's ``mp3seconds`` was set aside (the clip is still
        fetched, its duration check is unknown).
    """

    key: str
    mp3name: str | None
    url: str
    dest: Path | None
    mp3seconds: float | None = None
    problem: str | None = None
    mp3seconds_problem: str | None = None

    @property
    def part(self) -> Path:
        """The temporary file of a download (renamed to ``dest`` once verified)."""
        if self.dest is None:
            raise ParameterError(f"{self.key}: no destination ({self.problem})")
        return self.dest.with_name(f".{self.dest.name}.part")

    @property
    def aside(self) -> Path:
        """Where a stored file the manifest no longer vouches for is moved."""
        if self.dest is None:
            raise ParameterError(f"{self.key}: no destination ({self.problem})")
        return self.dest.with_name(f".{self.dest.name}{ASIDE_SUFFIX}")


def clip_url(base_url: str, key: str, mp3name: str) -> str:
    """``{base_url}/{key}/{mp3name}``, each part percent-encoded.

    Examples
    --------
    >>> clip_url("https://archive.org/download/", "aporee_1_2", "a b.mp3")
    'https://archive.org/download/aporee_1_2/a%20b.mp3'
    """
    return f"{base_url.rstrip('/')}/{quote(key, safe='')}/{quote(mp3name, safe='')}"


def _name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a plain file name (None when it is one)."""
    if not name:
        return "no mp3name"
    if len(name) > _MAX_NAME:
        return f"mp3name longer than {_MAX_NAME} characters"
    if "/" in name or "\\" in name or name in (".", ".."):
        return f"mp3name {name[:80]!r} is not a plain file name"
    if any(unicodedata.category(c).startswith("C") for c in name):
        return f"mp3name {name[:80]!r} holds control characters"
    return None


def mp3seconds_problem(value: object) -> tuple[float | None, str | None]:
    """A manifest's ``mp3seconds`` cell as seconds, or None and the reason
    it cannot be one (not a number, not finite, negative); (None, None) when
    the cell is empty.

    Examples
    --------
    >>> mp3seconds_problem("12.5"), mp3seconds_problem(None)
    ((12.5, None), (None, None))
    >>> mp3seconds_problem(-1.0)
    (None, 'mp3seconds must be a finite number >= 0, got -1.0')
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    secs = manifest.parse_number(value)
    if secs is None or not math.isfinite(secs) or secs < 0:
        return None, f"mp3seconds must be a finite number >= 0, got {str(value)[:40]}"
    return secs, None


def read_items(
    path: str | Path, out: str | Path, base_url: str = DEFAULT_BASE_URL, limit: int | None = None
) -> list[Item]:
    """The clips of a manifest (the released ``geoLocalization_schema.csv``
    or any CSV/Parquet with ``key`` and ``mp3name``), read by
    :func:`agl_fast.manifest.read_manifest` (the 20-field repair, unique keys).

    Parameters
    ----------
    path : str or Path
        The manifest.
    out : str or Path
        The output folder; each clip's file is
        ``out / manifest.keyed_audio_name(key, mp3name)``.
    base_url : str
        The download root.
    limit : int, optional
        The first ``limit`` clips only.

    Raises
    ------
    ParameterError
        An unreadable manifest, or one without an ``mp3name`` column.
    """
    table = manifest.read_manifest(path)
    if "mp3name" not in table.column_names:
        raise ParameterError(f"{path}: a fetch needs an 'mp3name' column; got {table.column_names}")
    keys = table.column(manifest.KEY).to_pylist()
    names = table.column("mp3name").to_pylist()
    secs = (
        table.column("mp3seconds").to_pylist()
        if "mp3seconds" in table.column_names
        else [None] * len(keys)
    )
    if limit is not None:
        keys, names, secs = keys[:limit], names[:limit], secs[:limit]
    root = Path(out)
    items = []
    bad_secs = 0
    for key, name, s in zip(keys, names, secs, strict=True):
        name = None if name is None else str(name).strip()
        problem = _name_problem(name)
        keyed = manifest.keyed_audio_name(key, name)
        if problem is None and keyed is None:
            problem = f"key {key[:80]!r} cannot be a file name"
        ok = problem is None and name is not None and keyed is not None
        seconds, secs_problem = mp3seconds_problem(s)
        bad_secs += secs_problem is not None
        items.append(
            Item(
                key=key,
                mp3name=name,
                url=clip_url(base_url, key, name) if ok and name else "",
                dest=root / keyed if ok and keyed else None,
                mp3seconds=seconds,
                problem=problem,
                mp3seconds_problem=secs_problem,
            )
        )
    if bad_secs:
        example = next(i for i in items if i.mp3seconds_problem is not None)
        log.warning(
            "%s: %d row(s) have an invalid mp3seconds (e.g. %s: %s); their files are fetched "
            "without the duration check",
            path, bad_secs, example.key, example.mp3seconds_problem,
        )  # fmt: skip
    shared = {n: c for n, c in Counter(i.mp3name for i in items if i.mp3name).items() if c > 1}
    if shared:
        log.info(
            "%d mp3name(s) belong to several keys (e.g. %s); each clip is stored by its key",
            len(shared),
            ", ".join(sorted(shared)[:3]),
        )
    return items


def _stored(path: Path) -> os.stat_result | None:
    """The status of a stored file: None when missing or not a regular file
    (a symbolic link is never a stored file)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _hash(path: Path) -> str:
    """SHA-256 of a file, hex, read without following a symbolic link."""
    h = hashlib.sha256()
    with os.fdopen(open_no_follow(path), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def keep_or_fetch(
    items: list[Item], done: dict[str, FetchRecord], verify: str = "hash"
) -> tuple[list[Item], list[Item]]:
    """Split ``items`` into those a rerun keeps and those it fetches.

    A clip is kept when its last record is ``ok`` and its file is still
    there, a regular file with the recorded size and (``verify="hash"``)
    SHA-256. Every other clip is fetched: never fetched, failed, or a file
    that changed or went missing since (logged).

    Returns
    -------
    (kept, todo) : tuple of lists
    """
    if verify not in ("hash", "size"):
        raise ParameterError(f"verify must be 'hash' or 'size', got {verify!r}")
    kept: list[Item] = []
    todo: list[Item] = []
    changed: list[str] = []
    for it in items:
        rec = done.get(it.key)
        if rec is None or rec.status != "ok" or it.dest is None:
            todo.append(it)
            continue
        st = _stored(it.dest)
        same = st is not None and st.st_size == rec.bytes
        if same and verify == "hash":
            same = _hash(it.dest) == rec.sha256
        (kept if same else todo).append(it)
        if not same:
            changed.append(it.key)
    if changed:
        log.warning(
            "%d stored file(s) are missing or differ from the fetch manifest and are fetched "
            "again (e.g. %s)",
            len(changed),
            ", ".join(changed[:3]),
        )
    return kept, todo


def set_aside(todo: list[Item]) -> int:
    """Move every stored file of ``todo`` (files the fetch manifest does not
    vouch for: changed, unrecorded, or whose last line is a failure) to
    :attr:`Item.aside`, so that no command uses it while, or after, it is
    fetched again; returns how many were moved (logged).
    """
    moved: list[str] = []
    for it in todo:
        if it.dest is None or not os.path.lexists(it.dest):
            continue
        if os.path.isdir(it.dest) and not os.path.islink(it.dest):
            continue
        try:
            os.replace(it.dest, it.aside)  # within the folder; a link moves as a link
        except OSError as exc:
            raise AglIOError(f"cannot move {it.dest} aside to {it.aside.name}: {exc}") from None
        moved.append(it.key)
    if moved:
        log.warning(
            "%d stored file(s) not vouched for by the fetch manifest moved aside as "
            ".{name}%s before fetching them again (e.g. %s)",
            len(moved), ASIDE_SUFFIX, ", ".join(moved[:3]),
        )  # fmt: skip
    return len(moved)
