"""The bulk curation pipeline behind ``agl-fast curate``.

>>> from agl_fast.pipeline import CurateConfig, curate, discover
>>> summary = curate(discover("recordings/"), "curated/", CurateConfig())  # doctest: +SKIP
"""

from __future__ import annotations

from .inputs import Inputs, discover, read_manifest
from .run import CurateConfig, curate
from .stages import Clips, FeatureStage, Stage, register_stage, registered_stages

__all__ = [
    "Clips",
    "CurateConfig",
    "FeatureStage",
    "Inputs",
    "Stage",
    "curate",
    "discover",
    "read_manifest",
    "register_stage",
    "registered_stages",
]
