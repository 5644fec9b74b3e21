"""BiDepth-style question-answer pairs from simulated scene labels.

Four question types, each with several templates, deterministic for a seed:

``detection``
    Which sound events are heard ("a dog bark and a siren").
``direction_distance``
    Where a source is: o'clock direction (12 ahead, 3 to the right), up /
    down / level, and the distance in metres (0.5 m steps).
``relation``
    Yes/No questions on two sources: left/right, front/back, up/down,
    nearer/farther.
``reasoning``
    The relation questions answered with a chain of thought: the position
    of each source first, then the comparison, then "Answer: Yes/No".

Positions come from the BAT labels (:func:`agl_fast.spatial.simulate.bat_labels`):
azimuth counter-clockwise from the right (front 90), elevation with the
horizontal at 90.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["QUESTION_TYPES", "clock", "generate_qa", "position_phrase"]

QUESTION_TYPES = ("detection", "direction_distance", "relation", "reasoning")

_DETECT = (
    "What sound events can you hear in this recording?",
    "Identify the sounds present in the audio.",
    "Which sources are audible here?",
)
_WHERE = (
    "Where is the {e} relative to you, and how far away?",
    "In which direction and at what distance is the {e}?",
    "Locate the {e}: direction and distance, please.",
)
_REL = {
    "left": ("Is the {a} to the left of the {b}?", "Is the {a} further left than the {b}?"),
    "right": ("Is the {a} to the right of the {b}?", "Is the {a} further right than the {b}?"),
    "front": ("Is the {a} more in front of you than the {b}?", "Is the {a} ahead of the {b}?"),
    "behind": ("Is the {a} more behind you than the {b}?", "Is the {a} behind the {b}?"),
    "above": ("Is the {a} higher than the {b}?", "Is the {a} above the {b}?"),
    "below": ("Is the {a} lower than the {b}?", "Is the {a} below the {b}?"),
    "nearer": ("Is the {a} closer to you than the {b}?", "Is the {a} nearer than the {b}?"),
    "farther": (
        "Is the {a} farther from you than the {b}?",
        "Is the {a} further away than the {b}?",
    ),
}


def clock(azimuth: float) -> int:
    """O'clock direction of a BAT azimuth (90 = ahead = 12, 0 = right = 3)."""
    h = round(((90.0 - azimuth) % 360.0) / 30.0) % 12
    return 12 if h == 0 else h


def _vertical(elevation: float) -> str:
    e = elevation - 90.0
    return "above you" if e > 10 else "below you" if e < -10 else "at ear level"


def position_phrase(label: dict[str, Any]) -> str:
    """ "at 3 o'clock, at ear level, about 2.5 m away"."""
    d = 0.5 * round(2 * float(label["distance_m"]))
    where = f"at {clock(label['azimuth'])} o'clock, {_vertical(label['elevation'])}"
    return f"{where}, about {d:.1f} m away"


def _xyz(label: dict[str, Any]) -> np.ndarray:
    az, el = math.radians(label["azimuth"]), math.radians(label["elevation"] - 90)
    d = float(label["distance_m"])
    # right, front, up
    return d * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])


def _relation(kind: str, a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, str]:
    pa, pb = _xyz(a), _xyz(b)
    axis = {"left": 0, "right": 0, "front": 1, "behind": 1, "above": 2, "below": 2}
    if kind in axis:
        i = axis[kind]
        sign = -1 if kind in ("left", "behind", "below") else 1
        unit = "m to the right" if i == 0 else "m ahead" if i == 1 else "m up"
        why = f"{pa[i]:+.1f} {unit} vs {pb[i]:+.1f} {unit}"
        return bool(sign * (pa[i] - pb[i]) > 0), why
    da, db = float(a["distance_m"]), float(b["distance_m"])
    why = f"{da:.1f} m vs {db:.1f} m"
    return (da < db) if kind == "nearer" else (da > db), why


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def generate_qa(
    scene_id: str,
    events: list[str],
    labels: list[dict[str, Any]],
    rng: np.random.Generator,
    *,
    split: str = "train",
) -> list[dict[str, Any]]:
    """QA rows (JSON-ready dicts) of one scene: one per applicable type.

    ``events[k]`` names source ``k`` and ``labels[k]`` is its BAT label; the
    relation and reasoning types need two sources with distinct names.
    """
    rows: list[dict[str, Any]] = []

    def add(qtype: str, q: str, a: str, **extra: Any) -> None:
        rows.append({"scene": scene_id, "split": split, "type": qtype, "question": q,
                     "answer": a, **extra})  # fmt: skip

    add("detection", str(rng.choice(_DETECT)), _join([f"a {e}" for e in events]) + ".")
    k = int(rng.integers(len(events)))
    add(
        "direction_distance",
        str(rng.choice(_WHERE)).format(e=events[k]),
        f"The {events[k]} is {position_phrase(labels[k])}.",
    )
    if len(events) >= 2 and events[0] != events[1]:
        i, j = (0, 1) if rng.random() < 0.5 else (1, 0)
        for qtype in ("relation", "reasoning"):
            kind = str(rng.choice(list(_REL)))
            q = str(rng.choice(_REL[kind])).format(a=events[i], b=events[j])
            yes, why = _relation(kind, labels[i], labels[j])
            word = "Yes" if yes else "No"
            if qtype == "relation":
                add(qtype, q, word, relation=kind, label=yes)
            else:
                cot = (
                    f"The {events[i]} is {position_phrase(labels[i])}; the {events[j]} is "
                    f"{position_phrase(labels[j])}. Comparing them ({why}), the statement is "
                    f"{'true' if yes else 'false'}. Answer: {word}."
                )
                add(qtype, q, cot, relation=kind, label=yes)
    return rows
