"""Clip tables in and out of the localizability steps.

* :func:`tag_columns` — which column of a curated table holds the tagger's
  per-class fractions (``classes`` or ``<tagger>_classes``) and which holds
  the *Human sounds* fraction that splits speech clips;
* :func:`clip_categories` — the categories each clip was tagged with (the
  judges' input, from the tagging output);
* :func:`fraction_matrix` — ``t[k, i]`` from the per-class column, or from
  the AudioSet group fractions (the released AGL1K CSV) when there is none;
* :func:`select_benchmark` — keep ``l_k > theta`` and the clips screening did
  not reject, pick to a speech / non-speech mix (:mod:`.mix`), and lay the
  rows out in the AGL1K schema.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from .. import manifest
from ..exceptions import ParameterError
from ..pipeline.dedup import has_groups, one_per_group
from .mix import BALANCE, MixRequest, advice, targets

__all__ = [
    "BALANCE",
    "benchmark_table",
    "classes_column",
    "clip_categories",
    "group_column",
    "group_fractions",
    "select_benchmark",
    "speech_column",
]

Balance = Literal["equal", "none"]
log = logging.getLogger("agl_fast.localizability")
#: The tagger's name for the group that the AGL1K schema splits in two.
_TAGGER_GROUP = {"environment_and_background": "channel_environment_and_background"}


def classes_column(table: pa.Table, name: str | None = None) -> str:
    """The per-class fraction column: ``name`` if given, else ``classes`` or
    the one ``<tagger>_classes`` column (``efficientat`` preferred)."""
    if name is not None:
        if name not in table.column_names:
            raise ParameterError(f"no column {name!r} in the table; got {table.column_names}")
        return name
    found = [c for c in table.column_names if c == "classes" or c.endswith("_classes")]
    for pref in ("classes", "efficientat_classes"):
        if pref in found:
            return pref
    if len(found) == 1:
        return found[0]
    raise ParameterError(
        "cannot tell the tag fraction column: "
        + (f"several candidates {found}; name one" if found else "no 'classes' column (tag first)")
    )


def group_column(table: pa.Table, group: str) -> str | None:
    """Column of an AudioSet group fraction: ``group`` itself (AGL1K schema) or
    ``[<tagger>_]group_<group>`` (tagging output), EfficientAT first."""
    if group in table.column_names:
        return group
    g = _TAGGER_GROUP.get(group, group)
    for c in (f"efficientat_group_{g}", f"group_{g}"):
        if c in table.column_names:
            return c
    return next((c for c in table.column_names if c.endswith(f"_group_{g}")), None)


def speech_column(table: pa.Table, name: str | None = None) -> str:
    """Column deciding speech vs non-speech: ``name``, else the *Human sounds*
    group fraction, else a speech tagger's ``speech_fraction``."""
    if name is not None:
        if name not in table.column_names:
            raise ParameterError(f"no column {name!r} in the table; got {table.column_names}")
        return name
    col = group_column(table, manifest.SPEECH_COLUMN)
    if col is None:
        col = next((c for c in table.column_names if c.endswith("speech_fraction")), None)
    if col is None:
        raise ParameterError(
            "no Human sounds fraction (human_sounds, *_group_human_sounds) or speech_fraction "
            "column for the speech split"
        )
    return col


def clip_categories(
    table: pa.Table, column: str | None = None, *, min_fraction: float = 0.0
) -> dict[str, list[str]]:
    """``{key: [category, ...]}``: the classes each clip was tagged with
    (time fraction ``> min_fraction``), largest first; untagged clips omitted.
    A table with no per-class column (and ``column`` not named) gives its
    AudioSet groups instead (:func:`group_fractions`)."""
    keys = [str(k) for k in table.column(manifest.KEY).to_pylist()]
    try:
        col = classes_column(table, column)
    except ParameterError:
        if column is not None:
            raise
        t, names = group_fractions(table)
        if not names:
            raise
        out_g: dict[str, list[str]] = {}
        for key, row in zip(keys, t, strict=True):
            order = [
                j for j in np.argsort(-np.nan_to_num(row), kind="stable") if row[j] > min_fraction
            ]
            if order:
                out_g[key] = [names[j] for j in order]
        return out_g
    out: dict[str, list[str]] = {}
    for key, items in zip(keys, table.column(col).to_pylist(), strict=True):
        names_k = [it["name"] for it in items or [] if (it["fraction"] or 0.0) > min_fraction]
        if names_k:
            out[key] = names_k
    return out


def _float_column(table: pa.Table, name: str | None) -> np.ndarray:
    if name is None:
        return np.full(table.num_rows, np.nan)
    vals = table.column(name).to_pylist()
    return np.array([np.nan if v is None else float(v) for v in vals], dtype=np.float64)


