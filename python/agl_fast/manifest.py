"""Manifests: the one reader and writer of clip tables (CSV or Parquet).

Every step of the AGL1K method reads and writes clip tables through this
module, so the output of one step is a valid input of the next: ``curate``
writes ``key``/``path``, the tagger adds fractions, ``localizability select``
writes a benchmark in the AGL1K schema, ``query`` and ``evaluate`` read it.

Rules, in one place:

* **Identity** is the ``key`` column. A table without ``key`` may name it by
  one of :data:`KEY_ALIASES` (the alias is renamed ``key``). Keys are
  strings, stripped, non-empty and unique (:class:`ParameterError` otherwise).
* **Audio** is found through the first column of :data:`PATH_ALIASES` the
  table has; relative paths resolve against an audio directory. With an
  audio directory, a clip's file is looked up **by key first**: the layout
  ``agl-fast agl1k fetch`` writes, ``{audio_dir}/{key}{suffix}``
  (:func:`keyed_audio_name`), then by the path cell. Two keys resolving to
  one file is a warning, or an error when strict (:func:`resolve_audio`).
  A file looked up in the audio directory is read only if it lies inside it
  once symbolic links are resolved, and, in a fetch folder, only if its fetch
  manifest vouches for it (a refused clip has no audio; strict: an error).
* **The AGL1K schema** (:data:`AGL1K_COLUMNS`, 20 columns). The released
  ``geoLocalization_schema.csv`` names 19 columns in its header
  (:data:`AGL1K_HEADER`) but every row has 20 fields: its header name
  ``channel_environment_and_background`` covers the two columns ``channel``
  and ``environment_and_background``. The reader repairs that header; the
  writer writes the 20 names.
* **Types**: CSV cells of :data:`NUMERIC_COLUMNS` become float64 (empty or
  unparseable cells null), other cells stay strings with empty cells null.
  Parquet is read as written.
* **Speech split**: a clip is *speech* when its AudioSet *Human sounds*
  fraction (:data:`SPEECH_COLUMN`) is ``>= SPEECH_THRESHOLD`` (0.1), the
  AGL1K rule.

>>> from agl_fast.manifest import read_manifest, write_manifest
>>> table = read_manifest("geoLocalization_schema.csv")  # doctest: +SKIP
>>> write_manifest(table, "benchmark.parquet")  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import logging
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._internal.safe_files import atomic_file, is_inside
from .audio import AUDIO_EXTENSIONS
from .coords import check_column, validate_coordinates
from .exceptions import ParameterError
from .fetch_ledger import LEDGER_NAME, FetchRecord, read_ledger

__all__ = [
    "AGL1K_COLUMNS",
    "AGL1K_HEADER",
    "COORDINATE_PROBLEM",
    "GROUP_COLUMNS",
    "KEY",
    "KEY_ALIASES",
    "NUMERIC_COLUMNS",
    "PATH",
    "PATH_ALIASES",
    "SPEECH_COLUMN",
    "SPEECH_THRESHOLD",
    "STRICT_AUDIO_HELP",
    "audio_paths",
    "keyed_audio_name",
    "parse_number",
    "path_column",
    "read_manifest",
    "resolve_audio",
    "select_columns",
    "speech_mask",
    "write_manifest",
]

log = logging.getLogger("agl_fast.manifest")

#: The identity column.
KEY = "key"
#: Column :func:`read_manifest` adds when some row's ``latitude`` or
#: ``longitude`` is present but not valid (not numeric, not finite, out of
#: range): the reason, null on good rows.
COORDINATE_PROBLEM = "coordinate_problem"
#: The coordinate columns, checked by :func:`agl_fast.coords.validate_coordinates`.
COORDINATE_COLUMNS = ("latitude", "longitude")
#: The audio path column ``curate`` writes.
PATH = "path"
#: Other names of the key column, in order of preference.
KEY_ALIASES: tuple[str, ...] = ("key", "question_id", "id")
#: Names of the audio path column, in order of preference.
PATH_ALIASES: tuple[str, ...] = ("path", "mp3name", "file", "filename", "audio")

#: The AudioSet top-level group fractions of the AGL1K schema, in file order.
GROUP_COLUMNS: tuple[str, ...] = (
    "human_sounds",
    "animal",
    "music",
    "natural_sounds",
    "channel",
    "environment_and_background",
    "sounds_of_things",
    "source_ambiguous_sounds",
)
#: The 20 columns of the AGL1K schema, in file order.
AGL1K_COLUMNS: tuple[str, ...] = (
    "key",
    "short_key",
    "longitude",
    "latitude",
    "altitude",
    "description",
    "title",
    "mp3name",
    "mp3seconds",
    "city",
    "country",
    "continent",
    *GROUP_COLUMNS,
)
#: The header of the released CSV (19 names for 20 fields).
AGL1K_HEADER: tuple[str, ...] = (
    *AGL1K_COLUMNS[:16],
    "channel_environment_and_background",
    *AGL1K_COLUMNS[18:],
)
_SPLIT_HEADERS = {"channel_environment_and_background": ("channel", "environment_and_background")}

#: Columns parsed as numbers when read from CSV.
NUMERIC_COLUMNS: frozenset[str] = frozenset(
    {
        "longitude",
        "latitude",
        "altitude",
        "mp3seconds",
        "duration",
        "speech_fraction",
        "l_k",
        *GROUP_COLUMNS,
        "channel_environment_and_background",
    }
)

#: Column of the AudioSet *Human sounds* fraction that splits speech clips.
SPEECH_COLUMN = "human_sounds"
#: A clip is speech when ``SPEECH_COLUMN >= SPEECH_THRESHOLD``.
SPEECH_THRESHOLD = 0.1


def parse_number(v: object) -> float | None:
    """A numeric manifest cell (text or a number) as a float, or None when it
    is empty or not a finite number. The one rule for the numeric columns a
    manifest carries; coordinates are checked by :mod:`agl_fast.coords`.

    Examples
    --------
    >>> parse_number(" 12.5 "), parse_number(""), parse_number("n/a")
    (12.5, None, None)
    """
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        v = v.strip()
        if not v:
            return None
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return x if math.isfinite(x) else None


#: Largest CSV cell read, in characters (a long description is a few KB; the
#: ``csv`` module's own default limit is 128 KiB).
MAX_CSV_CELL = 1 << 24


def _read_csv(path: Path) -> pa.Table:
    """The rows of a CSV manifest: UTF-8 (a byte-order mark is skipped), cells
    up to :data:`MAX_CSV_CELL` characters; anything else a ParameterError."""
    if csv.field_size_limit() < MAX_CSV_CELL:
        csv.field_size_limit(MAX_CSV_CELL)  # process-wide; only ever raised
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            rows = list(csv.reader(fh))
    except UnicodeDecodeError as exc:
        raise ParameterError(
            f"manifest {path}: not UTF-8 text ({exc.reason}); save it as UTF-8"
        ) from None
    except csv.Error as exc:
        raise ParameterError(f"manifest {path}: not a readable CSV file ({exc})") from None
    if not rows:
        raise ParameterError(f"manifest {path} is empty")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    widths = {len(r) for r in body}
    width = max(widths, default=len(header))
    if width > len(header):
        for name, parts in _SPLIT_HEADERS.items():
            if name in header and width - len(header) == len(parts) - 1:
                i = header.index(name)
                header = header[:i] + list(parts) + header[i + 1 :]
    if widths - {len(header)}:
        raise ParameterError(
            f"manifest {path}: the header names {len(header)} columns but rows have "
            f"{sorted(widths)} fields"
        )
    cols: dict[str, pa.Array] = {}
    for i, name in enumerate(header):
        cells = [r[i] for r in body]
        if name in COORDINATE_COLUMNS:
            # raw text: _checked_coordinates parses it and names bad values
            cols[name] = pa.array([c if c.strip() else None for c in cells], pa.string())
        elif name in NUMERIC_COLUMNS:
            cols[name] = pa.array([parse_number(c) for c in cells], pa.float64())
        else:
            cols[name] = pa.array([c if c.strip() else None for c in cells], pa.string())
    if len(cols) != len(header):
        raise ParameterError(f"manifest {path}: duplicated column names in {header}")
    return pa.table(cols)


def _with_key(table: pa.Table, where: str) -> pa.Table:
    name = next((c for c in KEY_ALIASES if c in table.column_names), None)
    if name is None:
        raise ParameterError(
            f"{where}: a manifest needs a key column, one of {list(KEY_ALIASES)}; "
            f"got {table.column_names}"
        )
    keys = ["" if v is None else str(v).strip() for v in table.column(name).to_pylist()]
    empty = sum(1 for k in keys if not k)
    if empty:
        raise ParameterError(f"{where}: {empty} row(s) have an empty {name!r}")
    seen: set[str] = set()
    dups = sorted({k for k in keys if k in seen or seen.add(k)})  # type: ignore[func-returns-value]
    if dups:
        raise ParameterError(
            f"{where}: keys must be unique, got {len(dups)} duplicated key(s), e.g. {dups[:3]}"
        )
    i = table.column_names.index(name)
    return table.set_column(i, KEY, pa.array(keys, pa.string()))


def read_manifest(path: str | Path) -> pa.Table:
    """Read a manifest (``.csv``, or ``.parquet`` / ``.pq``).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    pa.Table
        One row per clip, with a unique string ``key`` column first in its
        original position (renamed from an alias when needed), the AGL1K
        header repaired, CSV numbers as float64.

    Raises
    ------
    ParameterError
        Missing file, unknown suffix, no key column, empty or duplicated
        keys, rows whose field count disagrees with the header.
    """
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"manifest not found: {p}")
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            table = pq.read_table(p)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ParameterError(f"manifest {p}: not a readable Parquet file ({exc})") from None
    elif suffix == ".csv":
        table = _read_csv(p)
    else:
        raise ParameterError(
            f"manifest {p.name}: unknown format {suffix!r}; allowed: .csv, .parquet, .pq"
        )
    return _checked_coordinates(_with_key(table, str(p)), str(p))


def _checked_coordinates(table: pa.Table, where: str) -> pa.Table:
    """``latitude``/``longitude`` as float64 degrees (null where missing or
    invalid, never wrapped), plus :data:`COORDINATE_PROBLEM` when a row has
    an invalid value."""
    present = [c for c in COORDINATE_COLUMNS if c in table.column_names]
    if len(present) == 2:
        lat, lon, reasons = validate_coordinates(
            table.column("latitude"), table.column("longitude")
        )
        checked = {"latitude": lat, "longitude": lon}
    elif present:
        vals, reasons = check_column(table.column(present[0]), present[0])
        checked = {present[0]: vals}
    else:
        return table
    for name, vals in checked.items():
        i = table.column_names.index(name)
        table = table.set_column(i, name, pa.array(vals, pa.float64(), mask=np.isnan(vals)))
    bad = sum(r is not None for r in reasons)
    if bad:
        first = next(r for r in reasons if r is not None)
        log.warning(
            "%s: %d of %d rows have invalid coordinates (e.g. %s)", where, bad, len(reasons), first
        )
        if COORDINATE_PROBLEM in table.column_names:
            table = table.drop_columns([COORDINATE_PROBLEM])
        table = table.append_column(COORDINATE_PROBLEM, pa.array(reasons, pa.string()))
    return table


def write_manifest(table: pa.Table, path: str | Path) -> Path:
    """Write ``table`` as CSV or Parquet (by the suffix of ``path``).

    The table must have a unique ``key`` column. CSV is written with one
    header name per column (the AGL1K schema with its 20 names), nulls as
    empty cells. The file appears whole (written under a temporary name,
    then renamed; never written through a symlink, one leading out of the folder refused).
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ParameterError(
            f"manifest {p.name}: unknown format {suffix!r}; allowed: .csv, .parquet"
        )
    table = _with_key(table, "write_manifest")
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(p, "w" if suffix == ".csv" else "wb", newline="") as fh:
        if suffix == ".csv":
            cols = [table.column(c).to_pylist() for c in table.column_names]
            w = csv.writer(fh)
            w.writerow(table.column_names)
            for row in zip(*cols, strict=True):
                w.writerow(["" if v is None else _cell(v) for v in row])
        else:
            pq.write_table(table, fh)
    return p


