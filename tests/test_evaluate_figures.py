"""The offline world map: shipped outlines are real geography, and the
evaluate command draws one map per model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agl_fast.evaluate.figures import error_map, world_outlines

pytest.importorskip("matplotlib")


def _inside_any(lon: float, lat: float, rings: list[np.ndarray]) -> bool:
    from matplotlib.path import Path as MplPath

    return any(MplPath(r).contains_point((lon, lat)) for r in rings)


def test_outlines_put_land_and_sea_where_they_are() -> None:
    rings = world_outlines()
    assert len(rings) >= 177  # countries, several with islands
    allpts = np.concatenate(rings)
    assert allpts[:, 0].min() >= -180 and allpts[:, 0].max() <= 180
    assert allpts[:, 1].min() >= -90 and allpts[:, 1].max() <= 90
    for lon, lat in [(-3.70, 40.42), (-8.0, 31.63), (11.24, 48.35), (139.0, 36.0)]:
        assert _inside_any(lon, lat, rings), (lon, lat)  # Madrid, Marrakech, Bavaria, Honshu
    for lon, lat in [(-40.0, 30.0), (-150.0, 0.0), (80.0, -30.0)]:
        assert not _inside_any(lon, lat, rings), (lon, lat)  # open ocean


def test_error_map_writes_a_png(tmp_path: Path) -> None:
    lat = np.array([40.4, 31.5, -33.9])
    lon = np.array([-3.7, -9.8, 151.2])
    out = error_map(lat, lon, np.array([12.0, np.nan, 8000.0]), "t", tmp_path / "m.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
