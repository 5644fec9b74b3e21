"""Curation on a Ray cluster (the ``ray`` extra): the public names of
:mod:`agl_fast.pipeline.engines.ray` (Ray Data stages) and
:mod:`agl_fast.pipeline.engines.ray_run` (the executor of
``curate --engine ray``).

>>> from agl_fast.ray import curate_dataset, curate_ray, files_dataset  # doctest: +SKIP
"""

from __future__ import annotations

from .pipeline.engines.ray import RayOptions, curate_dataset, files_dataset, inputs_dataset
from .pipeline.engines.ray_run import RayActors, curate_ray, done_keys

__all__ = [
    "RayActors",
    "RayOptions",
    "curate_dataset",
    "curate_ray",
    "done_keys",
    "files_dataset",
    "inputs_dataset",
]