def _cell(v: object) -> str:
    if isinstance(v, float):
        return "" if not math.isfinite(v) else repr(v)
    if isinstance(v, (list, dict)):
        raise ParameterError("nested columns (lists, structs) can only be written to Parquet")
    return str(v)


def path_column(table: pa.Table) -> str | None:
    """Name of the audio path column (first of :data:`PATH_ALIASES` present)."""
    return next((c for c in PATH_ALIASES if c in table.column_names), None)


def keyed_audio_name(key: str, name: str | None = None) -> str | None:
    """File name of a clip stored by its key: ``{key}{suffix}``, the suffix
    (lower-cased) taken from ``name`` (the released ``mp3name``), ``.mp3``
    when ``name`` has no audio suffix. The layout ``agl-fast agl1k fetch``
    writes and the first place :func:`resolve_audio` looks.

    Returns None when ``key`` cannot be a file name (empty, ``.``/``..``, a
    path separator, a character outside ``A-Z a-z 0-9 . _ -``, longer than
    200 characters): such a clip is found by its path cell only.

    Examples
    --------
    >>> keyed_audio_name("aporee_32619_37498", "STE001.mp3")
    'aporee_32619_37498.mp3'
    >>> keyed_audio_name("../x", "a.mp3") is None
    True
    """
    if not _SAFE_KEY.fullmatch(key) or key in (".", ".."):
        return None
    suffix = Path(name).suffix.lower() if name else ""
    return key + (suffix if suffix in AUDIO_EXTENSIONS else ".mp3")


