"""Build the game's offline world map from a Natural Earth shapefile.

The map shipped in ``python/agl_fast/game/static/world.json`` was made from
the public-domain Natural Earth 1:110m countries (``naturalearth_lowres``,
the copy that the ``pyogrio`` wheel carries in ``pyogrio/tests/fixtures``):

    python scripts/make_world_map.py path/to/naturalearth_lowres.shp \\
        python/agl_fast/game/static/world.json

Each country becomes one SVG path in plate carree coordinates (x = lon,
y = -lat, degrees rounded to 0.1); points that round onto the previous one
are dropped. Only the standard library is used: the shapefile (polygon
records) and its ``.dbf`` table are read directly.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path


def read_polygons(shp: Path) -> list[list[list[tuple[float, float]]]]:
    """Rings of every polygon record of an ESRI shapefile (types 5, 15, 25)."""
    data = shp.read_bytes()
    pos = 100
    out: list[list[list[tuple[float, float]]]] = []
    while pos + 8 <= len(data):
        _, length_words = struct.unpack(">ii", data[pos : pos + 8])
        rec = data[pos + 8 : pos + 8 + 2 * length_words]
        pos += 8 + 2 * length_words
        (stype,) = struct.unpack("<i", rec[:4])
        if stype == 0:
            out.append([])
            continue
        if stype not in (5, 15, 25):
            raise ValueError(f"{shp}: shape type {stype} is not a polygon")
        n_parts, n_points = struct.unpack("<ii", rec[36:44])
        parts = list(struct.unpack(f"<{n_parts}i", rec[44 : 44 + 4 * n_parts]))
        base = 44 + 4 * n_parts
        pts = struct.unpack(f"<{2 * n_points}d", rec[base : base + 16 * n_points])
        xy = list(zip(pts[0::2], pts[1::2], strict=True))
        bounds = [*parts, n_points]
        out.append([xy[bounds[i] : bounds[i + 1]] for i in range(n_parts)])
    return out


def read_dbf_column(dbf: Path, name: str) -> list[str]:
    """One text column of a dBASE III table."""
    data = dbf.read_bytes()
    n_rec, header_len, rec_len = struct.unpack("<IHH", data[4:12])
    fields = []
    pos = 32
    while data[pos] != 0x0D:
        fname = data[pos : pos + 11].split(b"\0")[0].decode("ascii")
        fields.append((fname, data[pos + 16]))
        pos += 32
    offset = 1
    for fname, flen in fields:
        if fname.lower() == name.lower():
            break
        offset += flen
    else:
        raise ValueError(f"{dbf}: no column {name!r}")
    return [
        data[header_len + i * rec_len + offset : header_len + i * rec_len + offset + flen]
        .decode("utf-8", "replace")
        .strip()
        for i in range(n_rec)
    ]


def ring_path(ring: list[tuple[float, float]]) -> str:
    pts: list[tuple[int, int]] = []
    for lon, lat in ring:
        p = (round(lon * 10), round(-lat * 10))
        if not pts or p != pts[-1]:
            pts.append(p)
    if len(pts) < 3:
        return ""
    body = " ".join(f"{x / 10:g} {y / 10:g}" for x, y in pts)
    return f"M{body}Z"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    shp, out = Path(argv[0]), Path(argv[1])
    names = read_dbf_column(shp.with_suffix(".dbf"), "name")
    shapes = read_polygons(shp)
    countries = []
    for name, rings in zip(names, shapes, strict=True):
        d = "".join(ring_path(r) for r in rings)
        if d:
            countries.append({"name": name, "d": d})
    doc = {
        "source": "Natural Earth 1:110m admin-0 countries (public domain), naturalearth_lowres",
        "projection": "plate carree: x = longitude, y = -latitude (degrees)",
        "countries": countries,
    }
    out.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    print(f"{len(countries)} countries -> {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
