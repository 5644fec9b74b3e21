"""BiDepth as released: OWL's questions over AudioSet clips and binaural RIRs,
rendered on the fly.

The layout is the one OWL's data loader reads (SLAM-LLM's data settings,
kept here under the same names in a ``bidepth.json`` file, see
:class:`BidepthLayout`):

* questions: ``<qa_data_root>/<stage>/<split>.json``, one JSON object
  ``{"data": [row, ...]}``; a row has ``audio_id``, ``reverb_id``,
  ``audio_id2``, ``reverb_id2`` (null for one source), ``question``,
  ``answer``, ``question_type``, ``question_id``; splits ``train`` and
  ``eval`` (SLAM-LLM's ``train_split`` / ``test_split``);
* dry sources (AudioSet clips): ``<anechoic_data_root>/<audio_id><ext_audio>``
  (``ext_audio`` ``.wav`` by default), any rate, first channel;
* binaural RIRs: ``<reverb_data_root>/<channel_type>/<reverb_id>`` (the id
  carries its ``.npy`` suffix), NumPy ``[2, L]`` at 32 kHz;
  ``channel_type`` is ``binaural``.

A scene is rendered as that loader renders it (:func:`render_row`, through
:func:`.mix.spatialize`): the source resampled to 32 kHz (SciPy's
``resample_poly`` as the loader calls it, or agl-fast's resampler with
``"resampler": "agl-fast"``), scaled to -14 dBFS RMS (over the whole resampled
clip), convolved with its RIR, the first 10 s kept (zero-padded when
shorter); with a second source the two renders are averaged. The loader
reads no position or depth file: the labels SAGE trains on (azimuth,
elevation, distance) come from an optional positions file in Spatial-AST's
reverb JSON (``positions``, see :func:`read_positions`), the event classes
from the scene's Type I answers (:mod:`.bidepth_sage`, the streamed SAGE
trainer's data); :class:`BidepthQaSource` feeds OWL's trainer.

The QA file is read as a stream (a row at a time, each row at most
:data:`MAX_ROW_CHARS` characters), the RIRs through a memory map, the clips
when a batch needs them: host memory holds integer indices per scene, not
the rows or the audio. A row that cannot be used (missing keys, an unsafe
id) is skipped and counted (:attr:`BidepthData.skipped`); a missing or
malformed file raises a :class:`~agl_fast.exceptions.ParameterError` or
:class:`~agl_fast.exceptions.AudioDecodeError` naming it.

Limits (hostile copies meet a typed error, not a crash or a runaway
allocation): JSON nested deeper than :data:`MAX_JSON_DEPTH` levels, a
number over :data:`MAX_NUMBER_CHARS` characters, ``NaN`` / ``Infinity`` or
a float beyond its range in any file read here is a ``ParameterError``; a
position coordinate must be finite and within :data:`MAX_POSITION_M`
metres; an id longer than :data:`MAX_ID_CHARS` characters skips its row;
sources and RIRs are read only inside their roots once symlinks are
resolved (:attr:`BidepthLayout.allow_outside_roots`).

Question types: the loader passes ``question_type`` through untouched and
the released files fix the names; :data:`TYPE_NAMES` maps the names used
for OWL's four categories (and SpatialSoundQA's ``CLASSIFICATION``) to
agl-fast's ``I``-``IV`` (:mod:`.qa`); a ``type_map`` adds or overrides
names; a row of another type keeps its name and is counted.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .._internal import json_limits
from .._internal.safe_files import resolve_inside
from ..exceptions import ParameterError
from .defaults import CLIP_SECONDS, SR

__all__ = [
    "CONFIG_NAME",
    "MAX_ANSWER_EVENTS",
    "MAX_EVENT_CLASSES",
    "MAX_ID_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_NUMBER_CHARS",
    "MAX_POSITION_M",
    "MAX_ROW_CHARS",
    "RESAMPLERS",
    "TYPE_NAMES",
    "BidepthLayout",
    "BidepthQaSource",
    "event_names",
    "is_bidepth",
    "iter_qa_rows",
    "labels_from_positions",
    "load_rir",
    "load_source",
    "map_type",
    "pairs_of",
    "read_positions",
    "render_row",
]

logger = logging.getLogger("agl_fast.spatial.bidepth")

#: The layout file a BiDepth root holds (or the file ``--data`` names).
CONFIG_NAME = "bidepth.json"
#: Longest QA row accepted (characters).
MAX_ROW_CHARS = 1 << 20
#: Longest dry source read (s); AudioSet clips are 10 s.
MAX_SOURCE_SECONDS = 60.0
#: Longest RIR accepted (samples).
MAX_RIR_SAMPLES = 10 * SR
#: Longest clip or RIR id accepted (characters); a longer one skips its row.
MAX_ID_CHARS = 1024
#: Largest coordinate of a sensor or source position accepted (m, either sign).
MAX_POSITION_M = 1.0e4
#: Most event names one Type I answer may list; a longer answer gives no event target.
MAX_ANSWER_EVENTS = 64
#: Most distinct event names (the classes of SAGE's event head) of one copy.
MAX_EVENT_CLASSES = 4096
#: JSON limits of every file read here (nesting depth; characters of a number).
MAX_JSON_DEPTH = json_limits.MAX_JSON_DEPTH
MAX_NUMBER_CHARS = json_limits.MAX_NUMBER_CHARS
_REQUIRED = ("audio_id", "reverb_id", "question", "answer")
#: How a dry source reaches 32 kHz, the default first: ``polyphase``, SciPy's
#: ``resample_poly`` as OWL's loader calls it (the authors' inputs to float
#: rounding), or agl-fast's resampler (:func:`agl_fast.audio.load`, ``hq``),
#: which differs from it near the Nyquist band of a 16 kHz source.
RESAMPLERS = ("polyphase", "agl-fast")
_DEFAULTS = {"channel_type": "binaural", "ext_audio": ".wav", "train_split": "train",
             "test_split": "eval", "positions": None, "stage": None,
             "resampler": RESAMPLERS[0]}  # fmt: skip

#: Question-type names (upper case, letters and digits only) -> agl-fast's types.
TYPE_NAMES = {
    **dict.fromkeys(("I", "TYPEI", "CLASSIFICATION", "DETECTION", "EVENTDETECTION"), "I"),
    **dict.fromkeys(
        (
            "II",
            "TYPEII",
            "DOA",
            "DP",
            "DOADP",
            "DIRECTION",
            "DISTANCE",
            "DIRECTIONESTIMATION",
            "LOCALIZATION",
        ),
        "II",
    ),
    **dict.fromkeys(("III", "TYPEIII", "REASONING", "SPATIALREASONING"), "III"),
    **dict.fromkeys(("IV", "TYPEIV", "COT", "COTREASONING", "REASONINGCOT"), "IV"),
}


def map_type(name: Any, type_map: dict[str, str] | None = None) -> str | None:
    """agl-fast's type (``I``-``IV``) of a question-type name, or None."""
    key = re.sub(r"[^A-Z0-9]", "", str(name).upper())
    extra = {re.sub(r"[^A-Z0-9]", "", k.upper()): v for k, v in (type_map or {}).items()}
    return extra.get(key, TYPE_NAMES.get(key))


