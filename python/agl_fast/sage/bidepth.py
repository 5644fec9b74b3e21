"""Streamed SAGE training on BiDepth (:mod:`.bidepth`): the one-source
scenes of its questions, rendered when a batch is made.

:class:`BidepthData` stands in for both the BRIR bank and the sources of
:func:`agl_fast.sage.fit.fit` (``agl-fast spatial train --stream --data
bidepth.json``); its batches (:class:`BidepthScenes`) have the keys and
shapes of :class:`.stream.StreamingScenes`. Labels: azimuth, elevation and
distance class of the scene's RIR from the layout's ``positions`` file
(:func:`.bidepth.read_positions`), event classes from the clip's Type I
answers.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ..exceptions import ParameterError
from ..spatial.bidepth import (
    MAX_ANSWER_EVENTS,
    MAX_EVENT_CLASSES,
    BidepthLayout,
    event_names,
    iter_qa_rows,
    map_type,
    pairs_of,
    read_positions,
    render_row,
)

__all__ = ["BidepthData", "BidepthScenes"]

logger = logging.getLogger("agl_fast.sage.bidepth")


class BidepthData:
    """The one-source scenes of a BiDepth copy, indexed for streamed SAGE
    training (:func:`agl_fast.sage.fit.fit` takes it in place of a BRIR
    bank and of the sources).

    One pass over each split's QA file keeps, per distinct (clip, RIR) pair
    of a one-source row, two integers and its labels (from ``positions``);
    the event classes of a clip are the names of its Type I answers, the
    vocabulary (``vocab``) their sorted union over both splits. Two-source
    rows are counted, not trained on (SAGE's targets are one direction and
    one distance per clip). ``counts``: rows read, skipped (by reason),
    scenes dropped for want of a position, distances beyond the last class
    (set to class 20), scenes with no event target and Type I answers over
    :data:`.bidepth.MAX_ANSWER_EVENTS` names (no event target from them).
    A vocabulary over :data:`.bidepth.MAX_EVENT_CLASSES` names (it sizes the
    model's event head) is refused. Ids are held as Python strings (the
    memory of one long id is its own, not that of every row).
    ``allow_outside_roots`` is :attr:`.bidepth.BidepthLayout.allow_outside_roots`
    for a layout given by path.
    """

    def __init__(self, layout: BidepthLayout | str | Path, *,
                 type_map: dict[str, str] | None = None,
                 allow_outside_roots: bool = False) -> None:  # fmt: skip
        self.layout = BidepthLayout.of(layout, allow_outside_roots=allow_outside_roots)
        self.type_map = type_map
        self.counts: Counter[str] = Counter()
        self.positions = read_positions(self.layout.positions)
        scans = {s: self._scan(s) for s in ("train", "test") if self.layout.qa_file(s).is_file()}
        if not scans:
            raise ParameterError(f"no QA file: {self.layout.qa_file('train')}")
        self.vocab = sorted(set().union(*(set(n) for sc in scans.values()
                                          for n in sc["events"].values())))  # fmt: skip
        if len(self.vocab) > MAX_EVENT_CLASSES:
            raise ParameterError(f"BiDepth {self.layout.qa_data_root}: {len(self.vocab)} distinct "
                                 f"event names in the Type I answers, over the limit of "
                                 f"{MAX_EVENT_CLASSES} classes")  # fmt: skip
        self._index = {s: self._compact(sc) for s, sc in scans.items()}
        if self.counts:
            logger.info("BiDepth %s: %s", self.layout.qa_data_root, dict(self.counts))

    @property
    def skipped(self) -> dict[str, int]:
        """Rows skipped, by reason."""
        return {k[8:]: v for k, v in self.counts.items() if k.startswith("skipped ")}

    def _scan(self, split: str) -> dict[str, Any]:
        audio: dict[str, int] = {}
        rirs: dict[str, int] = {}
        scenes: dict[tuple[int, int], None] = {}
        events: dict[int, list[str]] = {}
        for row in iter_qa_rows(self.layout.qa_file(split)):
            self.counts["rows"] += 1
            pairs, why = pairs_of(row)
            if why is not None:
                self.counts[f"skipped {why}"] += 1
                continue
            if len(pairs) == 2:
                self.counts["two-source rows (not for SAGE)"] += 1
                continue
            a = audio.setdefault(pairs[0][0], len(audio))
            scenes[(a, rirs.setdefault(pairs[0][1], len(rirs)))] = None
            if map_type(row.get("question_type"), self.type_map) == "I" and a not in events:
                names = event_names(row["answer"])
                if len(names) > MAX_ANSWER_EVENTS:
                    self.counts[f"Type I answers over {MAX_ANSWER_EVENTS} names (ignored)"] += 1
                else:
                    events[a] = names
        return {"audio": audio, "rirs": rirs, "scenes": scenes, "events": events}

    def _compact(self, scan: dict[str, Any]) -> dict[str, Any]:
        rir_names = list(scan["rirs"])
        keep, labels = [], []
        for a, r in scan["scenes"]:
            lab = self.positions.get(rir_names[r])
            if lab is None:
                self.counts["scenes without a position"] += 1
                continue
            keep.append((a, r))
            if lab["distance_class"] > 20:
                self.counts["distance over 10 m (class 20)"] += 1
            if a not in scan["events"]:
                self.counts["scenes whose clip has no Type I answer (no event target)"] += 1
            labels.append((lab["azimuth"], lab["elevation"], min(20, lab["distance_class"])))
        cls = {x: i for i, x in enumerate(self.vocab)}
        return {
            "audio": list(scan["audio"]),  # Python strings: no fixed-width padding
            "rirs": rir_names,
            "scenes": np.array(keep, dtype=np.int32).reshape(-1, 2),
            "labels": np.array(labels, dtype=np.int64).reshape(-1, 3),
            "events": {a: [cls[x] for x in names] for a, names in scan["events"].items()},
        }

    def __len__(self) -> int:
        return len(self._index.get("train", {}).get("scenes", ()))

    def index(self, split: str) -> dict[str, Any]:
        """The scene arrays of ``split`` (``'train'`` or ``'test'``)."""
        idx = self._index.get(split)
        if idx is None or len(idx["scenes"]) == 0:
            why = "" if self.positions else " (no 'positions' file in the layout: SAGE needs them)"
            raise ParameterError(f"BiDepth {self.layout.qa_file(split)}: no one-source scene "
                                 f"with labels{why}")  # fmt: skip
        return idx

    def scenes(self, sources: Any, config: Any, *, epoch: int = 0, start: int = 0,
               rank: int = 0, world: int = 1) -> BidepthScenes:  # fmt: skip
        """The streamed batches of one epoch (``sources`` is this object)."""
        return BidepthScenes(self, config, epoch=epoch, start=start, rank=rank, world=world)


class BidepthScenes(IterableDataset):  # type: ignore[type-arg]
    """Batches of BiDepth scenes, as :class:`.stream.StreamingScenes` yields
    them (``x``, ``events``, ``distance``, ``azimuth``, ``elevation``,
    ``batch``): each batch ``config.batch_size`` scenes of ``config.split``
    drawn from ``(seed, epoch, batch)``, rank ``rank`` taking its slice."""

    def __init__(self, data: BidepthData, config: Any, *, epoch: int = 0, start: int = 0,
                 rank: int = 0, world: int = 1) -> None:  # fmt: skip
        super().__init__()
        if config.batch_size % world:
            raise ParameterError(f"batch_size {config.batch_size} must be a multiple of the "
                                 f"{world} processes")  # fmt: skip
        if config.mixup or config.weighted:
            raise ParameterError("mixup and weighted sampling apply to a BRIR bank, not to "
                                 "BiDepth's fixed scenes")  # fmt: skip
        self.data, self.config = data, config
        self.idx = data.index(config.split)
        self.epoch, self.start, self.rank, self.world = int(epoch), int(start), rank, world

    def __len__(self) -> int:
        return max(0, self.config.batches - self.start)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        for b in range(self.start + wid, self.config.batches, nw):
            yield self.batch(b)

    def batch(self, b: int) -> dict[str, Any]:
        """Batch ``b`` of the epoch (this rank's slice)."""
        from ..presets import bat

        cfg, idx = self.config, self.idx
        rng = np.random.default_rng([cfg.seed, self.epoch, b])
        pick = rng.integers(0, len(idx["scenes"]), cfg.batch_size)
        per = cfg.batch_size // self.world
        pick = pick[self.rank * per : (self.rank + 1) * per]
        events = np.zeros((len(pick), len(self.data.vocab)), dtype=np.float32)
        audio = []
        for i, s in enumerate(pick):
            a, r = (int(v) for v in idx["scenes"][s])
            events[i, idx["events"].get(a, [])] = 1.0
            pair = [(str(idx["audio"][a]), str(idx["rirs"][r]))]
            audio.append(render_row(self.data.layout, pair, seconds=cfg.seconds))
        lab = idx["labels"][pick]
        return {
            "x": torch.from_numpy(np.asarray(bat(np.stack(audio)))),
            "events": torch.from_numpy(events),
            "azimuth": torch.from_numpy(lab[:, 0].copy()),
            "elevation": torch.from_numpy(lab[:, 1].copy()),
            "distance": torch.from_numpy(lab[:, 2].copy()),
            "batch": b,
        }