def _split(table: pa.Table, speech: str | None, usable: np.ndarray) -> dict[str, np.ndarray]:
    """Masks of the usable speech and non-speech rows (rows without a speech
    fraction are on neither side)."""
    hs = _float_column(table, speech_column(table, speech))
    known = usable & np.isfinite(hs)
    is_speech = hs >= manifest.SPEECH_THRESHOLD
    return {"speech": known & is_speech, "nonspeech": known & ~is_speech}


def _one_per_group(
    table: pa.Table, ok: np.ndarray, keep_duplicates: bool
) -> tuple[np.ndarray, int | None]:
    """The rows of ``ok`` left when each duplicate group (``duplicate_group``,
    ``agl-fast dedup``) keeps its best row of ``ok`` by
    :data:`agl_fast.pipeline.dedup.REPRESENTATIVE_RULE`, and how many were
    removed (None, everything kept: ``keep_duplicates``, or a table without
    groups)."""
    if keep_duplicates:
        return ok, None
    if not has_groups(table):
        log.info(
            "the table has no duplicate_group column: duplicates were not looked for "
            "(run 'agl-fast dedup' on the curate output)"
        )
        return ok, None
    kept = one_per_group(table, ok)
    return kept, int((ok & ~kept).sum())


def select_benchmark(
    table: pa.Table,
    *,
    theta: float,
    balance: Balance = "equal",
    n: int | None = None,
    speech: str | None = None,
    speech_share: float | None = None,
    counts: tuple[int, int] | None = None,
    exclude: Collection[str] = (),
    only: Collection[str] | None = None,
    keep_duplicates: bool = False,
) -> tuple[pa.Table, dict[str, Any]]:
    """Rows with ``l_k > theta``, picked to a speech / non-speech mix.

    Parameters
    ----------
    table : pa.Table
        A scored table (``l_k`` column, from ``localizability score``).
    theta : float
        Localizability threshold.
    balance : {'equal', 'none'}
        ``'equal'``: as many speech as non-speech clips (``n // 2`` a side,
        else as many as the smaller side holds); ``'none'``: the (``n``) most
        localizable clips, whatever their side.
    n, speech : int or None, str or None
        Size of the benchmark; column of the speech split (:func:`speech_column`).
    speech_share : float or None
        Target share of speech clips in [0, 1] (the paper's 0.71): of ``n``
        clips, or the largest benchmark of that mix the pool allows.
    counts : (int, int) or None
        Target numbers of speech and non-speech clips (the paper's 1025, 419).
    exclude : collection of str
        Keys left out (clips rejected in screening).
    only : collection of str or None
        When given, only these keys may be selected (clips accepted in screening).
    keep_duplicates : bool
        Keep every clip of a duplicate group; by default one (:func:`_one_per_group`).

    Returns
    -------
    selected : pa.Table
        The chosen rows, most localizable first within each side.
    counts : dict
        ``pool``, ``screened_out``, ``localizable``, ``speech``, ``nonspeech``
        (localizable clips a side), ``selected``, ``duplicates_removed``; for a mix also ``target``,
        ``selected_speech``/``_nonspeech``, ``short`` and ``advice`` (what to
        change). A short side is filled as far as it goes, never an error.
    """
    req = MixRequest(balance=balance, speech_share=speech_share, counts=counts, n=n)
    if "l_k" not in table.column_names:
        raise ParameterError("the table has no l_k column: run 'localizability score' first")
    lk = _float_column(table, "l_k")
    keys = [str(k) for k in table.column(manifest.KEY).to_pylist()]
    allowed = np.array([k not in exclude and (only is None or k in only) for k in keys], dtype=bool)
    ok, removed = _one_per_group(table, allowed & np.isfinite(lk) & (lk > theta), keep_duplicates)
    pooled = _split(table, speech, allowed & np.isfinite(lk))
    sides = {}
    for name, mask in pooled.items():
        idx = np.flatnonzero(ok & mask)
        sides[name] = idx[np.argsort(-lk[idx], kind="stable")]
    avail = (len(sides["speech"]), len(sides["nonspeech"]))
    report: dict[str, Any] = {"pool": table.num_rows, "screened_out": int((~allowed).sum()),
                              "localizable": int(ok.sum()), "speech": avail[0],
                              "nonspeech": avail[1], "duplicates_removed": removed}  # fmt: skip
    if req.mixed:
        want = targets(req, avail)
        pick = np.concatenate([sides["speech"][: want[0]], sides["nonspeech"][: want[1]]])
        got = (min(want[0], avail[0]), min(want[1], avail[1]))
        report |= {
            "target": {"speech": want[0], "nonspeech": want[1], "rule": req.describe()},
            "selected_speech": got[0], "selected_nonspeech": got[1],
            "short": {"speech": want[0] - got[0], "nonspeech": want[1] - got[1]},
            "advice": advice(req, want, avail, [lk[m] for m in pooled.values()], theta),
        }  # fmt: skip
    else:
        idx = np.flatnonzero(ok)
        pick = idx[np.argsort(-lk[idx], kind="stable")][:n]
    report["selected"] = len(pick)
    return table.take(pa.array(pick.astype(np.int64))), report


