"""Leaderboard of players and models on the same clips, and the export.

The export writes the players' guesses in the prediction layout that
:func:`agl_fast.evaluate.readers.read_predictions` reads, so that
``agl-fast evaluate Human.parquet --truth ...`` scores people like any model;
the file's suffix says its format (:data:`EXPORT_FORMATS`: Parquet, or CSV
in the raw progress files' form, newlines in a field written ``\\n``).

Only blind guesses are ranked or exported: a player's first guess of a clip,
and not one stored as ``after_reveal`` (the player or the client address had
already been shown that clip's answer). The leaderboard lists the others as
flagged, unranked entries and counts them; the export leaves them out and
logs how many.
"""

from __future__ import annotations

import csv
import io
import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Engine, select

from .._internal.safe_files import atomic_file
from ..exceptions import ParameterError
from .db import guesses

if TYPE_CHECKING:
    from .state import Game

_log = logging.getLogger("agl_fast.game")

#: The formats :func:`export_guesses` writes, by the file's suffix.
EXPORT_FORMATS = (".parquet", ".csv")


def first_guesses(rows: Sequence[Any]) -> list[Any]:
    """Keep each player's first guess of each clip (rows ordered by id, player and clip first).

    A player may meet a clip again in a later round, after its answer was
    shown; only the first, blind guess counts for rankings and the export.
    """
    seen: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        k = (r[0], r[1])
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _entry(name: str, kind: str, me: bool, vals: Sequence[tuple[float, float]]) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "me": me,
        "n": len(vals),
        "distance_km": round(sum(v[0] for v in vals) / len(vals), 1),
        "geoscore": round(sum(v[1] for v in vals) / len(vals), 1),
        "after_reveal": False,
    }


def board(game: Game, keys: list[str] | None, me: str | None) -> dict[str, Any]:
    """Mean GeoScore and distance of every player and model over the same clips.

    ``keys``: the clips to rank on (a round's), or ``None`` for every clip
    somebody has guessed. A model is ranked on the clips of that set that
    were guessed; a model refusal counts 10,000 km, as in the AGL1K scoring.
    Players and the crowd ("all players") are ranked on blind guesses only;
    a player's guesses made after the answer was shown to them or to their
    address form a separate entry with ``after_reveal`` true, listed after the
    ranked ones without a rank; ``after_reveal`` at the top counts them.
    """
    q = select(
        guesses.c.player_id,
        guesses.c.clip_key,
        guesses.c.distance_km,
        guesses.c.geoscore,
        guesses.c.after_reveal,
    )
    if keys is not None:
        q = q.where(guesses.c.clip_key.in_(keys))
    with game.engine.connect() as conn:
        rows = first_guesses(conn.execute(q.order_by(guesses.c.id)).all())
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    late: dict[str, list[tuple[float, float]]] = defaultdict(list)
    clips: set[str] = set()
    for pid, key, d, s, after in rows:
        (late if after else per)[pid].append((d, s))
        clips.add(key)
    blind = [(r[2], r[3]) for r in rows if not r[4]]
    entries: list[dict[str, Any]] = []
    for pid, vals in per.items():
        entries.append(
            _entry("you" if pid == me else f"player {pid[:6]}", "human", pid == me, vals)
        )
    if blind:
        entries.append(_entry("all players", "crowd", False, blind))
    for model in game.cat.model_names:
        vals = [
            (m["distance_km"], m["geoscore"])
            for k in clips
            for m in game.model_rows.get(k, [])
            if m["model"] == model
        ]
        if vals:
            entries.append(_entry(model, "model", False, vals))
    entries.sort(key=lambda e: (-e["geoscore"], e["name"]))
    flagged = []
    for pid, vals in late.items():
        name = "you" if pid == me else f"player {pid[:6]}"
        e = _entry(f"{name} (after the answer was shown)", "human", pid == me, vals)
        e["after_reveal"] = True
        flagged.append(e)
    flagged.sort(key=lambda e: (not e["me"], -e["geoscore"], e["name"]))
    return {
        "clips": sorted(clips),
        "entries": (entries + flagged)[:100],
        "after_reveal": {"guesses": len(rows) - len(blind), "players": len(late)},
    }


def _spherical_mean(lat: np.ndarray, lon: np.ndarray) -> tuple[float, float]:
    la, lo = np.radians(lat), np.radians(lon)
    v = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)]).mean(axis=1)
    if float(np.linalg.norm(v)) < 1e-9:  # antipodal guesses: no meaningful mean
        return float(lat[0]), float(lon[0])
    return (
        math.degrees(math.atan2(v[2], math.hypot(v[0], v[1]))),
        math.degrees(math.atan2(v[1], v[0])),
    )


