"""OWL's questions streamed: QA rows built from indices, features rendered
on the fly, with the BRIR bank, the dry sources and the rendering of SAGE's
streamed training (:mod:`.stream`).

A question is a function of its index: row ``i`` of a selection (question
types, numbers of sources) draws, from ``(seed, selection, i)`` alone, the
number of sources, a BRIR of the split, for two sources a second BRIR of
the same room (:attr:`.stream.RirBank.room`), distinct dry sources, and
one of the :func:`.qa.generate_qa` questions of that scene whose type is
selected. Its ``bat`` features are rendered when a batch asks for them
(:func:`.stream.render_scenes`: each source at -14 dBFS through its BRIR,
the renders averaged, as the authors' loader). Nothing is stored per
question: a selection is a lazy sequence (:class:`StreamedQa`), and host
memory holds the bank's labels, the sources' labels and one batch.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from ..exceptions import ParameterError
from ..sage.stream import RirBank, SceneSpec, render_scenes
from ..spatial.qa import generate_qa

__all__ = ["StreamedQa", "StreamingQaSource"]

_LOG = logging.getLogger("agl_fast.owl.stream")

#: Draws of a scene before a row is declared impossible (a drawn dual scene
#: of two sources of one event name has no Type II-IV question).
MAX_TRIES = 64
#: Metres per BAT distance class (:func:`.scene.bat_labels` rounds ``2 * d``).
DISTANCE_STEP_M = 0.5


class StreamedQa(Sequence[dict[str, Any]]):
    """The ``n`` questions of one selection, each made when indexed (see
    the module docs); indexing the same position twice gives the same row."""

    def __init__(
        self, owner: StreamingQaSource, types: Sequence[str], n_sources: Sequence[int], n: int
    ) -> None:
        self.owner, self.n = owner, int(n)
        self.types = sorted({str(t) for t in types})
        self.n_sources = sorted({int(k) for k in n_sources})
        key = f"{','.join(self.types)}|{','.join(map(str, self.n_sources))}"
        self.key = zlib.crc32(key.encode())

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.n))]
        k = int(i) + self.n if int(i) < 0 else int(i)
        if not 0 <= k < self.n:
            raise IndexError(i)
        return self.owner.row(self, k)


class StreamingQaSource:
    """A :class:`~agl_fast.owl.train.QaSource` over a BRIR bank and dry
    sources: ``select`` gives ``scenes`` questions per selection, built
    from indices; ``features`` renders them.

    Parameters
    ----------
    bank : RirBank
    sources : SyntheticSources or FileSources (:mod:`.stream`)
        ``len``, ``labels(i)`` (the first label names the source's event),
        ``load(i)`` and ``vocab``.
    scenes : int
        Questions per selection (per curriculum stage).
    seconds : float
        Clip length (s).
    seed : int
    split : str or None
        The bank's BRIRs used (None: all).
    """

    def __init__(
        self, bank: RirBank, sources: Any, *, scenes: int, seconds: float, seed: int = 0,
        split: str | None = "train",
    ) -> None:  # fmt: skip
        if scenes < 1 or seconds <= 0 or len(sources) < 1:
            raise ParameterError(f"streamed QA needs scenes >= 1, seconds > 0 and sources, got "
                                 f"{scenes}, {seconds}, {len(sources)}")  # fmt: skip
        self.bank, self.sources = bank, sources
        self.scenes, self.seconds, self.seed = int(scenes), float(seconds), int(seed)
        self.split = split or "all"
        self.rirs = bank.indices(split) if split else np.arange(len(bank.split))
        rooms = bank.room[self.rirs]
        order = np.argsort(rooms, kind="stable")
        starts = np.searchsorted(rooms[order], rooms, side="left")
        ends = np.searchsorted(rooms[order], rooms, side="right")
        self._by_room, self._start, self._end = self.rirs[order], starts, ends
        self._pairs = bool((ends - starts > 1).any())

    def select(self, types: Sequence[str], n_sources: Sequence[int]) -> StreamedQa:
        """The lazy sequence of ``scenes`` questions of these types and numbers of sources."""
        counts = {int(k) for k in n_sources}
        if not counts or not counts <= {1, 2}:
            raise ParameterError(f"streamed scenes have 1 or 2 sources, asked for {sorted(counts)}")
        if 2 in counts and (not self._pairs or len(self.sources) < 2):
            counts.discard(2)
            if not counts:
                raise ParameterError("two-source questions need a room with two BRIRs in the "
                                     "bank's split and two sources")  # fmt: skip
            _LOG.warning("no two-source scene possible: single-source questions only")
        if not set(types) & ({"I", "II"} if counts == {1} else {"I", "II", "III", "IV"}):
            raise ParameterError(f"no question of types {list(types)} has {sorted(counts)} "
                                 "source(s)")  # fmt: skip
        return StreamedQa(self, types, sorted(counts), self.scenes)

    def _labels(self, rir: int) -> dict[str, Any]:
        lab = self.bank.labels
        return {"azimuth": int(lab["azimuth"][rir]), "elevation": int(lab["elevation"][rir]),
                "distance_m": DISTANCE_STEP_M * int(lab["distance_class"][rir])}  # fmt: skip

    def _scene(self, rng: np.random.Generator, n: int) -> tuple[list[int], list[int]] | None:
        k = int(rng.integers(len(self.rirs)))
        rirs = [int(self.rirs[k])]
        if n == 2:
            mates = [int(j) for j in self._by_room[self._start[k] : self._end[k]] if j != rirs[0]]
            if not mates:
                return None
            rirs.append(int(rng.choice(mates)))
        srcs = [int(s) for s in rng.choice(len(self.sources), size=n, replace=False)]
        return rirs, srcs

    def row(self, sel: StreamedQa, i: int) -> dict[str, Any]:
        """Question ``i`` of selection ``sel`` (a :func:`.qa.generate_qa`
        row with ``rirs`` and ``sources``, the scene's BRIR and source indices)."""
        rng = np.random.default_rng([self.seed, sel.key, i])
        scene = f"stream-{sel.key:08x}-{i:09d}"
        for _ in range(MAX_TRIES):
            n = int(rng.choice(sel.n_sources))
            drawn = self._scene(rng, n)
            if drawn is None:
                continue
            rirs, srcs = drawn
            events = [self.sources.vocab[self.sources.labels(s)[0]] for s in srcs]
            rows = generate_qa(scene, events, [self._labels(r) for r in rirs], rng,
                               split=self.split)  # fmt: skip
            hits = [r for r in rows if r["type"] in sel.types]
            if hits:
                return {**hits[int(rng.integers(len(hits)))], "rirs": rirs, "sources": srcs}
        raise ParameterError(f"no scene of {MAX_TRIES} draws gave a question of types "
                             f"{sel.types} with {sel.n_sources} sources (row {i})")  # fmt: skip

    def features(self, rows: list[dict[str, Any]]) -> Any:
        """``bat`` features ``[len(rows), 4, frames, 128]`` (torch float32),
        rendered now from each row's ``sources`` and ``rirs``."""
        import torch

        from ..presets import bat

        try:
            specs = [SceneSpec(tuple(int(s) for s in r["sources"]),
                               tuple(int(j) for j in r["rirs"])) for r in rows]  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"a streamed row names no sources / rirs: {exc}") from exc
        n_rir, n_src = len(self.bank.split), len(self.sources)
        bad = [s for s in specs if any(not 0 <= j < n_rir for j in s.rirs)
               or any(not 0 <= k < n_src for k in s.sources)]  # fmt: skip
        if bad:
            raise ParameterError(f"{len(bad)} rows name BRIRs or sources out of range: {bad[0]}")
        audio = render_scenes(specs, self.sources, self.bank, self.seconds)
        return torch.from_numpy(np.asarray(bat(audio), dtype=np.float32))