#: Help of the ``--strict`` flag of every command that takes ``--audio-dir``.
STRICT_AUDIO_HELP = (
    "refuse a manifest in which two keys resolve to one audio file, or a clip's file lies "
    "outside --audio-dir or is not vouched for by its fetch.jsonl (default: a warning; "
    "such a clip has no audio)"
)
_SAFE_KEY = re.compile(r"[A-Za-z0-9._-]{1,200}")


def resolve_audio(
    keys: Sequence[str],
    names: Sequence[object],
    audio_dir: str | Path | None = None,
    *,
    strict: bool = False,
    allow_outside: bool = False,
    refused: dict[str, str] | None = None,
) -> list[Path | None]:
    """The audio file of each clip: the one rule every command that takes
    ``--audio-dir`` follows.

    With ``audio_dir``, the key comes first: ``{audio_dir}/{key}{suffix}``
    (:func:`keyed_audio_name`) when that file exists. Otherwise the path
    cell (``mp3name``, ``path``...), resolved against ``audio_dir`` when
    relative. A row with an empty cell has no audio (None).

    A file looked up in ``audio_dir`` (by key, or by a relative cell) is
    refused when, symbolic links resolved, it lies outside ``audio_dir``
    (unless ``allow_outside``). When ``audio_dir`` holds a fetch manifest
    (``fetch.jsonl`` of ``agl-fast agl1k fetch``), a file found by key is
    refused unless the key's last line is ``ok`` with the file's size. A
    refused clip has no audio (None, a warning names it), or with
    ``strict`` the call raises. An absolute path cell is used as written.

    Parameters
    ----------
    keys : sequence of str
        The clips' keys.
    names : sequence
        The path cell of each clip (None or empty: no audio).
    audio_dir : str or Path, optional
        Folder of the clips (the fetch output, or a flat folder of files).
    strict : bool
        Raise when two keys resolve to one existing file, or a file is refused.
    allow_outside : bool
        Read files of ``audio_dir`` that lead outside it (symbolic links,
        ``..`` in a cell).
    refused : dict, optional
        Filled with the reason each refused clip has no audio, by key.

    Returns
    -------
    list of Path or None
        One entry per key, in order.

    Raises
    ------
    ParameterError
        ``strict`` and two keys share one file or a file is refused (the keys
        named), or ``keys`` and ``names`` differ in length.
    """
    if len(keys) != len(names):
        raise ParameterError(f"resolve_audio: {len(keys)} keys but {len(names)} path cells")
    base = Path(audio_dir) if audio_dir is not None else None
    check = _AudioDirCheck(base, allow_outside)
    out: list[Path | None] = []
    by_key = 0
    for key, v in zip(keys, names, strict=True):
        cell = None if v is None else str(v).strip()
        if not cell:
            out.append(None)
            continue
        f = Path(cell)
        keyed = keyed_audio_name(str(key), cell) if base is not None else None
        if keyed is not None and base is not None and os.path.lexists(base / keyed):
            found = check.keyed(str(key), base / keyed)
            if found is not None or str(key) in check.refused:
                out.append(found)
                by_key += found is not None
                continue
        if base is None or f.is_absolute():
            out.append(f)
        else:
            out.append(check.relative(str(key), base / f))
    if base is not None:
        log.info("audio of %d of %d clips found by key in %s", by_key, len(out), base)
    check.report(strict, refused)
    _check_shared(keys, out, strict)
    return out