def event_names(answer: Any) -> list[str]:
    """The event names of a detection answer (``"a; b"``, SpatialSoundQA's form)."""
    return [x.strip() for x in str(answer).split(";") if x.strip()]


# -- labels from positions (Spatial-AST's reverb JSON) -------------------------


def labels_from_positions(sensor: Any, source: Any) -> dict[str, Any]:
    """BAT labels of a source from simulator positions (x right, y up, -z ahead).

    Returns ``azimuth`` (0..359, counter-clockwise from the right, 90
    ahead), ``elevation`` (0..179, 90 horizontal), ``distance_class``
    (``round(2 d)``) and ``distance_m``.
    """
    s = np.asarray(sensor, dtype=np.float64)
    p = np.asarray(source, dtype=np.float64)
    if s.shape != (3,) or p.shape != (3,):
        raise ParameterError(f"positions must be 3 numbers, got {s.shape} and {p.shape}")
    for what, v in (("sensor", s), ("source", p)):
        if not (np.isfinite(v).all() and (np.abs(v) <= MAX_POSITION_M).all()):
            raise ParameterError(f"a {what} position must be finite, each coordinate within "
                                 f"+-{MAX_POSITION_M:g} m, got {v.tolist()}")  # fmt: skip
    dx, dy, dz = p - s
    d = float(np.linalg.norm(p - s))
    az = (round(math.degrees(math.atan2(-dz, dx))) + 360) % 360
    el = (round(math.degrees(math.atan2(dy, math.hypot(dx, dz)))) + 90) % 180
    return {"azimuth": int(az), "elevation": int(el), "distance_class": round(2 * d),
            "distance_m": d}  # fmt: skip


