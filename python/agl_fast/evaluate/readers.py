"""Readers for AGL1K prediction files and the ground-truth manifest.

Every reader returns a :class:`pandas.DataFrame` with one row per answer and
at least the columns of :data:`PREDICTION_COLUMNS` (missing ones filled with
``None``); values are kept as the file gave them (strings or numbers), since
the ``agl1k`` rules look at the raw text. A :class:`ReadReport` counts what
was dropped or suspicious so that bad input never passes silently.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import manifest
from ..coords import validate_coordinates
from ..exceptions import ParameterError

_log = logging.getLogger("agl_fast.evaluate")

PREDICTION_COLUMNS = (
    "question_id",
    "predicted_city",
    "predicted_country",
    "predicted_continent",
    "predicted_latitude",
    "predicted_longitude",
    "model_output",
    "finish_reason",
)

TRUTH_COLUMNS = manifest.AGL1K_COLUMNS

#: Column :func:`read_truth` adds: what is wrong with a row's coordinates
#: (None where they are valid numbers in range); the manifest's own column.
COORDINATE_PROBLEM = manifest.COORDINATE_PROBLEM

CATEGORY_COLUMNS = {
    "Animal": "animal",
    "Music": "music",
    "Nature": "natural_sounds",
    "Things": "sounds_of_things",
    "channel": "channel",
    "environment": "environment_and_background",
}


@dataclass
class ReadReport:
    """What a reader saw: rows read, and rows it had to drop or flag."""

    path: str
    format: str
    n_rows: int = 0
    n_bad_lines: int = 0
    n_duplicate_keys: int = 0
    n_missing_key: int = 0
    notes: list[str] = field(default_factory=list)


def model_name(path: str | Path) -> str:
    """Model name from an AGL1K file name (``qwen25-omni_seed_42_...`` -> ``qwen25-omni``)."""
    stem = Path(path).name
    for suffix in ("_progress_fixed.json", "_ABCD.jsonl", ".jsonl", ".json", ".csv", ".parquet"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if "_seed_" in stem:
        stem = stem.split("_seed_")[0]
    return stem


def _frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    for c in PREDICTION_COLUMNS:
        if c not in df.columns:
            df[c] = None
    return df


def _read_json_list(path: Path, report: ReadReport) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return []
    data = json.loads(text)
    if isinstance(data, dict):
        data = data.get("results", data.get("predictions", [data]))
    if not isinstance(data, list):
        raise ParameterError(f"{path}: expected a JSON list of answers, got {type(data).__name__}")
    out = [r for r in data if isinstance(r, dict)]
    report.n_bad_lines = len(data) - len(out)
    return out


def _read_jsonl(path: Path, report: ReadReport) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                report.n_bad_lines += 1
                continue
            if isinstance(rec, dict):
                out.append(rec)
            else:
                report.n_bad_lines += 1
    return out


def _unescape(v: Any) -> Any:
    return v.replace("\\n", "\n") if isinstance(v, str) else v


def _read_progress_csv(path: Path, report: ReadReport) -> list[dict[str, Any]]:
    # The raw progress CSV stores newlines inside fields as the two
    # characters backslash-n; the csv module reads it, then we restore them.
    text = path.read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    out = []
    for rec in reader:
        if None in rec:
            report.n_bad_lines += 1
            rec.pop(None)
        out.append({k: _unescape(v) for k, v in rec.items()})
    return out


def read_predictions(path: str | Path) -> tuple[pd.DataFrame, ReadReport]:
    """Read one prediction file, whatever its AGL1K format.

    Parameters
    ----------
    path : str or Path
        ``*_progress_fixed.json`` (a JSON list), ``*.jsonl`` (one object a
        line), the raw progress ``*.csv``, or agl-fast's ``*.parquet``.

    Returns
    -------
    df : pandas.DataFrame
        One row per answer; duplicate ``question_id`` rows keep the first.
    report : ReadReport
    """
    p = Path(path)
    suffix = p.suffix.lower()
    fmt = {".json": "json", ".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}.get(suffix)
    if fmt is None:
        raise ParameterError(
            f"unknown prediction format {suffix!r} for {p.name}; "
            "allowed: .json, .jsonl, .csv, .parquet"
        )
    if not p.is_file():
        raise ParameterError(f"prediction file not found: {p}")
    report = ReadReport(path=str(p), format=fmt)
    if fmt == "parquet":
        df = pd.read_parquet(p)
        for c in PREDICTION_COLUMNS:
            if c not in df.columns:
                df[c] = None
    else:
        reader = {"json": _read_json_list, "jsonl": _read_jsonl, "csv": _read_progress_csv}[fmt]
        df = _frame(reader(p, report))
    if "question_id" not in df.columns or df.empty:
        report.notes.append("no answers")
        return _frame([]), report
    missing = df["question_id"].isna() | (df["question_id"].astype(str).str.strip() == "")
    report.n_missing_key = int(missing.sum())
    df = df[~missing].copy()
    df["question_id"] = df["question_id"].astype(str).str.strip()
    dup = df["question_id"].duplicated(keep="first")
    report.n_duplicate_keys = int(dup.sum())
    df = df[~dup].reset_index(drop=True)
    report.n_rows = len(df)
    return df, report


def read_truth(path: str | Path) -> pd.DataFrame:
    """Read a ground-truth manifest (the AGL1K CSV, or any CSV/Parquet
    manifest with coordinates and place names).

    The table is read by :func:`agl_fast.manifest.read_manifest`, which
    repairs the released CSV's 19-name header (see
    :data:`agl_fast.manifest.AGL1K_COLUMNS`) and checks that keys are unique
    (``mp3name`` is not: rows are keyed by ``key``).

    Coordinates are checked by :func:`agl_fast.coords.validate_coordinates`:
    ``latitude`` and ``longitude`` become float64 degrees, NaN where a value
    is missing, not a number, not finite or out of range (never wrapped),
    and the :data:`COORDINATE_PROBLEM` column says why. Such rows are kept,
    counted in a warning, and left out of scoring by
    :func:`~agl_fast.evaluate.score` (which counts them again in its
    :class:`~agl_fast.evaluate.JoinReport`).

    Raises
    ------
    ParameterError
        No ``latitude``/``longitude`` columns, or the manifest errors.
    """
    table = manifest.read_manifest(path)
    missing = [c for c in ("latitude", "longitude") if c not in table.column_names]
    if missing:
        raise ParameterError(f"{path}: ground truth needs columns {missing}")
    df = table.to_pandas()
    lat, lon, reasons = validate_coordinates(
        df["latitude"].tolist(), df["longitude"].tolist(), missing_ok=False
    )
    df["latitude"] = np.asarray(lat, dtype=np.float64)
    df["longitude"] = np.asarray(lon, dtype=np.float64)
    if COORDINATE_PROBLEM in df.columns:
        # the manifest reader saw the raw values: its reason names them
        given = df[COORDINATE_PROBLEM].tolist()
        reasons = [g if isinstance(g, str) else r for g, r in zip(given, reasons, strict=True)]
    df[COORDINATE_PROBLEM] = pd.Series(list(reasons), index=df.index, dtype=object)
    bad = df[df[COORDINATE_PROBLEM].notna()]
    if len(bad):
        shown = "; ".join(
            f"{k}: {r}" for k, r in zip(bad["key"][:5], bad[COORDINATE_PROBLEM][:5], strict=True)
        )
        more = f"; {len(bad) - 5} more" if len(bad) > 5 else ""
        _log.warning(
            "%s: %d of %d truth rows have invalid coordinates and are not scored (%s%s)",
            path, len(bad), len(df), shown, more,
        )  # fmt: skip
    for c in ("altitude", "mp3seconds", *CATEGORY_COLUMNS.values()):
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    if "human_sounds" in df.columns:
        df["human_sounds"] = pd.to_numeric(df["human_sounds"], errors="coerce")
    for c in ("city", "country", "continent"):
        if c not in df.columns:
            df[c] = None
        df[c] = df[c].where(df[c].notna() & (df[c].astype(str).str.strip() != ""), None)
    return df.reset_index(drop=True)