class _AudioDirCheck:
    """The refusals of :func:`resolve_audio` in one audio directory."""

    def __init__(self, base: Path | None, allow_outside: bool) -> None:
        self.base = base
        self.allow_outside = allow_outside
        self.refused: dict[str, str] = {}
        self.ledger: dict[str, FetchRecord] | None = None
        if base is not None and os.path.lexists(base / LEDGER_NAME):
            self.ledger = read_ledger(base)

    def _outside(self, key: str, path: Path) -> bool:
        assert self.base is not None
        if self.allow_outside or is_inside(path, self.base):
            return False
        self.refused[key] = f"{path.name} leads outside {self.base}"
        return True

    def keyed(self, key: str, path: Path) -> Path | None:
        """``path`` (the key's file), or None: refused (recorded) or not a file."""
        if self._outside(key, path):
            return None
        if self.ledger is not None:
            rec = self.ledger.get(key)
            if rec is None:
                self.refused[key] = f"{path.name} has no line in its fetch.jsonl"
            elif rec.status != "ok":
                kind = f" ({rec.error_type})" if rec.error_type else ""
                self.refused[key] = f"the last fetch of {path.name} failed{kind}"
            elif not path.is_file() or path.stat().st_size != rec.bytes:
                self.refused[key] = f"{path.name} changed since it was fetched"
            if key in self.refused:
                return None
        return path if path.is_file() else None

    def relative(self, key: str, path: Path) -> Path | None:
        return None if self._outside(key, path) else path

    def report(self, strict: bool, into: dict[str, str] | None) -> None:
        """Warn (``strict``: raise) naming the refused clips; copy the reasons ``into``."""
        if into is not None:
            into.update(self.refused)
        if not self.refused:
            return
        shown = "; ".join(f"{k}: {why}" for k, why in list(self.refused.items())[:5])
        more = f"; {len(self.refused) - 5} more" if len(self.refused) > 5 else ""
        msg = (
            f"{len(self.refused)} clip(s) refused in {self.base} ({shown}{more}); a clip is read "
            "only inside the audio directory and, in a fetch folder, when fetch.jsonl vouches "
            "for it (rerun agl-fast agl1k fetch)"
        )
        if strict:
            raise ParameterError(msg)
        log.warning("%s; those clips have no audio", msg)


