"""Discovering the inputs of a run: a directory, a glob or a manifest."""

from __future__ import annotations

import glob
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import manifest
from ..audio import AUDIO_EXTENSIONS
from ..exceptions import ParameterError

__all__ = [
    "AUDIO_EXTENSIONS",
    "Inputs",
    "discover",
    "extra_columns",
    "extra_columns_at",
    "read_manifest",
]

_log = logging.getLogger("agl_fast.pipeline")

#: Manifest columns carried into the output table when present.
CARRIED = (
    "longitude",
    "latitude",
    "altitude",
    "city",
    "country",
    "continent",
    "label",
    "labels",
    manifest.COORDINATE_PROBLEM,
)


@dataclass
class Inputs:
    """Keys, paths and carried manifest columns, in input order."""

    keys: list[str]
    paths: list[str]
    extra: dict[str, list[Any]] = field(default_factory=dict)
    #: Where the inputs came from (``kind``: directory, glob, file or
    #: manifest; ``spec``), recorded in the run summary.
    source: dict[str, str] = field(default_factory=dict)
    #: Files of a directory or glob left out because of their extension or
    #: type (``count``, ``by_extension``, the first ``files``), recorded in
    #: the run summary.
    skipped: dict[str, Any] = field(default_factory=dict)
    #: Why a manifest row has no audio although its cell names a file: the
    #: file was refused (:func:`agl_fast.manifest.resolve_audio`: outside
    #: the audio directory, or not vouched for by its ``fetch.jsonl``), by
    #: key; such a row's path is empty and its error row gives the reason.
    refused: dict[str, str] = field(default_factory=dict)
    #: Position of each key (built once).
    index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.index = {k: i for i, k in enumerate(self.keys)}
        if len(self.index) != len(self.keys):
            seen: set[str] = set()
            dups = sorted({k for k in self.keys if k in seen or seen.add(k)})  # type: ignore[func-returns-value]
            raise ParameterError(
                f"keys must be unique, got {len(dups)} duplicated key(s), e.g. {dups[:3]}"
            )
        if len(self.paths) != len(self.keys):
            raise ParameterError(
                f"paths must have one entry per key, got {len(self.paths)} paths for "
                f"{len(self.keys)} keys"
            )


#: Skipped files named in the run summary at most (all are counted).
SKIPPED_LISTED = 100


def _extension_set(extensions: Iterable[str] | None) -> frozenset[str]:
    """:data:`AUDIO_EXTENSIONS` widened by ``extensions`` (``"aif"`` or
    ``".aif"``, any case)."""
    extra = set()
    for e in extensions or ():
        e = e.strip().lower()
        if not e or e == ".":
            raise ParameterError(f"extensions must be non-empty, got {e!r}")
        extra.add(e if e.startswith(".") else "." + e)
    return AUDIO_EXTENSIONS | extra


def _skipped(files: list[Path], root: Path) -> dict[str, Any]:
    by_ext = Counter(f.suffix.lower() or "(none)" for f in files)
    return {
        "count": len(files),
        "by_extension": dict(sorted(by_ext.items())),
        "files": [f.relative_to(root).as_posix() for f in files[:SKIPPED_LISTED]],
    }


