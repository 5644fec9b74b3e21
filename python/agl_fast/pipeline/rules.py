"""Row rules applied after the stages: the duration rules, cut sources and
invalid manifest coordinates. Each turns rows into failures with a reason a
person understands; none raises."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..manifest import COORDINATE_PROBLEM
from .config import (
    CUT_SOURCE_SECONDS,
    CUT_SOURCE_TOLERANCE,
    TOO_LONG,
    TOO_SHORT,
    TRUNCATED_SOURCE,
    BatchConfig,
)

__all__ = ["INVALID_COORDINATES", "duration_rules", "fail_bad_coordinates", "fail_cut_sources"]

#: ``error_type`` of a row whose manifest coordinates are invalid.
INVALID_COORDINATES = "InvalidCoordinates"


def duration_rules(
    table: pa.Table, passed: np.ndarray, cfg: BatchConfig
) -> tuple[pa.Table, np.ndarray]:
    """Reject decoded clips shorter than ``min_duration`` (``too_short``)
    and, with ``long_clips="fail"``, files cut at ``max_duration``
    (``too_long``): ``passed`` turns false and the reason joins the row's
    ``reasons`` (created when no stage wrote one)."""
    duration = table.column("duration").to_pylist()
    cut = table.column("truncated").to_pylist()
    decoded = table.column("error_type").to_pylist()
    extra: list[list[str]] = [[] for _ in duration]
    for i, (d, t, e) in enumerate(zip(duration, cut, decoded, strict=True)):
        if e is not None or d is None:
            continue
        if d < cfg.min_duration:
            extra[i].append(TOO_SHORT)
        if t and cfg.long_clips == "fail":
            extra[i].append(TOO_LONG)
    if not any(extra):
        return table, passed
    passed = passed & np.array([not x for x in extra], dtype=bool)
    if "reasons" in table.column_names:
        old = table.column("reasons").to_pylist()
        merged = [(o or []) + x if (o or x) else o for o, x in zip(old, extra, strict=True)]
        at = table.column_names.index("reasons")
        table = table.set_column(at, "reasons", pa.array(merged, pa.list_(pa.string())))
    else:
        merged = [x if e is None else None for x, e in zip(extra, decoded, strict=True)]
        table = table.append_column("reasons", pa.array(merged, pa.list_(pa.string())))
    return table, passed


def fail_cut_sources(table: pa.Table, cfg: BatchConfig) -> pa.Table:
    """Rows whose file decoded to less than its header declares (the
    loader's ``decoded_fraction``, short by more than
    :data:`CUT_SOURCE_TOLERANCE` of it and :data:`CUT_SOURCE_SECONDS`) fail
    with ``error_type`` :data:`TRUNCATED_SOURCE`, unless
    ``allow_cut_sources`` (then the column alone flags them)."""
    if cfg.allow_cut_sources or "decoded_fraction" not in table.column_names:
        return table
    fractions = table.column("decoded_fraction").to_pylist()
    durations = table.column("duration").to_pylist()
    cut = []
    for i, (f, d) in enumerate(zip(fractions, durations, strict=True)):
        if f is None or d is None or f >= 1.0 - CUT_SOURCE_TOLERANCE:
            continue
        declared = d / f if f > 0 else float("inf")
        if declared - d > CUT_SOURCE_SECONDS:
            cut.append((i, d, declared))
    if not cut:
        return table
    kinds = table.column("error_type").to_pylist()
    messages = table.column("error_message").to_pylist()
    passed = table.column("passed").to_pylist()
    keys = table.column("key").to_pylist()
    for i, d, declared in cut:
        if kinds[i] is None:
            kinds[i], passed[i] = TRUNCATED_SOURCE, False
            messages[i] = (
                f"{keys[i]}: stream ends early after {d:.2f} s of the {declared:.2f} s its "
                "header declares (cut or damaged file)"
            )
    for name, vals, typ in (
        ("error_type", kinds, pa.string()),
        ("error_message", messages, pa.string()),
        ("passed", passed, pa.bool_()),
    ):
        table = table.set_column(table.column_names.index(name), name, pa.array(vals, typ))
    return table


def fail_bad_coordinates(table: pa.Table) -> pa.Table:
    """Rows whose manifest coordinates are invalid (the manifest reader's
    :data:`~agl_fast.manifest.COORDINATE_PROBLEM`) fail with
    ``error_type`` :data:`INVALID_COORDINATES` and the reason, unless the
    file already failed for another cause."""
    if COORDINATE_PROBLEM not in table.column_names:
        return table
    problems = table.column(COORDINATE_PROBLEM).to_pylist()
    if not any(problems):
        return table
    kinds = table.column("error_type").to_pylist()
    messages = table.column("error_message").to_pylist()
    passed = table.column("passed").to_pylist()
    for i, why in enumerate(problems):
        if why and kinds[i] is None:
            kinds[i], messages[i], passed[i] = INVALID_COORDINATES, why, False
    for name, vals, typ in (
        ("error_type", kinds, pa.string()),
        ("error_message", messages, pa.string()),
        ("passed", passed, pa.bool_()),
    ):
        table = table.set_column(table.column_names.index(name), name, pa.array(vals, typ))
    return table
