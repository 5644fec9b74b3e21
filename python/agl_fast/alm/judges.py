"""Contribution judges (AGL1K paper, section 3.3.1 and appendix B.9.2).

Each judge model reads one model's reasoning text and the clip's category
list and scores each category's contribution in [0, 1]. Answers are
validated: category names must be on the list (exact, else after case and
space folding; others are dropped and counted), values must be numbers in
[0, 1] (one value outside makes that judge's answer invalid, since it shows
another scale). Categories a valid answer leaves out score 0, as the prompt
asks. Valid answers are averaged per (clip, category).

Output schema of ``contributions.parquet`` (read by the localizability fit)::

    key           string   clip key (the predictions' question_id)
    category      string   category name, as listed
    contribution  float64  mean score over the valid judges, in [0, 1]; null if none
    n_judges      int32    number of judges with a valid answer for this clip

``judge_scores.parquet`` keeps every judge's validated scores:
``(key, judge, category, score, status)``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .parse import BLOCKED_FINISH_REASONS
from .protocol import Reply

CONTRIBUTION_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("category", pa.string()),
        ("contribution", pa.float64()),
        ("n_judges", pa.int32()),
    ]
)
SCORES_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("judge", pa.string()),
        ("category", pa.string()),
        ("score", pa.float64()),
        ("status", pa.string()),
    ]
)


def first_json_object(text: str | None) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (code fences and prose around it allowed)."""
    if not text:
        return None
    dec = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            obj, _ = dec.raw_decode(text, i)
            if isinstance(obj, dict):
                return obj
        except (ValueError, RecursionError):  # digit limit, bad JSON, deep nesting
            pass
        i = text.find("{", i + 1)
    try:
        import json_repair

        obj = json_repair.loads(text[text.find("{") :]) if "{" in text else None
    except Exception:
        return None
    return obj if isinstance(obj, dict) and obj else None


def _fold(s: str) -> str:
    return " ".join(str(s).split()).casefold()


def validate_scores(
    obj: dict[str, Any] | None, categories: Sequence[str]
) -> tuple[dict[str, float] | None, int, str]:
    """Scores of a judge answer checked against ``categories``.

    Returns ``(scores, n_unknown, status)``: ``scores`` maps every listed
    category to its score (0 when left out), or is None when the answer is
    invalid; ``status`` is ``ok``, ``no_json`` or ``out_of_range``.
    """
    if obj is None:
        return None, 0, "no_json"
    by_fold = {_fold(c): c for c in categories}
    scores = dict.fromkeys(categories, 0.0)
    unknown = 0
    for k, v in obj.items():
        cat = k if k in scores else by_fold.get(_fold(k))
        if cat is None:
            unknown += 1
            continue
        try:
            x = float(v)
        except (TypeError, ValueError, OverflowError):
            return None, unknown, "out_of_range"
        if isinstance(v, bool) or not math.isfinite(x) or not 0.0 <= x <= 1.0:
            return None, unknown, "out_of_range"
        scores[cat] = x
    return scores, unknown, "ok"


def judge_class(reply: Reply) -> str:
    """``blocked`` / ``unparseable`` / ``ok`` for a judge reply (range checked later)."""
    if reply.finish_reason and reply.finish_reason.lower() in BLOCKED_FINISH_REASONS:
        return "blocked"
    if not reply.text or not reply.text.strip():
        return "blocked"
    return "ok" if first_json_object(reply.text) is not None else "unparseable"


def input_hash(reasoning: str, categories: Sequence[str]) -> str:
    blob = json.dumps([reasoning, list(categories)], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def aggregate(
    per_judge: dict[str, dict[str, dict[str, float] | None]],
    categories: dict[str, list[str]],
) -> pa.Table:
    """Average valid judge scores: ``per_judge[judge][key]`` -> scores or None."""
    cols: dict[str, list[Any]] = {f.name: [] for f in CONTRIBUTION_SCHEMA}
    for key, cats in categories.items():
        valid = [s[key] for s in per_judge.values() if s.get(key) is not None]
        for c in cats:
            vals = [v[c] for v in valid if v is not None]
            cols["key"].append(key)
            cols["category"].append(c)
            cols["contribution"].append(sum(vals) / len(vals) if vals else None)
            cols["n_judges"].append(len(vals))
    return pa.Table.from_pydict(cols, schema=CONTRIBUTION_SCHEMA)
