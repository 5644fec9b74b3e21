"""Reading free-text spatial answers back into labels, and scoring them (OWL).

A model's answer ("seven o'clock; down; 2.5 m", "Yes", "Because the Dog is at
nine o'clock and the Siren at two o'clock, the Dog is on the left side of the
receiver.") is mapped to the labels of :mod:`.qa`:

* :func:`parse_clocks`: clock sectors in order of appearance (words or
  digits, "o'clock" spelled with or without the apostrophe or a space);
* :func:`parse_position`: Type II ``(clock, 'up' | 'down', metres)``;
* :func:`parse_events`: the event names of a vocabulary that the text
  mentions (case-insensitive, longest names first, in order of appearance);
* :func:`parse_side_answer`: the Type IV conclusion, the sources the answer
  puts on the side asked about;
* :func:`parse_answer`: any row of :func:`.qa.generate_qa`.

:func:`score_qa` computes OWL's metrics over QA rows and answers
(:mod:`.metrics`): Type I detection mAP (single and dual source), Type II
12-sector and 4-quadrant DoA accuracy and DER, Type III binary accuracy,
Type IV detection, direction and binary accuracy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from .metrics import (
    binary_accuracy,
    distance_error_rate,
    doa_accuracy,
    mean_average_precision,
)
from .qa import CLOCK_WORDS, OPPOSITE, QUESTION_TYPES

__all__ = [
    "TYPE1_PROTOCOLS",
    "parse_answer",
    "parse_clocks",
    "parse_events",
    "parse_position",
    "parse_side_answer",
    "parse_vertical",
    "score_qa",
]

_HOUR = {w: (i if i else 12) for i, w in enumerate(CLOCK_WORDS)}
_CLOCK_RE = re.compile(
    r"\b(" + "|".join(CLOCK_WORDS) + r"|1[0-2]|0?[1-9])\s*(?:o\s*['\u2019]?\s*clock|oclock)\b",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(m\b|meters?\b|metres?\b)?", re.IGNORECASE)
_SIDE_RE = {
    "left": r"left",
    "right": r"right",
    "front": r"front|ahead",
    "back": r"behind|back|rear",
    "up": r"above|upper|overhead|up",
    "down": r"below|lower|beneath|down",
}
_VERTICAL_RE = re.compile(r"\b(" + _SIDE_RE["up"] + "|" + _SIDE_RE["down"] + r")\b", re.I)
_MARKER_RE = re.compile(
    r"\b(?:therefore|thus|hence|so|this shows that|indicates? that|which lie|both sounds lie|"
    r"both are situated)\b",
    re.IGNORECASE,
)
_NONE_RE = re.compile(r"do not correspond|neither|\bnone\b|\bno sound", re.IGNORECASE)


def parse_clocks(text: str) -> list[int]:
    """Clock sectors (1..12) mentioned in ``text``, in order."""
    out = []
    for m in _CLOCK_RE.finditer(str(text)):
        w = m.group(1).lower()
        out.append(_HOUR[w] if w in _HOUR else int(w))
    return out


def parse_vertical(text: str) -> str | None:
    """``'up'`` or ``'down'``: the first vertical word of ``text`` (None if none)."""
    m = _VERTICAL_RE.search(str(text))
    if m is None:
        return None
    return "up" if re.fullmatch(_SIDE_RE["up"], m.group(1), re.IGNORECASE) else "down"


def parse_position(text: str) -> dict[str, Any]:
    """Type II answer to ``{'clock', 'vertical', 'distance_m'}`` (None where absent).

    The distance is the first number with a metre unit, else the first bare
    number that is not the clock hour.
    """
    text = str(text)
    clocks = parse_clocks(text)
    rest = _CLOCK_RE.sub(" ", text)
    numbers = [(float(m.group(1)), bool(m.group(2))) for m in _NUMBER_RE.finditer(rest)]
    with_unit = [v for v, u in numbers if u]
    dist = with_unit[0] if with_unit else (numbers[0][0] if numbers else None)
    return {
        "clock": clocks[0] if clocks else None,
        "vertical": parse_vertical(rest),
        "distance_m": dist,
    }


def parse_events(text: str, vocabulary: list[str]) -> list[str]:
    """Names of ``vocabulary`` found in ``text``, in order of first appearance."""
    low = str(text).lower()
    taken = np.zeros(len(low) + 1, dtype=bool)
    found: list[tuple[int, str]] = []
    for name in sorted(set(vocabulary), key=len, reverse=True):
        pat = re.compile(r"(?<!\w)" + re.escape(name.lower()) + r"(?!\w)")
        for m in pat.finditer(low):
            if not taken[m.start() : m.end()].any():
                taken[m.start() : m.end()] = True
                found.append((m.start(), name))
    seen: list[str] = []
    for _, name in sorted(found):
        if name not in seen:
            seen.append(name)
    return seen


def _last_sentence(text: str) -> str:
    parts = [p for p in re.split(r"(?<=[.!?])\s+", str(text).strip()) if p.strip()]
    return parts[-1] if parts else ""


def _last_side(clause: str, sides: tuple[str, ...]) -> str | None:
    best, where = None, -1
    for side in sides:
        for m in re.finditer(r"\b(?:" + _SIDE_RE[side] + r")\b", clause, re.IGNORECASE):
            if m.start() > where:
                best, where = side, m.start()
    return best


def parse_side_answer(text: str, side: str, names: list[str]) -> list[str] | None:
    """The sources a Type IV answer places on ``side`` (None if unreadable).

    The conclusion is the last sentence, from its last marker ("therefore",
    "thus", "which lie", ...) on. "do not correspond" / "neither" / "none":
    no source; "both" with the side asked about: both, with the opposite
    side: none; one name with the side asked about: that source, with the
    opposite side: the other one.
    """
    sentence = _last_sentence(text)
    low = sentence.lower()
    if _NONE_RE.search(sentence):
        return []
    cut = max((m.end() for m in _MARKER_RE.finditer(sentence)), default=0)
    clause = sentence[cut:]
    found = _last_side(clause, (side, OPPOSITE[side])) or _last_side(
        sentence, (side, OPPOSITE[side])
    )
    if found is None:
        return None
    if re.search(r"\bboth\b|\bthey\b", low):
        return list(names) if found == side else []
    named = parse_events(clause, names) or parse_events(sentence, names)
    if not named:
        return None
    # The name mentioned last is the one the conclusion is about.
    last = max(named, key=lambda n: clause.lower().rfind(n.lower()))
    if found == side:
        return [last]
    return [n for n in names if n != last]


def parse_answer(row: dict[str, Any], answer: str) -> dict[str, Any]:
    """Labels read from ``answer`` to the question of ``row`` (a QA row).

    Returns the keys of the row's targets: ``target_events`` (I);
    ``clock``, ``vertical``, ``distance_m`` (II); ``label`` (III, None when
    neither yes nor no); ``on_side`` and ``clocks`` (IV, clocks paired with
    the sources in the order the answer names them).
    """
    qtype = row["type"]
    names = list(row.get("events", []))
    if qtype == "I":
        return {"target_events": parse_events(answer, names)}
    if qtype == "II":
        return parse_position(answer)
    if qtype == "III":
        w = str(answer).strip().lower()
        yes = re.match(r"\W*yes\b", w) is not None
        no = re.match(r"\W*no\b", w) is not None
        return {"label": True if yes else False if no else None}
    if qtype == "IV":
        order = parse_events(answer, names)
        clocks = parse_clocks(answer)
        by_name = dict(zip(order, clocks, strict=False))
        return {
            "on_side": parse_side_answer(answer, row["side"], names),
            "clocks": [by_name.get(n) for n in names],
        }
    raise KeyError(f"unknown question type {qtype!r}")


#: Type I detection protocols of :func:`score_qa`: ``match`` (the event names
#: of the scene read from the answer, 0/1 scores over the names seen) and
#: ``embedding`` (OWL's: cosine similarity of the answer's embedding with
#: every class name of a vocabulary).
TYPE1_PROTOCOLS = ("match", "embedding")


def embedding_map(
    answers: list[str],
    targets: list[list[str]],
    vocabulary: list[str],
    embed: Callable[[list[str]], Any],
) -> float:
    """OWL's Type I mAP: per-class AP of the answers' embedding similarity to
    each class name, over the classes with a positive.

    ``embed(texts) -> [len(texts), D]`` (e.g. :func:`agl_fast.alm.embeddings.fetch_embeddings`
    with its settings bound); reference names are matched to ``vocabulary``
    in lower case, as OWL does, and one outside it raises ParameterError.
    """
    from ..exceptions import ParameterError
    from .embeddings import embedding_scores

    index = {name.lower(): i for i, name in enumerate(vocabulary)}
    t = np.zeros((len(targets), len(vocabulary)))
    for i, names in enumerate(targets):
        for name in names:
            if name.lower() not in index:
                raise ParameterError(f"reference event {name!r} is not in the vocabulary")
            t[i, index[name.lower()]] = 1.0
    if not targets:
        return math.nan
    vecs = np.asarray(embed([*vocabulary, *answers]), dtype=np.float64)
    scores = embedding_scores(vecs[len(vocabulary) :], vecs[: len(vocabulary)])
    return float(mean_average_precision(t, scores))


def _map(pred: list[list[str]], true: list[list[str]]) -> float:
    vocab = sorted({e for x in true + pred for e in x})
    if not true or not vocab:
        return math.nan
    t = np.array([[e in x for e in vocab] for x in true], dtype=float)
    p = np.array([[e in x for e in vocab] for x in pred], dtype=float)
    return float(mean_average_precision(t, p))


def _type1_map(
    one: list[tuple[dict[str, Any], dict[str, Any], str]],
    vocabulary: list[str] | None,
    embed: Callable[[list[str]], Any] | None,
) -> float:
    """Type I mAP of (row, parsed, answer) triples: OWL's embedding protocol
    with ``embed``, else the 0/1 match."""
    targets = [r["target_events"] for r, _, _ in one]
    if embed is not None and vocabulary is not None:
        return embedding_map([a for _, _, a in one], targets, vocabulary, embed)
    return _map([p["target_events"] for _, p, _ in one], targets)


def score_qa(
    rows: list[dict[str, Any]],
    answers: list[str],
    *,
    type1: str = "match",
    vocabulary: list[str] | None = None,
    embed: Callable[[list[str]], Any] | None = None,
) -> dict[str, Any]:
    """OWL's metrics over QA rows and free-text answers (one per row).

    ``type1`` picks the Type I protocol (:data:`TYPE1_PROTOCOLS`):
    ``'match'`` (the default) or ``'embedding'``, OWL's, which needs the
    class ``vocabulary`` and an ``embed`` function (:func:`embedding_map`).

    Returns
    -------
    dict
        ``n`` per type and, where the type occurs: ``I_map_single``,
        ``I_map_dual`` (detection mAP in [0, 1]: of the parsed event sets,
        answers as 0/1 scores, or OWL's embedding similarity; ``I_protocol``
        says which); ``II_doa12_single``, ``II_doa12_dual``,
        ``II_doa4_single``, ``II_doa4_dual`` (12-sector and 4-quadrant
        accuracy, :func:`.metrics.doa_accuracy`), ``II_der_single``,
        ``II_der_dual`` (share of distances off by > 0.5 m; an unreadable
        distance counts as an error); ``III_ba``; ``IV_detection`` (share
        of answers naming both sources), ``IV_direction`` (share of sources
        whose stated clock sector is right), ``IV_ba`` (share of answers
        whose conclusion is right). Unreadable answers count as wrong. Rows
        of other types (a released dataset's own question types) are
        counted in ``n['other']`` and not scored.
    """
    from ..exceptions import ParameterError, ShapeError

    if len(rows) != len(answers):
        raise ShapeError(f"one answer per row required, got {len(rows)} rows and "
                         f"{len(answers)} answers")  # fmt: skip
    if type1 not in TYPE1_PROTOCOLS:
        raise ParameterError(f"type1 must be one of {TYPE1_PROTOCOLS}, got {type1!r}")
    if type1 == "embedding" and (vocabulary is None or embed is None):
        raise ParameterError("type1='embedding' needs a vocabulary and an embed function")
    if type1 == "match":
        vocabulary = embed = None
    n_other = sum(r.get("type") not in QUESTION_TYPES for r in rows)
    kept = [(r, a) for r, a in zip(rows, answers, strict=True) if r.get("type") in QUESTION_TYPES]
    rows, answers = [r for r, _ in kept], [a for _, a in kept]
    parsed = [parse_answer(r, a) for r, a in zip(rows, answers, strict=True)]
    out: dict[str, Any] = {"n": {t: sum(r["type"] == t for r in rows) for t in QUESTION_TYPES}}
    out["n"]["other"] = n_other
    out["I_protocol"] = type1
    for tag, single in (("single", True), ("dual", False)):
        sel = [(r, p, a) for r, p, a in zip(rows, parsed, answers, strict=True)
               if (r["n_sources"] == 1) == single]  # fmt: skip
        one = [(r, p, a) for r, p, a in sel if r["type"] == "I"]
        if one:
            out[f"I_map_{tag}"] = _type1_map(one, vocabulary, embed)
        two = [(r, p) for r, p, _ in sel if r["type"] == "II"]
        if two:
            pc = [p["clock"] for _, p in two]
            tc = [r["clock"] for r, _ in two]
            out[f"II_doa12_{tag}"] = doa_accuracy(pc, tc, bins=12)
            out[f"II_doa4_{tag}"] = doa_accuracy(pc, tc, bins=4)
            pd = [math.inf if p["distance_m"] is None else p["distance_m"] for _, p in two]
            out[f"II_der_{tag}"] = distance_error_rate(pd, [r["distance_m"] for r, _ in two])
    three = [(r, p) for r, p in zip(rows, parsed, strict=True) if r["type"] == "III"]
    if three:
        out["III_ba"] = binary_accuracy(
            ["" if p["label"] is None else p["label"] for _, p in three],
            [r["label"] for r, _ in three],
        )
    four = [(r, p, a) for r, p, a in zip(rows, parsed, answers, strict=True) if r["type"] == "IV"]
    if four:
        det = [set(parse_events(a, r["events"])) == set(r["events"]) for r, _, a in four]
        hits = [pc == tc for r, p, _ in four for pc, tc in zip(p["clocks"], r["clocks"],
                                                                strict=True)]  # fmt: skip
        ba = [p["on_side"] is not None and set(p["on_side"]) == set(r["on_side"])
              for r, p, _ in four]  # fmt: skip
        out["IV_detection"] = float(np.mean(det))
        out["IV_direction"] = float(np.mean(hits))
        out["IV_ba"] = float(np.mean(ba))
    return out
