"""BiDepth question-answer pairs (OWL, section 3.2 and appendix A.4).

Four types, single- and dual-source, with the appendix's question templates
and answer formats:

``I`` (event detection)
    Single source: "Which sound events are audible in this clip?", answer
    the event names joined by "; ". Dual source: the position of one source
    is given ("... located to the seven o'clock, down, at an estimated
    distance of 2.5 meters?"), answer its event.
``II`` (direction estimation)
    Single source: where the sound comes from; dual source: where the named
    ``<CLS>`` sound comes from; answers "seven o'clock; down; 2.5 m". The
    ``between`` variant (dual source) asks where one source is seen from the
    other (their difference vector, in the listener's axes).
``III`` (spatial reasoning, Yes/No)
    Receiver-relative (is it left / right / in front / behind / above /
    below you), source-relative (is A left of / in front of / above B),
    same side (are A and B both on one side of you) and distance (is A
    closer than B).
``IV`` (chain of thought)
    "Which sound can be heard to the left of the receiver?" answered with the
    position of each source first, then the conclusion, in the appendix's
    answer formats (one / both on the side asked about; a "do not
    correspond" answer, as in the paper's Table 7, when neither is).

Conventions (one place, shared with :mod:`.answers`):

* the horizontal plane is divided into 12 clock sectors (:func:`clock`,
  twelve o'clock straight ahead, three o'clock to the right), written in
  words (:data:`CLOCK_WORDS`);
* elevation is ``up`` when the BAT elevation is at or above the horizontal
  (``>= 90``) and ``down`` otherwise (:func:`vertical`);
* distances are quantized to 0.5 m (:func:`quantize_distance`, 0 to 10 m);
* sides follow the clock sector (:data:`SIDE_HOURS`): left is seven to
  eleven o'clock, right one to five, front ten to two, back four to eight;
  twelve and six are on neither the left nor the right, three and nine
  neither in front nor behind; up and down follow :func:`vertical`.

Each row carries what scoring needs: ``type``, ``n_sources``, ``kind``,
``events`` (the scene's event names, the vocabulary an answer is read
with) and the target labels (``target_events``; ``clock``, ``vertical``,
``distance_m``; ``label``; ``side``, ``on_side``, ``clocks``).
Positions come from the BAT labels (:func:`agl_fast.spatial.simulate.bat_labels`).

:func:`qa_from_indices` builds QA over a pool of RIRs and a pool of dry
sources instead of stored mixtures: each row names its RIRs (``rirs``) and
sources (``sources``) by index, and its mixture is rendered when needed
(:func:`agl_fast.spatial.mix.render_indices`), so storage grows with the
pools, not with the number of questions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .defaults import MAX_DISTANCE

__all__ = [
    "CLOCK_WORDS",
    "QUESTION_TYPES",
    "SIDE_HOURS",
    "clock",
    "clock_phrase",
    "generate_qa",
    "on_side",
    "position_answer",
    "qa_from_indices",
    "quantize_distance",
    "vertical",
]

QUESTION_TYPES = ("I", "II", "III", "IV")
CLOCK_WORDS = (
    "twelve", "one", "two", "three", "four", "five",
    "six", "seven", "eight", "nine", "ten", "eleven",
)  # fmt: skip
SIDE_HOURS = {
    "left": frozenset({7, 8, 9, 10, 11}),
    "right": frozenset({1, 2, 3, 4, 5}),
    "front": frozenset({10, 11, 12, 1, 2}),
    "back": frozenset({4, 5, 6, 7, 8}),
}
OPPOSITE = {"left": "right", "right": "left", "front": "back", "back": "front",
            "up": "down", "down": "up"}  # fmt: skip

_T1_SINGLE = (
    "Can you tell me what kind of sounds are in this recording?",
    "What categories of sounds are present here?",
    "Could you list the types of sounds captured in this audio?",
    "Which sound events are audible in this clip?",
    "Please identify all the distinct sounds in this recording.",
    "Can you break down the audio into individual sound events?",
)
_T1_DUAL = (
    "Can you categorize the sounds in the audio that are located to the {c}, {v}, at an "
    "estimated distance of {d} meters?",
    "Determine the types of sounds present in the audio clip from directions to the {c}, {v}, "
    "approximately {d} meters distant.",
    "Enumerate the sound occurrences in the audio clip that are sourced from the {c}, {v}, "
    "around {d} meters away.",
    "Point out the sound sources heard from {c}, {v} at an approximate distance of {d} meters.",
    "Can you pick out the sound events originating from {c}, {v} approximately {d} meters away?",
    "What sound sources can be identified from {c}, {v} roughly {d} meters distant?",
)
# The appendix lists six single-source Type II questions; its fourth ("Which
# sound events are audible in this clip?") is a Type I question and is left out.
_T2_SINGLE = (
    "Could you identify the likely area or setting of this sound clip's source?",
    "What is the most likely place or scene producing this sound clip?",
    "What's the spatial origin of this sound clip?",
    "Where do you think this audio clip originates?",
    "Could you pinpoint the approximate region or context of the sound clip's source?",
)
_T2_DUAL = (
    "At what distance and in which direction, is the {a} sound originating?",
    "At what spot is the sound of the {a} audible?",
    "Where, in terms of direction and distance, can the sound of the {a} be located?",
    "Can you estimate the bearing and distance of the {a}'s sound source?",
    "How would you locate the {a}'s sound in terms of both distance and direction from you?",
    "What is the direction and range of the {a}'s sound origin?",
)
_T2_BETWEEN = (
    "Seen from the sound of the {a}, in which direction and how far away is the sound of the {b}?",
    "Where is the {b} sound relative to the {a} sound, in direction and distance?",
)
_T3_RECEIVER = {
    "left": ("Are the sounds of {a} coming from the left of you?",),
    "right": ("Is the sound of {a} coming from your right?",),
    "front": ("Is the sound of {a} coming from in front of you?",),
    "back": (
        "Are the sounds of {a} coming from your back?",
        "Is the {a} sound originating from the rear?",
    ),
    "up": ("Is the sound of {a} coming from overhead?",),
    "down": ("Is the sound of {a} originating from below you?",),
}  # fmt: skip
_T3_SOURCE = {
    "left": ("Are the sounds of {a} coming from the left of the sound of {b}?",),
    "right": ("Is the sound of {a} to the right of the sound of {b}?",),
    "front": ("Is the sound of {a} located in front compared to {b}?",),
    "back": ("Is the sound of {a} located behind compared to {b}?",),
    "up": ("Is the sound of {a} originating from above in relation to {b}?",),
    "down": ("Is the sound of {a} originating from below in relation to {b}?",),
}
_T3_SAME_SIDE = ("Are {a} and {b} both originating from one side of you?",)
_T3_CLOSER = (
    "Does the {a} sound arrive from a smaller direct distance than the {b} sound?",
    "Is {a} coming from a nearer point than {b} when considering a direct path?",
    "Is the origin of {a} sound located closer than the origin of {b} sound?",
)
_T4_QUESTION = {
    "left": "Which sound can be heard to the left of the receiver?",
    "right": "Which sound can be heard to the right of the receiver?",
    "front": "From the receiver's perspective, which sound originates ahead?",
    "back": "From the receiver's perspective, which sound originates behind?",
    "up": "Identify the sound that is located on the upper side of the receiver.",
    "down": "Identify the sound that is located on the lower side of the receiver.",
}
# Side phrases: [0] completes "Therefore, {s1} is ...", [1] "{s1} ...",
# [2] "both sounds lie ...".
_SIDE_WORDS = {
    "left": ("on the left side of the receiver", "lies on the left", "on the left side"),
    "right": ("on the right side of the receiver", "lies on the right", "on the right side"),
    "front": ("in front of the receiver", "lies ahead", "in front of the receiver"),
    "back": ("behind the receiver", "is behind the receiver", "at the back side"),
    "up": ("coming from above the receiver", "is on the upper side", "on the upper side"),
    "down": ("coming from below the receiver", "is on the lower side", "beneath the receiver"),
}
# Answer formats (appendix A.4): {s1}/{s2} names, {p1}/{p2} positions; ``one``
# names {s1} as on the side ({w*} its phrases), ``both`` places both there.
# (The appendix's "one front" format ends "on the left side", a slip: the
# side phrase of the side asked about is used.)
_T4_ONE = (
    "{s1} originates from {p1} while {s2} is at {p2}. Therefore, {s1} is {w0}.",
    "{s1} is located at {p1}, while {s2} is positioned at {p2}. Therefore, {s1} {w1}.",
    "Relative to the receiver, {s1} comes from {p1} and {s2} from {p2}. This shows that {s1} {w1}.",
    "With respect to the receiver, {s1} at {p1} and {s2} at {p2} indicate that {s1} {w1}.",
)
_T4_BOTH = (
    "Both {s1} and {s2} are positioned at {p1} and {p2}, which lie {w2}.",
    "Since {s1} is at {p1} and {s2} is at {p2}, both sounds lie {w2}.",
    "Because {s1} originates from {p1} and {s2} from {p2}, both are situated {w2}.",
)
_T4_NONE = (
    "Relative to the receiver, {s1} and {s2} at {p1} and {p2} do not correspond to {side} "
    "directions.",
)


def clock(azimuth: float) -> int:
    """Clock sector 1..12 of a BAT azimuth (90 = ahead = 12, 0 = right = 3)."""
    h = round(((90.0 - float(azimuth)) % 360.0) / 30.0) % 12
    return 12 if h == 0 else h


def clock_phrase(hour: int) -> str:
    """ "seven o'clock"."""
    return f"{CLOCK_WORDS[hour % 12]} o'clock"


def vertical(elevation: float) -> str:
    """``'up'`` at or above the horizontal (BAT elevation >= 90), else ``'down'``."""
    return "up" if float(elevation) >= 90.0 else "down"


def quantize_distance(d: float) -> float:
    """Distance to the 0.5 m grid, clipped to 0..10 m."""
    return min(max(0.5 * round(2.0 * float(d)), 0.0), MAX_DISTANCE)


def on_side(label: dict[str, Any], side: str) -> bool:
    """Whether a source is on ``side`` (left/right/front/back/up/down) of the listener."""
    if side in ("up", "down"):
        return vertical(label["elevation"]) == side
    return clock(label["azimuth"]) in SIDE_HOURS[side]


def position_answer(label: dict[str, Any]) -> str:
    """The Type II answer "seven o'clock; down; 2.5 m"."""
    return (
        f"{clock_phrase(clock(label['azimuth']))}; {vertical(label['elevation'])}; "
        f"{quantize_distance(label['distance_m']):.1f} m"
    )


def _xyz(label: dict[str, Any]) -> np.ndarray:
    """Right, front, up (m) of a BAT label."""
    az, el = math.radians(label["azimuth"]), math.radians(label["elevation"] - 90)
    d = float(label["distance_m"])
    return d * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])


def relative_label(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """BAT-style label of source ``b`` seen from source ``a`` (listener's axes)."""
    v = _xyz(b) - _xyz(a)
    d = float(np.linalg.norm(v))
    az = (round(math.degrees(math.atan2(v[1], v[0]))) + 360) % 360
    el = round(math.degrees(math.atan2(v[2], math.hypot(v[0], v[1])))) + 90
    return {"azimuth": az, "elevation": el, "distance_m": d}


def _source_relation(kind: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    pa, pb = _xyz(a), _xyz(b)
    axis = {"left": 0, "right": 0, "front": 1, "back": 1, "up": 2, "down": 2}[kind]
    sign = -1.0 if kind in ("left", "back", "down") else 1.0
    return bool(sign * (pa[axis] - pb[axis]) > 0)


def _pos(label: dict[str, Any], side: str) -> str:
    p = clock_phrase(clock(label["azimuth"]))
    return f"{p}, {vertical(label['elevation'])}" if side in ("up", "down") else p


def _type4(
    side: str, names: list[str], labels: list[dict[str, Any]], rng: np.random.Generator
) -> tuple[str, list[str]]:
    """A Type IV answer about ``side`` and the names of the sources on it."""
    hit = [on_side(x, side) for x in labels]
    opp = OPPOSITE[side]
    on = [n for n, h in zip(names, hit, strict=True) if h]
    i, j = (0, 1) if rng.random() < 0.5 else (1, 0)
    fill = {"p1": _pos(labels[i], side), "p2": _pos(labels[j], side)}
    s1, s2 = names[i], names[j]
    if all(hit):
        t, w = str(rng.choice(_T4_BOTH)), _SIDE_WORDS[side]
    elif not any(hit) and all(on_side(x, opp) for x in labels):
        t, w = str(rng.choice(_T4_BOTH)), _SIDE_WORDS[opp]
    elif not any(hit):
        t, w = str(rng.choice(_T4_NONE)), _SIDE_WORDS[side]
    else:
        k = 0 if hit[0] else 1  # the source on the side
        other = labels[1 - k]
        if on_side(other, opp) and rng.random() < 0.5:
            # Name the other source on the opposite side.
            k, w = 1 - k, _SIDE_WORDS[opp]
        else:
            w = _SIDE_WORDS[side]
        # {s1} of the template is the named source.
        i, j = k, 1 - k
        s1, s2 = names[i], names[j]
        fill = {"p1": _pos(labels[i], side), "p2": _pos(labels[j], side)}
        t = str(rng.choice(_T4_ONE))
    text = t.format(s1=s1, s2=s2, w0=w[0], w1=w[1], w2=w[2], side=side, **fill)
    return text, on


def _where(label: dict[str, Any]) -> dict[str, Any]:
    """The answer targets of a position question: clock, vertical, distance, angles."""
    return {"clock": clock(label["azimuth"]), "vertical": vertical(label["elevation"]),
            "distance_m": quantize_distance(label["distance_m"]),
            "azimuth": int(label["azimuth"]), "elevation": int(label["elevation"])}  # fmt: skip


def _type3(
    events: list[str], labels: list[dict[str, Any]], i: int, j: int, rng: np.random.Generator
) -> tuple[str, str, str, bool]:
    """A Type III (yes/no) question on sources ``i`` and ``j``: its kind, side,
    text and answer."""
    kind = str(rng.choice(["receiver", "source", "same_side", "closer"]))
    side = str(rng.choice(list(_T3_RECEIVER)))
    if kind == "receiver":
        q = str(rng.choice(_T3_RECEIVER[side])).format(a=events[i])
        yes = on_side(labels[i], side)
    elif kind == "source":
        q = str(rng.choice(_T3_SOURCE[side])).format(a=events[i], b=events[j])
        yes = _source_relation(side, labels[i], labels[j])
    elif kind == "same_side":
        q = str(rng.choice(_T3_SAME_SIDE)).format(a=events[i], b=events[j])
        yes = any(all(on_side(x, s) for x in labels[:2]) for s in ("left", "right"))
    else:
        q = str(rng.choice(_T3_CLOSER)).format(a=events[i], b=events[j])
        yes = float(labels[i]["distance_m"]) < float(labels[j]["distance_m"])
    return kind, side, q, yes


def generate_qa(
    scene_id: str,
    events: list[str],
    labels: list[dict[str, Any]],
    rng: np.random.Generator,
    *,
    split: str = "train",
) -> list[dict[str, Any]]:
    """QA rows (JSON-ready dicts) of one scene.

    A single-source scene gives one Type I and one Type II question; a
    dual-source scene gives Type I and II (dual), Type II ``between``, one
    Type III and one Type IV question (those naming both sources need two
    distinct event names).

    Parameters
    ----------
    scene_id : str
    events : list of str
        ``events[k]`` names source ``k``.
    labels : list of dict
        BAT labels (``azimuth``, ``elevation``, ``distance_m``) per source.
    rng : np.random.Generator
        Template and question choices (deterministic for a seed).
    split : str
    """
    rows: list[dict[str, Any]] = []
    n = min(len(events), 2)

    def add(qtype: str, kind: str, q: str, a: str, **target: Any) -> None:
        rows.append({"scene": scene_id, "split": split, "type": qtype, "n_sources": n,
                     "kind": kind, "events": list(events[:n]), "question": q, "answer": a,
                     **target})  # fmt: skip

    if n == 1:
        add("I", "detect", str(rng.choice(_T1_SINGLE)), events[0], target_events=[events[0]])
        add("II", "locate", str(rng.choice(_T2_SINGLE)), position_answer(labels[0]),
            **_where(labels[0]))  # fmt: skip
        return rows
    k = int(rng.integers(2))
    lab = labels[k]
    q = str(rng.choice(_T1_DUAL)).format(
        c=clock_phrase(clock(lab["azimuth"])), v=vertical(lab["elevation"]),
        d=f"{quantize_distance(lab['distance_m']):.1f}",
    )  # fmt: skip
    add("I", "detect_at", q, events[k], target_events=[events[k]])
    if events[0] == events[1]:
        return rows
    k = int(rng.integers(2))
    add("II", "locate", str(rng.choice(_T2_DUAL)).format(a=events[k]),
        position_answer(labels[k]), **_where(labels[k]))  # fmt: skip
    i, j = (0, 1) if rng.random() < 0.5 else (1, 0)
    rel = relative_label(labels[i], labels[j])
    q = str(rng.choice(_T2_BETWEEN)).format(a=events[i], b=events[j])
    add("II", "between", q, position_answer(rel), **_where(rel))
    kind, side, q, yes = _type3(events, labels, i, j, rng)
    add("III", kind, q, "Yes" if yes else "No", relation=side if kind in ("receiver", "source")
        else kind, label=yes)  # fmt: skip
    side = str(rng.choice(list(_T4_QUESTION)))
    text, on = _type4(side, list(events[:2]), list(labels[:2]), rng)
    add("IV", "cot", _T4_QUESTION[side], text, side=side, on_side=on,
        clocks=[clock(x["azimuth"]) for x in labels[:2]],
        verticals=[vertical(x["elevation"]) for x in labels[:2]])  # fmt: skip
    return rows


def qa_from_indices(
    labels: list[dict[str, Any]],
    rooms: list[int],
    events: list[str],
    n_items: int,
    rng: np.random.Generator,
    *,
    dual: float = 0.5,
    split: str = "train",
) -> list[dict[str, Any]]:
    """QA rows over (RIR, source) indices, without mixtures.

    Parameters
    ----------
    labels : list of dict
        BAT labels of each RIR of the pool (``azimuth``, ``elevation``,
        ``distance_m``).
    rooms : list of int
        The room (one listener position) each RIR belongs to; the two sources
        of a dual-source item are two RIRs of one room.
    events : list of str
        The event name of each dry source of the pool.
    n_items : int
        Number of items (mixtures); each gives the rows of :func:`generate_qa`.
    rng : np.random.Generator
    dual : float
        Share of dual-source items (where the room has two RIRs and the pool
        two sources).
    split : str

    Returns
    -------
    list of dict
        :func:`generate_qa` rows with ``scene`` the item id (``"item-000007"``),
        ``rirs`` (RIR indices) and ``sources`` (source indices), in source order.
    """
    from ..exceptions import ParameterError

    if len(labels) != len(rooms) or not labels or not events:
        raise ParameterError(f"one room per RIR and non-empty pools required, got {len(labels)} "
                             f"labels, {len(rooms)} rooms, {len(events)} sources")  # fmt: skip
    by_room: dict[int, list[int]] = {}
    for i, r in enumerate(rooms):
        by_room.setdefault(int(r), []).append(i)
    rows: list[dict[str, Any]] = []
    for k in range(int(n_items)):
        first = int(rng.integers(len(labels)))
        mates = [i for i in by_room[int(rooms[first])] if i != first]
        two = bool(mates) and len(events) > 1 and rng.random() < dual
        rirs = [first, int(rng.choice(mates))] if two else [first]
        srcs = [int(x) for x in rng.choice(len(events), size=len(rirs), replace=False)]
        item = f"item-{k:06d}"
        for row in generate_qa(item, [events[s] for s in srcs], [labels[r] for r in rirs], rng,
                               split=split):  # fmt: skip
            rows.append({**row, "rirs": rirs, "sources": srcs})
    return rows