def _xyz(text: Any) -> list[float]:
    parts = list(text) if isinstance(text, (list, tuple)) else str(text).split(",")
    if len(parts) != 3:
        raise ParameterError(f"a position must be 'x,y,z', got {text!r}")
    try:
        return [float(v) for v in parts]
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"a position must be 3 numbers, got {str(text)[:80]!r}") from exc


def read_positions(path: str | Path | None) -> dict[str, dict[str, Any]]:
    """Labels per RIR id from Spatial-AST's reverb JSON: ``{"data": [{"fname":
    <reverb_id>, "sensor_position": "x,y,z", "source_position": "x,y,z"},
    ...]}`` (or the bare list); ``{}`` for no path."""
    if path is None:
        return {}
    try:
        doc = json_limits.loads(Path(path).read_text(encoding="utf-8"), name=str(path))
        items = doc["data"] if isinstance(doc, dict) else doc
        return {
            str(it["fname"]): labels_from_positions(
                _xyz(it["sensor_position"]), _xyz(it["source_position"])
            )
            for it in items
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ParameterError(f"{path}: unreadable positions file ({type(exc).__name__}: "
                             f"{exc})") from exc  # fmt: skip


# -- the layout ----------------------------------------------------------------


def _safe_id(value: Any) -> str | None:
    """An id usable as a relative path below its root, or None."""
    if not isinstance(value, str) or not value or "\0" in value or len(value) > MAX_ID_CHARS:
        return None
    parts = value.replace("\\", "/").split("/")
    drive = len(parts[0]) == 2 and parts[0][1] == ":"  # C:/...
    return None if parts[0] == "" or drive or ".." in parts else value


@dataclass(frozen=True)
class BidepthLayout:
    """Where a BiDepth copy lies: SLAM-LLM's data settings (``qa_data_root``,
    ``stage``, ``anechoic_data_root``, ``reverb_data_root``, ``channel_type``,
    ``ext_audio``, ``train_split``, ``test_split``), ``positions`` and
    ``resampler`` (:data:`RESAMPLERS`).

    Sources and RIRs are read only inside their roots once symlinks are
    resolved (a :class:`~agl_fast.exceptions.UnsafePathError` otherwise);
    ``allow_outside_roots=True`` follows links out of them. It is an
    argument, not a key of ``bidepth.json``: a copy cannot grant it itself."""

    qa_data_root: Path
    stage: str
    anechoic_data_root: Path
    reverb_data_root: Path
    channel_type: str = "binaural"
    ext_audio: str = ".wav"
    train_split: str = "train"
    test_split: str = "eval"
    positions: Path | None = None
    resampler: str = RESAMPLERS[0]
    allow_outside_roots: bool = False

    @classmethod
    def open(cls, path: str | Path, *, allow_outside_roots: bool = False) -> BidepthLayout:
        """Read ``path`` (a ``bidepth.json`` file or a folder holding one);
        relative roots are taken from the file's folder."""
        p = Path(path)
        f = p / CONFIG_NAME if p.is_dir() else p
        try:
            doc = json_limits.loads(f.read_text(encoding="utf-8"), name=str(f))
        except (OSError, ValueError) as exc:
            raise ParameterError(f"{f}: not a readable BiDepth layout file ({exc})") from exc
        if not isinstance(doc, dict):
            raise ParameterError(f"{f}: the layout must be a JSON object")
        missing = [k for k in ("qa_data_root", "stage", "anechoic_data_root",
                               "reverb_data_root") if not doc.get(k)]  # fmt: skip
        unknown = sorted(set(doc) - set(_DEFAULTS) - {"qa_data_root", "anechoic_data_root",
                                                      "reverb_data_root"})  # fmt: skip
        if missing or unknown:
            raise ParameterError(f"{f}: missing {missing}, unknown {unknown}")
        base = f.parent

        def where(v: Any) -> Path:
            return base / str(v)  # an absolute path stays absolute

        cfg = {**_DEFAULTS, **doc}
        if isinstance(cfg["stage"], list):  # several stages, read in order
            if not all(isinstance(x, str) and x and "," not in x for x in cfg["stage"]):
                raise ParameterError(f"{f}: stage must be a name or a list of names")
            cfg["stage"] = ",".join(cfg["stage"])
        if cfg["resampler"] not in RESAMPLERS:
            raise ParameterError(f"{f}: resampler must be one of {RESAMPLERS}")
        return cls(where(cfg["qa_data_root"]), str(cfg["stage"]), where(cfg["anechoic_data_root"]),
                   where(cfg["reverb_data_root"]), str(cfg["channel_type"]), str(cfg["ext_audio"]),
                   str(cfg["train_split"]), str(cfg["test_split"]),
                   where(cfg["positions"]) if cfg["positions"] else None,
                   str(cfg["resampler"]), bool(allow_outside_roots))  # fmt: skip

    @classmethod
    def of(cls, layout: BidepthLayout | str | Path, *,
           allow_outside_roots: bool = False) -> BidepthLayout:  # fmt: skip
        """``layout`` itself, or the layout file it names (:meth:`open`)."""
        if isinstance(layout, BidepthLayout):
            return layout
        return cls.open(layout, allow_outside_roots=allow_outside_roots)

    def split_name(self, split: str) -> str:
        """The file name of agl-fast's ``'train'`` / ``'test'`` (others as given)."""
        return {"train": self.train_split, "test": self.test_split}.get(split, split)

    @property
    def stages(self) -> list[str]:
        """The stage folders read: ``stage`` is one name, or several joined
        by commas (a JSON list in ``bidepth.json``), in curriculum order."""
        return [x for x in self.stage.split(",") if x]

    def qa_file(self, split: str) -> Path:
        """``<qa_data_root>/<stage>/<split>.json`` of the first stage."""
        return self.qa_files(split)[0]

    def qa_files(self, split: str) -> list[Path]:
        """``<qa_data_root>/<stage>/<split>.json`` of every stage."""
        return [self.qa_data_root / st / f"{self.split_name(split)}.json" for st in self.stages]

    def audio_path(self, audio_id: str) -> Path:
        """``<anechoic_data_root>/<audio_id><ext_audio>``, inside its root
        (:class:`~agl_fast.exceptions.UnsafePathError` otherwise)."""
        return resolve_inside(self.anechoic_data_root, f"{audio_id}{self.ext_audio}",
                              what="source", allow_outside=self.allow_outside_roots)  # fmt: skip

    def rir_path(self, reverb_id: str) -> Path:
        """``<reverb_data_root>/<channel_type>/<reverb_id>``, inside
        ``reverb_data_root`` (:class:`~agl_fast.exceptions.UnsafePathError`
        otherwise)."""
        return resolve_inside(self.reverb_data_root, Path(self.channel_type) / reverb_id,
                              what="RIR", allow_outside=self.allow_outside_roots)  # fmt: skip


def is_bidepth(path: str | Path) -> bool:
    """Whether ``path`` is a BiDepth layout (a ``bidepth.json`` or a folder with one)."""
    p = Path(path)
    if p.is_dir():
        return (p / CONFIG_NAME).is_file()
    return p.is_file() and p.suffix == ".json"


# -- reading -------------------------------------------------------------------


class _Stream:
    """JSON values read one at a time from a text file."""

    def __init__(self, f: TextIO, name: str, limit: int) -> None:
        self.f, self.name, self.limit = f, name, limit
        self.buf, self.pos, self.done = "", 0, False

    def _fill(self) -> bool:
        more = "" if self.done else self.f.read(1 << 16)
        self.done = not more
        if more:
            self.buf, self.pos = self.buf[self.pos :] + more, 0
        return bool(more)

    def peek(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def take(self, ch: str) -> None:
        if self.peek() != ch:
            raise ParameterError(f"{self.name}: bad JSON: expected {ch!r}, got {self.peek()!r}")
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                v, end = json_limits.raw_decode(self.buf, self.pos, name=self.name)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > self.limit:
                    raise ParameterError(f"{self.name}: bad JSON or a value over "
                                         f"{self.limit} characters") from exc  # fmt: skip
                if not self._fill():
                    raise ParameterError(f"{self.name}: bad JSON ({exc.msg})") from exc
                continue
            if end == len(self.buf) and self._fill():
                continue  # a number may go on in the next chunk
            if end - self.pos > self.limit:
                raise ParameterError(f"{self.name}: a value over {self.limit} characters")
            self.pos = end
            return v


def iter_qa_rows(path: str | Path, *, limit: int = MAX_ROW_CHARS) -> Iterator[Any]:
    """The rows of a QA file one at a time: the ``data`` list of a JSON
    object (OWL's files), or one JSON value per line (``.jsonl``)."""
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"no QA file {path}")
    with open(path, encoding="utf-8") as f:
        if path.suffix == ".jsonl":
            for k, line in enumerate(f, start=1):
                if len(line) > limit:
                    raise ParameterError(f"{path}: line {k} is over {limit} characters")
                if line.strip():
                    yield json_limits.loads(line, name=f"{path}: line {k}")
            return
        s = _Stream(f, str(path), limit)
        s.take("{")
        while s.peek() not in ("}", ""):
            key = s.value()
            s.take(":")
            if key != "data":
                s.value()
            else:
                s.take("[")
                while s.peek() != "]":
                    yield s.value()
                    if s.peek() == ",":
                        s.take(",")
                    elif s.peek() != "]":
                        raise ParameterError(f"{path}: bad JSON in the 'data' list")
                s.take("]")
                return
            if s.peek() == ",":
                s.take(",")
        raise ParameterError(f"{path}: no 'data' list")


def pairs_of(row: Any) -> tuple[list[tuple[str, str]], str | None]:
    """The (audio id, RIR id) pairs of a row and why it is skipped (or None)."""
    if not isinstance(row, dict):
        return [], "not an object"
    missing = [k for k in _REQUIRED if k not in row]
    if missing:
        return [], "missing keys"
    pairs = [(_safe_id(row["audio_id"]), _safe_id(row["reverb_id"]))]
    if row.get("audio_id2") is not None and row.get("reverb_id2") is not None:
        pairs.append((_safe_id(row["audio_id2"]), _safe_id(row["reverb_id2"])))
    if any(a is None or r is None for a, r in pairs):
        return [], "bad ids"
    return [(str(a), str(r)) for a, r in pairs], None


def load_source(path: str | Path, *, resampler: str = RESAMPLERS[0]) -> np.ndarray:
    """A dry source as the loader reads it: the first channel, resampled to
    32 kHz (``resampler``, :data:`RESAMPLERS`; float32, at most
    :data:`MAX_SOURCE_SECONDS`)."""
    from ..audio import load

    if resampler not in RESAMPLERS:
        raise ParameterError(f"resampler must be one of {RESAMPLERS}, got {resampler!r}")
    if resampler == "agl-fast":
        y, _ = load(str(path), sr=SR, channel=0, max_duration=MAX_SOURCE_SECONDS)
        return np.asarray(y, dtype=np.float32).reshape(-1)
    from scipy.signal import resample_poly

    y, sr = load(str(path), sr=None, channel=0, max_duration=MAX_SOURCE_SECONDS)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    return np.asarray(y if sr == SR else resample_poly(y, SR, sr), dtype=np.float32)


def load_rir(path: str | Path) -> np.ndarray:
    """A binaural RIR ``[2, L]`` (float32) read through a memory map."""
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"RIR not found: {p}")
    try:
        h = np.load(p, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ParameterError(f"{p}: not a NumPy array ({exc})") from exc
    if h.ndim != 2 or h.shape[0] != 2 or not 0 < h.shape[1] <= MAX_RIR_SAMPLES:
        raise ParameterError(f"{p}: a binaural RIR must be [2, L] with 0 < L <= "
                             f"{MAX_RIR_SAMPLES}, got shape {h.shape}")  # fmt: skip
    if h.dtype.kind != "f":
        raise ParameterError(f"{p}: a RIR must hold floats, got {h.dtype}")
    return np.array(h, dtype=np.float32)


def render_row(layout: BidepthLayout, pairs: Sequence[tuple[str, str]], *,
               seconds: float = CLIP_SECONDS) -> np.ndarray:  # fmt: skip
    """The mixture ``[2, seconds * 32000]`` (float32) of one or two (audio id,
    RIR id) pairs, by :func:`.mix.spatialize` (-14 dBFS, convolution, cut or
    padding, two sources averaged)."""
    from .mix import spatialize

    dry = [load_source(layout.audio_path(a), resampler=layout.resampler) for a, _ in pairs]
    return spatialize(dry, [load_rir(layout.rir_path(r)) for _, r in pairs], seconds=seconds)


# -- OWL's question source ---------------------------------------------------------


class BidepthQaSource:
    """OWL's trainer's ``QaSource`` (:class:`agl_fast.owl.train.QaSource`)
    over one split of a BiDepth copy.

    :meth:`select` reads the QA file as a stream and returns the rows of the
    wanted types (agl-fast's ``I``-``IV``, :func:`map_type`) and numbers of
    sources; :meth:`features` renders their scenes (:func:`render_row`) and
    computes the ``bat`` features, keeping those of the ``cache_scenes``
    most recently used scenes. Rows skipped and rows of other types are
    counted in ``counts``. ``allow_outside_roots``: see :class:`BidepthLayout`
    (for a layout given by path).
    """

    def __init__(self, layout: BidepthLayout | str | Path, split: str = "train", *,
                 type_map: dict[str, str] | None = None, cache_scenes: int = 256,
                 seconds: float = CLIP_SECONDS,
                 allow_outside_roots: bool = False) -> None:  # fmt: skip
        from collections import OrderedDict

        self.layout = BidepthLayout.of(layout, allow_outside_roots=allow_outside_roots)
        self.split, self.type_map, self.seconds = split, type_map, float(seconds)
        self.cache_scenes = max(1, int(cache_scenes))
        self.counts: Counter[str] = Counter()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def _row(self, it: dict[str, Any], pairs: list[tuple[str, str]]) -> dict[str, Any]:
        qtype = map_type(it.get("question_type"), self.type_map)
        row: dict[str, Any] = {
            "scene": "|".join(x for p in pairs for x in p), "split": self.split,
            "type": qtype, "n_sources": len(pairs), "question": str(it["question"]),
            "answer": str(it["answer"]), "question_id": it.get("question_id"),
            "source_type": it.get("question_type"), "pairs": [list(p) for p in pairs],
        }  # fmt: skip
        if qtype == "I":
            names = event_names(it["answer"])
            row.update(kind="detect", events=names, target_events=names)
        return row

    def select(self, types: Sequence[str], n_sources: Sequence[int]) -> list[dict[str, Any]]:
        """Rows of the given types and numbers of sources, in file order."""
        want_t, want_n = set(types), {int(x) for x in n_sources}
        out = []
        rows = (it for f in self.layout.qa_files(self.split) for it in iter_qa_rows(f))
        for it in rows:
            pairs, why = pairs_of(it)
            if why is not None:
                self.counts[f"skipped {why}"] += 1
                continue
            row = self._row(it, pairs)
            if row["type"] is None:
                self.counts[f"other type {it.get('question_type')}"] += 1
            elif row["type"] in want_t and row["n_sources"] in want_n:
                out.append(row)
        if self.counts:
            logger.info("BiDepth %s: %s", self.layout.qa_files(self.split), dict(self.counts))
        return out

    def features(self, rows: list[dict[str, Any]]) -> Any:
        """``bat`` features ``[len(rows), 4, frames, 128]`` (torch float32)."""
        import torch

        from ..presets import bat

        for r in rows:
            key = str(r["scene"])
            if key not in self._cache:
                pairs = [(str(a), str(h)) for a, h in r["pairs"]]
                audio = render_row(self.layout, pairs, seconds=self.seconds)
                self._cache[key] = np.asarray(bat(audio), dtype=np.float32)
            self._cache.move_to_end(key)
        feats = np.stack([self._cache[str(r["scene"])] for r in rows])
        while len(self._cache) > self.cache_scenes:
            self._cache.popitem(last=False)
        return torch.from_numpy(feats)
