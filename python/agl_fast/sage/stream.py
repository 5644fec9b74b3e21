"""Streamed training scenes: binaural mixtures made on the fly from a bank of
BRIRs and a set of dry sources.

Storage grows with the BRIRs, not with the scenes: a scene is the pair
(source index, BRIR index), drawn per batch from ``(seed, epoch, batch)``,
rendered (-14 dBFS, :func:`agl_fast.fftconvolve` ``mode='truncate'``) and
turned into ``agl_fast.bat`` features when the batch is made. Host memory
holds one batch per DataLoader worker and the bank's labels; the BRIRs are
read through a memory map.

The bank (:class:`RirBank`) is a directory:

* ``brirs.npy``: float32 ``[n, 2, L]``, every BRIR cut or zero-padded to
  ``L`` samples (Spatial-AST pads or cuts its RIRs to 2 s, the default);
* ``rirs.jsonl``: one row per BRIR: ``azimuth``, ``elevation``,
  ``distance_class`` (the BAT labels), ``split`` and ``length`` (samples
  before padding), and optionally ``room`` (BRIRs of one room and listener
  share it; OWL's dual-source scenes pair two BRIRs of one room).

Mixup and weighted sampling follow Spatial-AST's training data code: with
probability ``mixup`` a second dry source is mixed in, ``lam *
a + (1 - lam) * b`` with ``lam ~ Beta(10, 10)``, both at -14 dBFS, before
the one BRIR is applied, and the event targets are ``lam`` and ``1 - lam``;
with ``weighted``, sources are drawn with replacement with probability
proportional to the sum over their labels of ``1000 / (count + 0.01)``
(``count``: the label's number of sources).

Sharding: a global batch is drawn in full and rank ``r`` of ``world`` takes
its ``r``-th contiguous slice, so one process and several see the same
examples; DataLoader workers take every ``num_workers``-th batch, which the
loader returns in order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ..exceptions import ParameterError
from ..spatial.dataset import SYNTHETIC_EVENTS, synthetic_event
from ..spatial.defaults import LOUDNESS_DBFS, SR

__all__ = [
    "BANK_ARRAY",
    "BANK_ROWS",
    "FileSources",
    "RirBank",
    "SceneSpec",
    "StreamConfig",
    "StreamingScenes",
    "SyntheticSources",
    "bank_from_dataset",
    "render_scenes",
    "sample_weights",
    "write_rir_bank",
]

logger = logging.getLogger("agl_fast.sage.stream")

BANK_ARRAY = "brirs.npy"
BANK_ROWS = "rirs.jsonl"
#: BRIR length in a bank (s): Spatial-AST pads or cuts its RIRs to 2 s.
RIR_SECONDS = 2.0
#: Mixup weight distribution Beta(a, a), as Spatial-AST.
MIXUP_BETA = 10.0
_LABEL_KEYS = ("azimuth", "elevation", "distance_class")


def write_rir_bank(
    out: str | Path, brirs: Sequence[np.ndarray], labels: Sequence[dict[str, Any]],
    *, length: int | None = None,
) -> Path:  # fmt: skip
    """Write a bank: ``brirs`` (each ``[2, L_i]``) cut or zero-padded to
    ``length`` samples (default ``RIR_SECONDS`` at 32 kHz), ``labels`` with
    ``azimuth``, ``elevation``, ``distance_class`` and ``split`` each."""
    if len(brirs) != len(labels) or not brirs:
        raise ParameterError(f"need as many BRIRs as labels (>0), got {len(brirs)}, {len(labels)}")
    n_len = int(length or round(RIR_SECONDS * SR))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    arr = np.lib.format.open_memmap(out / BANK_ARRAY, mode="w+", dtype=np.float32,
                                    shape=(len(brirs), 2, n_len))  # fmt: skip
    with open(out / BANK_ROWS, "w") as f:
        for i, (h, lab) in enumerate(zip(brirs, labels, strict=True)):
            h = np.asarray(h, dtype=np.float32)
            if h.ndim != 2 or h.shape[0] != 2:
                raise ParameterError(f"BRIR {i} must be [2, L], got {h.shape}")
            arr[i] = 0.0
            arr[i, :, : min(n_len, h.shape[1])] = h[:, :n_len]
            row = {k: int(lab[k]) for k in _LABEL_KEYS}
            if "room" in lab:
                row["room"] = int(lab["room"])
            f.write(json.dumps({**row, "split": lab.get("split", "train"),
                                "length": int(h.shape[1])}) + "\n")  # fmt: skip
    arr.flush()
    del arr
    return out


def bank_from_dataset(data: str | Path, out: str | Path, *, length: int | None = None) -> Path:
    """A bank of every source's BRIR of a simulated dataset
    (:mod:`agl_fast.spatial.dataset`), with its BAT labels and the scene's
    split; the scenes are read one at a time."""
    from ..spatial.dataset import load_scene

    data = Path(data)
    rows = [json.loads(x) for x in (data / "scenes.jsonl").read_text().splitlines() if x.strip()]
    brirs, labels = [], []
    for room, r in enumerate(rows):
        arrays = load_scene(data, r["id"])
        for k, lab in enumerate(r["labels"]):
            brirs.append(arrays[f"brir_{k}"])
            labels.append({**lab, "split": r["split"], "room": room})
    return write_rir_bank(out, brirs, labels, length=length)


class RirBank:
    """A bank opened for reading: ``brirs`` is a read-only memory map."""

    def __init__(self, root: str | Path) -> None:
        root = Path(root)
        if not (root / BANK_ARRAY).is_file() or not (root / BANK_ROWS).is_file():
            raise ParameterError(f"{root}: not a BRIR bank (no {BANK_ARRAY} / {BANK_ROWS})")
        self.root = root
        try:
            self.brirs = np.load(root / BANK_ARRAY, mmap_mode="r")
            rows = [json.loads(x) for x in (root / BANK_ROWS).read_text().splitlines()
                    if x.strip()]  # fmt: skip
            self.labels = {k: np.array([r[k] for r in rows], dtype=np.int64) for k in _LABEL_KEYS}
            self.split = np.array([str(r["split"]) for r in rows])
            # no room column: every BRIR a room of its own
            self.room = np.array([int(r.get("room", -1 - i)) for i, r in enumerate(rows)],
                                 dtype=np.int64)  # fmt: skip
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise ParameterError(f"{root}: unreadable BRIR bank ({type(exc).__name__}: {exc})") \
                from exc  # fmt: skip
        if self.brirs.ndim != 3 or self.brirs.shape[1] != 2 or self.brirs.dtype != np.float32:
            raise ParameterError(f"{root}: {BANK_ARRAY} must be float32 [n, 2, L], got "
                                 f"{self.brirs.dtype} {self.brirs.shape}")  # fmt: skip
        if len(rows) != self.brirs.shape[0]:
            raise ParameterError(f"{root}: {len(rows)} rows for {self.brirs.shape[0]} BRIRs")
        bad = (self.labels["azimuth"] < 0) | (self.labels["azimuth"] >= 360) | \
            (self.labels["elevation"] < 0) | (self.labels["elevation"] >= 180) | \
            (self.labels["distance_class"] < 0) | (self.labels["distance_class"] > 20)  # fmt: skip
        if bad.any():
            raise ParameterError(f"{root}: {int(bad.sum())} rows with labels out of range "
                                 f"(first: {int(np.flatnonzero(bad)[0])})")  # fmt: skip

    def scenes(
        self, sources: Any, config: StreamConfig, *, epoch: int = 0, start: int = 0,
        rank: int = 0, world: int = 1,
    ) -> StreamingScenes:  # fmt: skip
        """The streamed batches of one epoch (:class:`StreamingScenes`) of
        ``sources`` through this bank; :func:`agl_fast.sage.fit.fit` asks
        its scene data for them this way (a BiDepth copy answers with its own,
        :class:`agl_fast.sage.bidepth.BidepthData`)."""
        return StreamingScenes(self, sources, config, epoch=epoch, start=start, rank=rank,
                               world=world)  # fmt: skip

    def indices(self, split: str) -> np.ndarray:
        """Indices of the BRIRs of ``split`` (``'train'`` or ``'test'``)."""
        idx = np.flatnonzero(self.split == split)
        if idx.size == 0:
            raise ParameterError(f"{self.root}: no {split!r} BRIRs")
        return idx


class SyntheticSources:
    """``n`` dry synthetic events (:data:`~agl_fast.spatial.dataset.SYNTHETIC_EVENTS`);
    source ``i`` is of kind ``i % 4``, drawn from ``(seed, i)``."""

    def __init__(self, n: int, seconds: float, *, seed: int = 0, sr: int = SR) -> None:
        self.n, self.seconds, self.seed, self.sr = int(n), float(seconds), int(seed), int(sr)
        self.vocab = list(SYNTHETIC_EVENTS)

    def __len__(self) -> int:
        return self.n

    def labels(self, i: int) -> list[int]:
        return [i % len(self.vocab)]

    def load(self, i: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, i])
        return synthetic_event(self.vocab[i % len(self.vocab)], rng, self.sr, self.seconds)


class FileSources:
    """Dry sources from audio files, read when drawn (mono, ``sr``, the first
    ``seconds``); the event name is the file stem with ``_`` as spaces (as
    ``agl-fast spatial simulate --sources`` names them), its class its place
    in ``vocab`` (default: the sorted names)."""

    def __init__(
        self, paths: Sequence[str | Path], seconds: float, *, sr: int = SR,
        vocab: Sequence[str] | None = None,
    ) -> None:  # fmt: skip
        if not paths:
            raise ParameterError("no source files")
        self.paths = [str(p) for p in paths]
        self.seconds, self.sr = float(seconds), int(sr)
        names = [Path(p).stem.replace("_", " ") for p in self.paths]
        self.vocab = list(vocab) if vocab is not None else sorted(set(names))
        unknown = sorted(set(names) - set(self.vocab))
        if unknown:
            raise ParameterError(f"source names not in the vocabulary: {unknown[:5]}")
        self._label = [self.vocab.index(x) for x in names]

    def __len__(self) -> int:
        return len(self.paths)

    def labels(self, i: int) -> list[int]:
        return [self._label[i]]

    def load(self, i: int) -> np.ndarray:
        from ..audio import load

        y, _ = load(self.paths[i], sr=self.sr, mono=True, duration=self.seconds)
        return np.asarray(y, dtype=np.float32)


def sample_weights(sources: Any) -> np.ndarray:
    """Spatial-AST's sample weights: per source the sum over its labels of
    ``1000 / (count + 0.01)``; returned normalised to sum to 1."""
    n_cls = len(sources.vocab)
    count = np.zeros(n_cls)
    labs = [sources.labels(i) for i in range(len(sources))]
    for lab in labs:
        np.add.at(count, lab, 1.0)
    w = 1000.0 / (count + 0.01)
    per = np.array([w[lab].sum() for lab in labs])
    return per / per.sum()


@dataclass(frozen=True)
class SceneSpec:
    """One streamed scene by index: dry source ``sources[k]`` rendered
    through BRIR ``rirs[k]`` of the bank, the renders averaged (as
    :func:`agl_fast.spatial.mix.spatialize`); with ``mix_with`` >= 0 the
    first dry source is ``lam * a + (1 - lam) * b`` (Spatial-AST's mixup,
    both at -14 dBFS) before its BRIR."""

    sources: tuple[int, ...]
    rirs: tuple[int, ...]
    mix_with: int = -1
    lam: float = 1.0


def _dry(sources: Any, spec: SceneSpec, k: int, n: int) -> np.ndarray:
    from ..spatial.mix import normalize

    y = normalize(sources.load(spec.sources[k]), LOUDNESS_DBFS)
    if k == 0 and spec.mix_with >= 0:
        z = normalize(sources.load(spec.mix_with), LOUDNESS_DBFS)
        m = min(len(y), len(z))
        y = spec.lam * y[:m] + (1.0 - spec.lam) * z[:m]
    y = np.asarray(y[:n], dtype=np.float32)
    return np.pad(y, (0, n - len(y)))


def render_scenes(
    scenes: Sequence[SceneSpec], sources: Any, bank: RirBank, seconds: float
) -> np.ndarray:
    """Binaural clips ``[len(scenes), 2, seconds * SR]`` (float32) of
    streamed scenes: each dry source scaled to -14 dBFS, cut or zero-padded
    to ``seconds``, convolved with its BRIR (:func:`agl_fast.fftconvolve`
    ``mode='truncate'``, all pairs of all scenes in one call), the renders
    of a scene averaged. The one rendering rule of SAGE's and OWL's
    streamed training."""
    from ..room import fftconvolve

    n = round(seconds * SR)
    dry, brirs, owner = [], [], []
    for i, spec in enumerate(scenes):
        if len(spec.sources) != len(spec.rirs) or not spec.sources:
            raise ParameterError(f"scene {i}: one BRIR per source required, got {spec}")
        for k, r in enumerate(spec.rirs):
            dry.append(_dry(sources, spec, k, n))
            brirs.append(np.asarray(bank.brirs[r]))
            owner.append(i)
    wet = fftconvolve(dry, brirs, mode="truncate")
    audio = np.zeros((len(scenes), 2, n), dtype=np.float32)
    for i, w in zip(owner, wet, strict=True):
        audio[i] += np.asarray(w, dtype=np.float32)
    counts = np.array([len(s.rirs) for s in scenes], dtype=np.float32)
    return audio / counts[:, None, None]


@dataclass
class StreamConfig:
    """What one epoch streams: ``scenes`` examples in global batches of
    ``batch_size`` (the last partial batch dropped), ``seconds`` per clip."""

    scenes: int = 20000
    batch_size: int = 64
    seconds: float = 10.0
    mixup: float = 0.0
    weighted: bool = False
    seed: int = 0
    split: str = "train"

    @property
    def batches(self) -> int:
        return self.scenes // self.batch_size


class StreamingScenes(IterableDataset):  # type: ignore[type-arg]
    """Batches of one epoch, from batch ``start`` on, for rank ``rank`` of
    ``world``: dicts of ``x`` ``[b, 4, frames, 128]`` (``bat``), ``events``
    ``[b, classes]`` (multi-hot, mixup-weighted), ``distance``, ``azimuth``,
    ``elevation`` (int64) and ``batch`` (its index in the epoch). Use with
    ``DataLoader(dataset, batch_size=None, num_workers=k)``."""

    def __init__(
        self, bank: RirBank, sources: Any, config: StreamConfig, *, epoch: int = 0,
        start: int = 0, rank: int = 0, world: int = 1,
    ) -> None:  # fmt: skip
        super().__init__()
        if config.batch_size % world:
            raise ParameterError(
                f"batch_size {config.batch_size} must be a multiple of the {world} processes"
            )
        if not 0.0 <= config.mixup <= 1.0:
            raise ParameterError(f"mixup must be in [0, 1], got {config.mixup}")
        self.bank, self.sources, self.config = bank, sources, config
        self.epoch, self.start, self.rank, self.world = int(epoch), int(start), rank, world
        self.rirs = bank.indices(config.split)
        self.weights = sample_weights(sources) if config.weighted else None

    def __len__(self) -> int:
        return max(0, self.config.batches - self.start)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        for b in range(self.start + wid, self.config.batches, nw):
            yield self.batch(b)

    def _draw(self, b: int) -> tuple[np.ndarray, ...]:
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, self.epoch, b])
        n, n_src = cfg.batch_size, len(self.sources)
        src = rng.choice(n_src, n, p=self.weights) if self.weights is not None else \
            rng.integers(0, n_src, n)  # fmt: skip
        rir = self.rirs[rng.integers(0, len(self.rirs), n)]
        mixed = rng.random(n) < cfg.mixup
        other = rng.integers(0, n_src, n)
        lam = rng.beta(MIXUP_BETA, MIXUP_BETA, n)
        per = n // self.world
        part = slice(self.rank * per, (self.rank + 1) * per)
        return src[part], rir[part], mixed[part], other[part], lam[part]

    def batch(self, b: int) -> dict[str, Any]:
        """Batch ``b`` of the epoch (this rank's slice)."""
        from ..presets import bat

        src, rir, mixed, other, lam = self._draw(b)
        events = np.zeros((len(src), len(self.sources.vocab)), dtype=np.float32)
        scenes = []
        for i, (s, r, m, o, w) in enumerate(zip(src, rir, mixed, other, lam, strict=True)):
            if m:
                events[i, self.sources.labels(int(o))] += 1.0 - w
                events[i, self.sources.labels(int(s))] += w
                scenes.append(SceneSpec((int(s),), (int(r),), mix_with=int(o), lam=float(w)))
            else:
                events[i, self.sources.labels(int(s))] = 1.0
                scenes.append(SceneSpec((int(s),), (int(r),)))
        audio = render_scenes(scenes, self.sources, self.bank, self.config.seconds)
        lab = self.bank.labels
        return {
            "x": torch.from_numpy(np.asarray(bat(audio))),
            "events": torch.from_numpy(events),
            "distance": torch.from_numpy(lab["distance_class"][rir]),
            "azimuth": torch.from_numpy(lab["azimuth"][rir]),
            "elevation": torch.from_numpy(lab["elevation"][rir]),
            "batch": b,
        }
