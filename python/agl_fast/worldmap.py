"""The world map agl-fast ships: Natural Earth 1:110m country outlines.

One copy of the data serves every map agl-fast draws: the listening game
(which serves it as ``/static/world.json``), the curation report and the
evaluation figures. It is read from the installed package with
:mod:`importlib.resources`, so nothing is downloaded at run time.

The file holds one SVG path per country in plate carree coordinates:
``x = longitude``, ``y = -latitude`` (degrees, rounded to 0.1), made by
``scripts/make_world_map.py`` from the public-domain ``naturalearth_lowres``
countries.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = ["WORLD_SOURCE", "world_paths", "world_rings"]

#: The package and resource path of the map.
WORLD_SOURCE = ("agl_fast.game", "static/world.json")


@lru_cache(maxsize=1)
def world_paths() -> tuple[tuple[str, str], ...]:
    """``(country name, SVG path data)`` of every country, in plate carree
    (``x = longitude``, ``y = -latitude``, degrees; ``M``/``Z`` commands and
    absolute coordinate pairs only)."""
    package, name = WORLD_SOURCE
    text = resources.files(package).joinpath(name).read_text("utf-8")
    return tuple((str(c["name"]), str(c["d"])) for c in json.loads(text)["countries"])


def world_rings() -> list[np.ndarray]:
    """Every outline ring as ``[n, 2]`` float64 (longitude, latitude) in degrees."""
    rings: list[np.ndarray] = []
    for _, d in world_paths():
        for part in re.split(r"[MZ]", d):
            nums = np.array(part.split(), dtype=np.float64)
            if nums.size >= 6:
                xy = nums.reshape(-1, 2)
                rings.append(np.column_stack([xy[:, 0], -xy[:, 1]]))
    return rings
