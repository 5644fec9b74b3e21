"""What to fetch: the clips of a manifest, their URLs and files, and which of
them a rerun can keep."""

from __future__ import annotations

import logging
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .. import manifest
from ..alm.audio import file_hash
from ..exceptions import ParameterError
from .ledger import FetchRecord

__all__ = ["DEFAULT_BASE_URL", "Item", "clip_url", "keep_or_fetch", "read_items", "remove_partials"]

log = logging.getLogger("agl_fast.dataset")

#: Where the AGL1K recordings are served: ``{base}/{key}/{mp3name}`` (the
#: Internet Archive's download paths; each Aporee key is an item there).
DEFAULT_BASE_URL = "https://archive.org/download"
#: Longest ``mp3name`` accepted, in characters (a file-name limit).
_MAX_NAME = 255


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
        The manifest's duration, checked against the decoded one.
    problem : str or None
        Why the clip cannot be fetched (recorded as a ``bad_name`` failure).
    """

    key: str
    mp3name: str | None
    url: str
    dest: Path | None
    mp3seconds: float | None = None
    problem: str | None = None

    @property
    def part(self) -> Path:
        """The temporary file of a download (renamed to ``dest`` once verified)."""
        if self.dest is None:
            raise ParameterError(f"{self.key}: no destination ({self.problem})")
        return self.dest.with_name(f".{self.dest.name}.part")


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
    for key, name, s in zip(keys, names, secs, strict=True):
        name = None if name is None else str(name).strip()
        problem = _name_problem(name)
        keyed = manifest.keyed_audio_name(key, name)
        if problem is None and keyed is None:
            problem = f"key {key[:80]!r} cannot be a file name"
        ok = problem is None and name is not None and keyed is not None
        items.append(
            Item(
                key=key,
                mp3name=name,
                url=clip_url(base_url, key, name) if ok and name else "",
                dest=root / keyed if ok and keyed else None,
                mp3seconds=manifest.parse_number(s),
                problem=problem,
            )
        )
    shared = {n: c for n, c in Counter(i.mp3name for i in items if i.mp3name).items() if c > 1}
    if shared:
        log.info(
            "%d mp3name(s) belong to several keys (e.g. %s); each clip is stored by its key",
            len(shared),
            ", ".join(sorted(shared)[:3]),
        )
    return items


def keep_or_fetch(
    items: list[Item], done: dict[str, FetchRecord], verify: str = "hash"
) -> tuple[list[Item], list[Item]]:
    """Split ``items`` into those a rerun keeps and those it fetches.

    A clip is kept when its last record is ``ok`` and its file is still
    there with the recorded size and (``verify="hash"``) SHA-256. Every
    other clip is fetched: never fetched, failed, or a file that changed
    or went missing since (logged).

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
        same = it.dest.is_file() and it.dest.stat().st_size == rec.bytes
        if same and verify == "hash":
            same = file_hash(it.dest) == rec.sha256
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


def remove_partials(out: Path) -> int:
    """Delete the temporary files a killed run left in ``out``; returns their count."""
    n = 0
    for p in out.glob(".*.part"):
        if p.is_file():
            p.unlink()
            n += 1
    if n:
        log.info("%s: removed %d partial download(s) of an interrupted run", out, n)
    return n