def benchmark_table(table: pa.Table, audio_dir: str | Path | None = None) -> pa.Table:
    """Lay a scored clip table out in the AGL1K schema (:data:`AGL1K_COLUMNS`),
    ``l_k`` appended.

    ``mp3name`` is the clip's path relative to ``audio_dir`` when it lies
    below it (else the path as recorded); ``mp3seconds`` the decoded
    ``duration``; group fractions come from the AGL1K columns or the
    tagger's ``*_group_*`` columns. The tagger's one *Channel, environment
    and background* group fills ``environment_and_background``; ``channel``
    (a column of the released schema with no counterpart in the AudioSet
    ontology's seven groups) stays empty.
    """
    cols: dict[str, pa.Array | pa.ChunkedArray] = {}
    n = table.num_rows
    names = set(table.column_names)
    for c in manifest.AGL1K_COLUMNS:
        kind = pa.float64() if c in manifest.NUMERIC_COLUMNS else pa.string()
        if c == "mp3name":
            paths = manifest.audio_paths(table) if manifest.path_column(table) else [None] * n
            base = Path(audio_dir).resolve() if audio_dir is not None else None
            vals: list[str | None] = []
            for p in paths:
                if p is None:
                    vals.append(None)
                elif base is not None and p.resolve().is_relative_to(base):
                    vals.append(p.resolve().relative_to(base).as_posix())
                else:
                    vals.append(str(p))
            cols[c] = pa.array(vals, pa.string())
        elif c == "mp3seconds" and c not in names and "duration" in names:
            cols[c] = table.column("duration").cast(pa.float64())
        elif c in manifest.GROUP_COLUMNS:
            src = group_column(table, c) if c != "channel" else ("channel" if c in names else None)
            cols[c] = table.column(src).cast(pa.float64()) if src is not None else pa.nulls(n, kind)
        elif c in names:
            cols[c] = table.column(c).cast(kind)
        else:
            cols[c] = pa.nulls(n, kind)
    cols["l_k"] = table.column("l_k").cast(pa.float64())
    return pa.table(cols)


def group_fractions(table: pa.Table) -> tuple[np.ndarray, tuple[str, ...]]:
    """``t[k, i]`` over the AudioSet group fractions a table carries: the AGL1K
    schema's columns (:data:`agl_fast.manifest.GROUP_COLUMNS`, as in the
    released CSV) or the tagger's ``*_group_*`` columns (:func:`group_column`).

    Categories are named by the AGL1K column; a group no row has a value for
    is left out; an empty cell is NaN. Returns ``(t [n_clips, n_groups],
    names)``, both empty when the table has no group column.
    """
    names: list[str] = []
    cols: list[np.ndarray] = []
    for g in manifest.GROUP_COLUMNS:
        src = group_column(table, g)
        if src is None or table.column(src).null_count == table.num_rows:
            continue
        try:
            cols.append(_float_column(table, src))
        except (TypeError, ValueError):
            raise ParameterError(f"group fraction column {src!r} is not numeric") from None
        names.append(g)
    t = np.stack(cols, axis=1) if cols else np.zeros((table.num_rows, 0))
    return t, tuple(names)


def fraction_matrix(
    table: pa.Table, categories: Sequence[str] | None = None, column: str | None = None
) -> tuple[np.ndarray, tuple[str, ...]]:
    """``t[k, i]`` of a clip table and the categories: its tag fraction column
    (per class), else, when it has none and ``column`` is not named, its
    AudioSet group fractions (:func:`group_fractions`)."""
    from .fit import fractions_matrix

    try:
        col = classes_column(table, column)
    except ParameterError:
        if column is not None:
            raise
        t, names = group_fractions(table)
        if not names:
            raise ParameterError(
                "no tag fractions: neither a 'classes' column (tag first) nor AudioSet group "
                f"fraction columns ({', '.join(manifest.GROUP_COLUMNS)})"
            ) from None
        log.info("no per-class tag column: using the group fractions %s", names)
        if categories is None:
            return t, names
        idx = {n: j for j, n in enumerate(names)}
        out = np.zeros((table.num_rows, len(categories)))
        for j, c in enumerate(categories):
            if c in idx:
                out[:, j] = t[:, idx[c]]
        return out, tuple(categories)
    return fractions_matrix(table.select([col]).rename_columns(["classes"]), categories)
