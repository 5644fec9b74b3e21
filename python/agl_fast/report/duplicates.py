"""The report's section on duplicate recordings (``agl-fast dedup``, ``curate
--dedup``): the counts and one table row per clip of every group."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

__all__ = ["GROUPS_SHOWN", "duplicate_groups", "duplicates_section"]

#: Groups listed at most (the rest are counted).
GROUPS_SHOWN = 1000

_COLUMNS = (
    "duplicate_group",
    "duplicate_of",
    "key",
    "duplicate_status",
    "duplicate_match",
    "overlap_s",
)


def duplicate_groups(table: pa.Table) -> list[dict[str, Any]]:
    """The groups of a deduplicated table, by group number: ``group``,
    ``representative`` (its key) and ``members`` (``key``, ``status``,
    ``match``, ``overlap_start_s``, ``overlap_match_start_s``,
    ``overlap_s``, ``score``; the representative first)."""
    if "duplicate_group" not in table.column_names:
        return []
    cols = {c: table.column(c).to_pylist() for c in table.column_names if c in _NEEDED}
    groups: dict[int, dict[str, Any]] = {}
    for i, g in enumerate(cols["duplicate_group"]):
        if g is None:
            continue
        entry = groups.setdefault(g, {"group": g, "representative": None, "members": []})
        member = {
            "key": cols["key"][i],
            "status": cols["duplicate_status"][i],
            "match": cols["duplicate_match"][i],
            "overlap_start_s": cols["overlap_start_s"][i],
            "overlap_match_start_s": cols["overlap_match_start_s"][i],
            "overlap_s": cols["overlap_s"][i],
            "score": cols["match_score"][i],
        }
        if cols["duplicate_of"][i] is None:  # the member the others are duplicates of
            entry["representative"] = member["key"]
            entry["members"].insert(0, member)
        else:
            entry["members"].append(member)
    return [groups[g] for g in sorted(groups)]


_NEEDED = frozenset(
    {
        *_COLUMNS,
        "overlap_start_s",
        "overlap_match_start_s",
        "match_score",
    }
)


def _seconds(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def duplicates_section(
    table: pa.Table, summary: Mapping[str, Any], limit: int = GROUPS_SHOWN
) -> str:
    """HTML of the section: empty when the output was not deduplicated."""
    counts = summary.get("dedup")
    if counts is None and "duplicate_group" not in table.column_names:
        return ""
    esc = html.escape
    counts = counts or {}
    line = (
        f"<p id='dedup-counts'>{counts.get('groups', '?')} groups hold "
        f"{counts.get('grouped', '?')} clips, {counts.get('duplicates', '?')} of them "
        f"duplicates of their group's representative; {counts.get('fingerprinted', '?')} of "
        f"{counts.get('clips', table.num_rows)} clips fingerprinted, "
        f"{counts.get('unfingerprintable', '?')} unfingerprintable (never grouped), "
        f"{counts.get('no_fingerprint', '?')} without a fingerprint, "
        f"{counts.get('failed', '?')} with an unreadable one.</p>"
    )
    rule = counts.get("representative_rule")
    if rule:
        line += f"<p class='note'>Representative: {esc(', then '.join(rule))}.</p>"
    groups = duplicate_groups(table)
    if not groups:
        return line + "<p id='no-duplicates'>No duplicates found.</p>"
    body = []
    for g in groups[:limit]:
        for m in g["members"]:
            score = "" if m["score"] is None else f"{m['score']:.3g}"
            body.append(
                f"<tr class='{esc(str(m['status']))}'><td>{g['group']}</td>"
                f"<td>{esc(str(m['key']))}</td><td>{esc(str(m['status']))}</td>"
                f"<td>{esc(str(m['match'] or ''))}</td>"
                f"<td>{_seconds(m['overlap_start_s'])}</td>"
                f"<td>{_seconds(m['overlap_match_start_s'])}</td>"
                f"<td>{_seconds(m['overlap_s'])}</td>"
                f"<td>{score}</td></tr>"
            )
    heads = ("group", "clip", "status", "matched clip", "starts at (s)", "match starts at (s)",
             "overlap (s)", "score")  # fmt: skip
    head = "".join(f"<th>{h}</th>" for h in heads)
    more = len(groups) - limit
    note = (
        f"<p class='note'>{more} more groups not shown: read curated.parquet.</p>"
        if more > 0
        else ""
    )
    return (
        f"{line}<table id='duplicate-groups' data-groups='{len(groups)}'><thead><tr>{head}"
        f"</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"
    )