def discover(spec: str, extensions: Iterable[str] | None = None) -> Inputs:
    """Audio files of a directory (recursively) or a glob pattern.

    Keys are the paths relative to the directory (or the pattern's fixed
    prefix), with ``/`` separators, so two files of the same name in
    different folders stay distinct. In a directory, files whose extension
    is not in :data:`AUDIO_EXTENSIONS` (widened by ``extensions``) are
    skipped; entries that are not regular files (FIFOs, devices) are
    skipped everywhere. Skipped entries are counted in
    :attr:`Inputs.skipped` and logged.
    """
    allowed: frozenset[str] | None = _extension_set(extensions)
    p = Path(spec)
    kind = "directory"
    if p.is_dir():
        found = sorted(f for f in p.rglob("*") if not f.is_dir())
        root = p
    elif any(c in spec for c in "*?["):
        kind = "glob"
        found = sorted(Path(f) for f in glob.glob(spec, recursive=True) if not Path(f).is_dir())
        fixed = spec[: min(spec.find(c) for c in "*?[" if c in spec)]
        root = Path(fixed) if fixed.endswith(("/", "\\")) else Path(fixed).parent
        allowed = None  # the pattern chose the files: any extension
    elif p.is_file():
        found, root, kind, allowed = [p], p.parent, "file", None
    else:
        raise ParameterError(f"input {spec!r} is not a directory, a glob or a file")
    files = [f for f in found if (allowed is None or f.suffix.lower() in allowed) and f.is_file()]
    taken = set(files)
    skipped = _skipped([f for f in found if f not in taken], root)
    if skipped["count"]:
        _log.warning(
            "%s: %d files skipped by extension or type (%s); --extensions widens the set",
            spec,
            skipped["count"],
            ", ".join(f"{k}: {v}" for k, v in skipped["by_extension"].items()),
        )
    keys = [f.relative_to(root).as_posix() for f in files]
    return Inputs(
        keys, [str(f) for f in files], source={"kind": kind, "spec": spec}, skipped=skipped
    )


def read_manifest(
    path: str | Path, audio_dir: str | Path | None = None, *, strict: bool = False
) -> Inputs:
    """Rows of a CSV or Parquet manifest, read by :func:`agl_fast.manifest.read_manifest`.

    The key is the ``key`` column (or an alias of
    :data:`agl_fast.manifest.KEY_ALIASES`), the audio the first column of
    :data:`agl_fast.manifest.PATH_ALIASES`; relative paths resolve against
    ``audio_dir`` (default: the manifest's folder), a clip stored by its key
    first (:func:`agl_fast.manifest.resolve_audio`; ``strict`` refuses two
    keys on one file, or a refused file, which otherwise is recorded in
    :attr:`Inputs.refused`). The columns of
    :data:`CARRIED` present in the manifest are carried into the output.
    """
    path = Path(path)
    table = manifest.read_manifest(path)
    if manifest.path_column(table) is None:
        raise ParameterError(
            f"manifest {path} has no path column; expected one of {list(manifest.PATH_ALIASES)}"
        )
    base = Path(audio_dir) if audio_dir is not None else path.parent
    keys = [str(k) for k in table.column(manifest.KEY).to_pylist()]
    cells = table.column(manifest.path_column(table)).to_pylist()
    refused: dict[str, str] = {}
    found = manifest.resolve_audio(keys, cells, base, strict=strict, refused=refused)
    paths = ["" if f is None else str(f) for f in found]
    extra: dict[str, list[Any]] = {}
    for c in CARRIED:
        if c in table.column_names:
            vals = table.column(c).to_pylist()
            extra[c] = vals if c in _NUMERIC else [None if v is None else str(v) for v in vals]
    source = {"kind": "manifest", "spec": str(path), "audio_dir": str(base)}
    return Inputs(keys, paths, extra, source=source, refused=refused)


def extra_columns(inputs: Inputs, keys: list[str]) -> dict[str, pa.Array]:
    """Carried manifest columns for ``keys`` (numbers as float64, the rest
    as strings)."""
    return extra_columns_at(inputs, [inputs.index[k] for k in keys])


def extra_columns_at(inputs: Inputs, positions: list[int]) -> dict[str, pa.Array]:
    """Carried manifest columns for the rows at ``positions``."""
    out = {}
    for name, vals in inputs.extra.items():
        picked = [vals[i] for i in positions]
        if name in _NUMERIC:
            out[name] = pa.array([manifest.parse_number(v) for v in picked], pa.float64())
        else:
            out[name] = pa.array(picked, pa.string())
    return out


_NUMERIC = ("longitude", "latitude", "altitude")
