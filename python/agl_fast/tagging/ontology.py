"""The AudioSet ontology: 527 model classes, the parent/child hierarchy and
the seven top-level groups.

The data (``data/audioset_ontology.json``) lists every ontology node as
``{"mid", "name", "index", "children"}`` (``index`` is the position in the
527-way output of the released AudioSet models, ``-1`` for nodes that are not
model classes) and the seven roots as ``groups`` with the column keys the
AGL1K CSV uses (``human_sounds``, ``animal``, ``music``, ``natural_sounds``,
``sounds_of_things``, ``source_ambiguous_sounds``,
``channel_environment_and_background``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import numpy as np

__all__ = ["GROUP_KEYS", "Ontology", "ontology"]

GROUP_KEYS: tuple[str, ...] = (
    "human_sounds",
    "animal",
    "music",
    "natural_sounds",
    "sounds_of_things",
    "source_ambiguous_sounds",
    "channel_environment_and_background",
)


@dataclass(frozen=True)
class Ontology:
    """AudioSet classes and hierarchy.

    Attributes
    ----------
    mids, names : tuple of str [length 527]
        Machine id and display name of each model class, in output order.
    group_keys, group_names : tuple of str [length 7]
    children : dict mid -> tuple of child mids (every node, abstract ones too)
    node_names : dict mid -> display name (every node)
    """

    mids: tuple[str, ...]
    names: tuple[str, ...]
    group_keys: tuple[str, ...]
    group_mids: tuple[str, ...]
    group_names: tuple[str, ...]
    children: dict[str, tuple[str, ...]]
    node_names: dict[str, str]
    _parents: dict[str, tuple[str, ...]] = field(repr=False)

    @property
    def n_classes(self) -> int:
        return len(self.mids)

    def index(self, name_or_mid: str) -> int:
        """Output index of a class given its display name or mid."""
        for seq in (self.mids, self.names):
            if name_or_mid in seq:
                return seq.index(name_or_mid)
        from ..exceptions import ParameterError

        raise ParameterError(f"unknown AudioSet class {name_or_mid!r}")

    def parents(self, mid: str) -> tuple[str, ...]:
        """Direct parents of a node (empty for the seven roots)."""
        return self._parents.get(mid, ())

    def ancestors(self, mid: str) -> set[str]:
        """Every node above ``mid`` (not including it)."""
        out: set[str] = set()
        stack = list(self.parents(mid))
        while stack:
            m = stack.pop()
            if m not in out:
                out.add(m)
                stack.extend(self.parents(m))
        return out

    def groups_of(self, mid: str) -> tuple[str, ...]:
        """Keys of the top-level groups a node belongs to (a class may sit
        under more than one root)."""
        up = self.ancestors(mid) | {mid}
        return tuple(k for k, g in zip(self.group_keys, self.group_mids, strict=True) if g in up)

    def group_matrix(self) -> np.ndarray:
        """Membership matrix, ``[shape=(7, 527), dtype=bool]``: row ``g`` marks
        the classes under group ``g``."""
        m = np.zeros((len(self.group_keys), self.n_classes), dtype=bool)
        for i, mid in enumerate(self.mids):
            for k in self.groups_of(mid):
                m[self.group_keys.index(k), i] = True
        return m


@cache
def ontology() -> Ontology:
    """The packaged AudioSet ontology (loaded once)."""
    text = resources.files(__package__).joinpath("data/audioset_ontology.json").read_text("utf-8")
    doc = json.loads(text)
    nodes = doc["nodes"]
    classes = sorted((n for n in nodes if n["index"] >= 0), key=lambda n: n["index"])
    children = {n["mid"]: tuple(n["children"]) for n in nodes}
    parents: dict[str, list[str]] = {}
    for mid, kids in children.items():
        for c in kids:
            parents.setdefault(c, []).append(mid)
    groups = doc["groups"]
    return Ontology(
        mids=tuple(n["mid"] for n in classes),
        names=tuple(n["name"] for n in classes),
        group_keys=tuple(g["key"] for g in groups),
        group_mids=tuple(g["mid"] for g in groups),
        group_names=tuple(g["name"] for g in groups),
        children=children,
        node_names={n["mid"]: n["name"] for n in nodes},
        _parents={k: tuple(v) for k, v in parents.items()},
    )