def _check_shared(keys: Sequence[str], paths: Sequence[Path | None], strict: bool) -> None:
    """Warn (``strict``: raise) when two keys resolve to one existing file."""
    owners: dict[str, list[str]] = {}
    for key, p in zip(keys, paths, strict=True):
        if p is not None and p.is_file():
            owners.setdefault(os.path.realpath(p), []).append(str(key))
    shared = {f: ks for f, ks in owners.items() if len(ks) > 1}
    if not shared:
        return
    shown = "; ".join(f"{Path(f).name}: {', '.join(ks)}" for f, ks in list(shared.items())[:5])
    more = f"; {len(shared) - 5} more" if len(shared) > 5 else ""
    msg = (
        f"{len(shared)} audio file(s) are shared by several keys, so those clips are heard "
        f"as one recording ({shown}{more}); fetch them by key (agl-fast agl1k fetch)"
    )
    if strict:
        raise ParameterError(msg)
    log.warning("%s", msg)


def audio_paths(
    table: pa.Table,
    audio_dir: str | Path | None = None,
    *,
    strict: bool = False,
    allow_outside: bool = False,
) -> list[Path | None]:
    """Audio path of each row, by :func:`resolve_audio` (key first, then the
    path column resolved against ``audio_dir`` when relative; None where the
    cell is empty or the file is refused).

    Raises :class:`ParameterError` when the table has no path column, or
    ``strict`` and two keys resolve to one file or a file is refused.
    """
    col = path_column(table)
    if col is None:
        raise ParameterError(
            f"a manifest needs a path column, one of {list(PATH_ALIASES)}; got {table.column_names}"
        )
    if KEY in table.column_names:
        keys = [str(k) for k in table.column(KEY).to_pylist()]
    else:
        keys = [f"row {i}" for i in range(table.num_rows)]
    cells = table.column(col).to_pylist()
    return resolve_audio(keys, cells, audio_dir, strict=strict, allow_outside=allow_outside)


def speech_mask(table: pa.Table, column: str = SPEECH_COLUMN) -> list[bool | None]:
    """Speech flag of each row (``column >= SPEECH_THRESHOLD``; None where unknown)."""
    if column not in table.column_names:
        raise ParameterError(f"no {column!r} column for the speech split; got {table.column_names}")
    return [
        None if v is None else float(v) >= SPEECH_THRESHOLD
        for v in table.column(column).to_pylist()
    ]


def select_columns(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """The named columns, in order; a missing one is filled with nulls (string)."""
    cols = {}
    for n in names:
        if n in table.column_names:
            cols[n] = table.column(n)
        else:
            kind = pa.float64() if n in NUMERIC_COLUMNS else pa.string()
            cols[n] = pa.nulls(table.num_rows, kind)
    return pa.table(cols)
