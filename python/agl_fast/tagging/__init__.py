"""Audio tagging: per-clip time fractions of AudioSet classes and groups.

* :class:`Tagger` — windows in, per-window probabilities out, then per-clip
  time fractions (rules in :mod:`agl_fast.tagging.windows`).
* :class:`EfficientATTagger` — an exported EfficientAT ``mn`` model on
  ONNX Runtime (CUDA preferred), features from the Rust ``efficientat``
  preset in a producer thread.
* :class:`SpeechTagger` — the Silero VAD network shipped in ``silero-vad``:
  a real speech time fraction on any machine.
* :func:`tagging_stage` — the curation pipeline stage (Arrow table out).
* :func:`ontology` — the AudioSet ontology (527 classes, 7 groups).
"""

from __future__ import annotations

from .onnx_backend import BackendError, OnnxModel, make_session
from .ontology import GROUP_KEYS, Ontology, ontology
from .registry import TaggerSpec, build_tagger, get_tagger, register_tagger, tagger_names
from .results import PipelineTaggingStage, result_schema, tag_table, tagging_stage
from .speech import SpeechTagger, silero_model_path
from .tagger import ClipTags, EfficientATTagger, Tagger
from .windows import (
    FRACTION_SCHEMES,
    ClipFrames,
    extract_windows,
    plan_windows,
    segment_fractions,
    time_fractions,
    window_views,
)

__all__ = [
    "FRACTION_SCHEMES",
    "GROUP_KEYS",
    "BackendError",
    "ClipFrames",
    "ClipTags",
    "EfficientATTagger",
    "OnnxModel",
    "Ontology",
    "PipelineTaggingStage",
    "SpeechTagger",
    "Tagger",
    "TaggerSpec",
    "build_tagger",
    "extract_windows",
    "get_tagger",
    "make_session",
    "ontology",
    "plan_windows",
    "register_tagger",
    "result_schema",
    "segment_fractions",
    "silero_model_path",
    "tag_table",
    "tagger_names",
    "tagging_stage",
    "time_fractions",
    "window_views",
]