def export_guesses(engine: Engine, path: str | Path) -> int:
    """Write all guesses as a "Human" prediction file; returns the number of clips.

    One row per clip (the evaluator keeps one answer per ``question_id``):
    the crowd's guess, the spherical mean of every player's first, blind
    guess for that clip, with ``n_guesses`` (the number of players) beside
    it. Guesses stored as ``after_reveal`` are left out (and counted in the
    log); a clip with no blind guess has no row.
    People click a point: the city, country and continent columns are that
    point's reverse geocoding by the gazetteer ``evaluate`` scores with
    (:meth:`agl_fast.evaluate.gazetteer.Gazetteer.reverse_place`: the nearest
    GeoNames city of 15,000+ inhabitants, its country's and continent's
    English names), so the Human row scores country and continent in both
    modes like a model that names them.

    The format is the suffix's (:data:`EXPORT_FORMATS`); another suffix is a
    :class:`~agl_fast.exceptions.ParameterError` before anything is read.
    The file is written through a new temporary file in its folder and a
    rename; a symlink at ``path`` that points outside that folder is
    refused (:class:`~agl_fast.exceptions.UnsafePathError`).
    """
    import pyarrow as pa

    from ..evaluate.gazetteer import Gazetteer

    out = Path(path)
    export_format(out)

    with engine.connect() as conn:
        rows = conn.execute(
            select(
                guesses.c.player_id,
                guesses.c.clip_key,
                guesses.c.latitude,
                guesses.c.longitude,
                guesses.c.after_reveal,
            ).order_by(guesses.c.id)
        ).all()
    by_clip: dict[str, list[tuple[float, float]]] = defaultdict(list)
    late = 0
    for _, key, lat, lon, after in first_guesses(rows):
        if after:
            late += 1
        else:
            by_clip[key].append((lat, lon))
    if late:
        _log.info("export: %d guesses made after the answer was shown are left out", late)
    cols: dict[str, list[Any]] = defaultdict(list)
    for key, pts in sorted(by_clip.items()):
        arr = np.asarray(pts, dtype=np.float64)
        lat, lon = _spherical_mean(arr[:, 0], arr[:, 1])
        cols["question_id"].append(key)
        cols["predicted_latitude"].append(round(lat, 6))
        cols["predicted_longitude"].append(round(lon, 6))
        cols["n_guesses"].append(len(pts))
        cols["model_output"].append(f"crowd mean of {len(pts)} human guesses")
    n = len(cols["question_id"])
    places = Gazetteer.default().reverse_place(
        cols["predicted_latitude"], cols["predicted_longitude"]
    )
    table = pa.table(
        {
            "question_id": pa.array(cols["question_id"], pa.string()),
            "predicted_city": pa.array([p and p[0] for p in places], pa.string()),
            "predicted_country": pa.array([p and p[1] for p in places], pa.string()),
            "predicted_continent": pa.array([p and p[2] for p in places], pa.string()),
            "predicted_latitude": pa.array(cols["predicted_latitude"], pa.float64()),
            "predicted_longitude": pa.array(cols["predicted_longitude"], pa.float64()),
            "model_output": pa.array(cols["model_output"], pa.string()),
            "finish_reason": pa.array(["stop"] * n, pa.string()),
            "n_guesses": pa.array(cols["n_guesses"], pa.int64()),
        }
    )
    write_export(table, out)
    return n


def export_format(path: str | Path) -> str:
    """The format of an export file by its suffix (:data:`EXPORT_FORMATS`);
    a :class:`~agl_fast.exceptions.ParameterError` for another suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise ParameterError(
            f"cannot tell the export format of {Path(path).name!r}: its suffix must be one of "
            f"{', '.join(EXPORT_FORMATS)}"
        )
    return suffix


def write_export(table: Any, path: str | Path) -> None:
    """Write a prediction table (``pyarrow.Table``) in the format of
    ``path``'s suffix, through a new temporary file in its folder and a
    rename (:mod:`agl_fast._internal.safe_files`)."""
    import pyarrow.parquet as pq

    out = Path(path)
    suffix = export_format(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out, fsync=True) as fh:
        if suffix == ".parquet":
            pq.write_table(table, fh)
        else:
            fh.write(_csv_bytes(table))


def _csv_bytes(table: Any) -> bytes:
    """``table`` as UTF-8 CSV with a header, as the raw progress files are
    written (a newline inside a field as the two characters ``\\n``; a
    missing value empty; floats in their shortest exact form)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(table.column_names)
    for row in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
        w.writerow([_csv_field(v) for v in row])
    return buf.getvalue().encode("utf-8")


def _csv_field(v: Any) -> str:
    if v is None:
        return ""
    return v.replace("\n", "\\n") if isinstance(v, str) else repr(v)
