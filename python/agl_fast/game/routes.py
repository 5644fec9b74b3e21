"""Request handlers of the game's web application, in route groups.

Each handler finds the shared :class:`~agl_fast.game.state.Game` on the
application's state; :func:`page_routes`, :func:`round_routes` and
:func:`guess_routes` list the routes of each group for
:func:`agl_fast.game.app.create_app`.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..geo import GEOSCORE_MAX
from .clips import AUDIO_TYPES, Clip, coordinate_or_none
from .db import guesses, now, players, rounds
from .guard import client_address, read_json_object
from .limits import MAX_ROUND_SIZE, address_key
from .state import Game, distance_km, score

#: The page, scripts, styles and world map of the player.
STATIC = Path(__file__).resolve().parent / "static"
#: Name of the cookie that holds the anonymous player id.
COOKIE = "agl_player"
#: Content security policy of the player page.
CSP = (
    "default-src 'self'; img-src 'self' data:; media-src 'self'; "
    "style-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"
)
_ID_CHARS = set("0123456789abcdef")
_COOKIE_SECONDS = 365 * 86400


def _game(request: Request) -> Game:
    game: Game = request.app.state.game
    return game


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _max_score(n_clips: int) -> int:
    return int(GEOSCORE_MAX) * n_clips


def _is_id(v: str) -> bool:
    return len(v) == 32 and set(v) <= _ID_CHARS


def _player_id(request: Request) -> str | None:
    pid = request.cookies.get(COOKIE, "")
    return pid if _is_id(pid) else None


def _address(request: Request) -> str:
    return address_key(client_address(request))


def _round_for(game: Game, request: Request, round_id: str) -> dict[str, Any] | None:
    pid = _player_id(request)
    if pid is None or not _is_id(round_id):  # ids are ours: nothing else reaches a query
        return None
    with game.engine.connect() as conn:
        row = conn.execute(
            select(rounds).where(rounds.c.id == round_id, rounds.c.player_id == pid)
        ).first()
    if row is None:
        return None
    return {"id": row.id, "player_id": pid, "keys": json.loads(row.clip_keys)}


def _guess_coordinates(data: dict[str, Any]) -> tuple[float, float] | None:
    """The guessed point; JSON numbers only (text is refused), checked by the coordinate rule."""
    lat, lon = data.get("lat"), data.get("lon")
    if isinstance(lat, str) or isinstance(lon, str):
        return None
    la, lo = coordinate_or_none(lat, "latitude"), coordinate_or_none(lon, "longitude")
    return None if la is None or lo is None else (la, lo)


# -- pages ------------------------------------------------------------------


async def index(request: Request) -> Response:
    """The player page."""
    html = request.app.state.index_html
    return Response(html, media_type="text/html", headers={"Content-Security-Policy": CSP})


async def health(request: Request) -> Response:
    """Liveness and the number of clips."""
    return JSONResponse({"ok": True, "clips": len(_game(request).cat.clips)})


async def audio(request: Request) -> Response:
    """A clip's audio by catalogue key (range requests served by Starlette)."""
    clip = _game(request).cat.clips.get(request.path_params["key"])
    if clip is None:
        return _error(404, "unknown clip")
    media = AUDIO_TYPES.get(clip.path.suffix.lower(), "application/octet-stream")
    return FileResponse(clip.path, media_type=media, headers={"Cache-Control": "no-store"})


def page_routes() -> list[BaseRoute]:
    """The page, health, audio and static routes."""
    return [
        Route("/", index),
        Route("/api/health", health),
        Route("/api/clips/{key}/audio", audio),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


# -- rounds -----------------------------------------------------------------


def _write_round(game: Game, pid: str, new: bool, rid: str, n: int) -> list[str]:
    """Draw the round's clips (unguessed first) and store the round (and a new player)."""
    seen: set[str] = set()
    if not new:
        with game.engine.connect() as conn:
            q = select(guesses.c.clip_key).where(guesses.c.player_id == pid).distinct()
            seen = {r[0] for r in conn.execute(q)}
    keys = game.sample(n, seen)
    with game.writing(), game.engine.begin() as conn:
        if new or conn.execute(select(players.c.id).where(players.c.id == pid)).first() is None:
            conn.execute(insert(players).values(id=pid, created_at=now()))
        conn.execute(
            insert(rounds).values(
                id=rid, player_id=pid, clip_keys=json.dumps(keys), created_at=now()
            )
        )
    return keys


async def start_round(request: Request) -> Response:
    """``POST /api/rounds``: a round of ``n`` clips, without their answers."""
    game = _game(request)
    pid, new = _player_id(request), False
    game.limit("rounds", _address(request), pid)
    data = await read_json_object(request)
    n = data.get("n", game.config.round_size)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_ROUND_SIZE:
        return _error(422, f"n must be an integer in [1, {MAX_ROUND_SIZE}], got {n!r}")
    if pid is None:
        pid, new = secrets.token_hex(16), True
    rid = secrets.token_hex(16)
    keys = await run_in_threadpool(_write_round, game, pid, new, rid, n)
    body = {
        "round_id": rid,
        "player": pid[:6],
        "clips": [
            {"index": i, "key": k, "audio": f"/api/clips/{k}/audio"} for i, k in enumerate(keys)
        ],
        "max_score": _max_score(len(keys)),
    }
    resp = JSONResponse(body, status_code=201)
    resp.set_cookie(
        COOKIE,
        pid,
        max_age=_COOKIE_SECONDS,
        httponly=True,
        samesite="strict",
        secure=game.config.secure_cookie,
    )
    return resp


def round_state(request: Request) -> Response:
    """``GET /api/rounds/{round_id}``: the clips, with the reveals of those guessed."""
    game = _game(request)
    r = _round_for(game, request, request.path_params["round_id"])
    if r is None:
        return _error(404, "unknown round")
    with game.engine.connect() as conn:
        done = conn.execute(select(guesses).where(guesses.c.round_id == r["id"])).all()
    by_key = {g.clip_key: g for g in done}
    clips, shown = [], []
    for i, k in enumerate(r["keys"]):
        item: dict[str, Any] = {"index": i, "key": k, "audio": f"/api/clips/{k}/audio"}
        clip, g = game.cat.clips.get(k), by_key.get(k)
        if clip is None:
            item["removed"] = True  # no longer in the catalogue: no audio, no answer
        elif g is not None:
            item["reveal"] = game.reveal(clip, g.latitude, g.longitude, g.distance_km, g.geoscore)
            shown.append(k)
        clips.append(item)
    game.shown(shown, r["player_id"], game.hash_address(_address(request)))
    total = sum(g.geoscore for g in done)
    return JSONResponse(
        {
            "round_id": r["id"],
            "clips": clips,
            "score": round(total, 1),
            "max_score": _max_score(len(r["keys"])),
            "done": len(done) == len(r["keys"]),
        }
    )


def reveal(request: Request) -> Response:
    """``GET /api/rounds/{round_id}/reveal/{key}``: the answer, after the player's guess."""
    game = _game(request)
    r = _round_for(game, request, request.path_params["round_id"])
    key = request.path_params["key"]
    if r is None or key not in r["keys"]:
        return _error(404, "unknown round or clip")
    with game.engine.connect() as conn:
        g = conn.execute(
            select(guesses).where(guesses.c.round_id == r["id"], guesses.c.clip_key == key)
        ).first()
    if g is None:
        return _error(403, "the answer is shown only after your guess")
    clip = game.cat.clips.get(key)
    if clip is None:
        return _error(404, "clip no longer in the catalogue")
    game.shown([key], r["player_id"], game.hash_address(_address(request)))
    return JSONResponse(game.reveal(clip, g.latitude, g.longitude, g.distance_km, g.geoscore))


def leaderboard(request: Request) -> Response:
    """``GET /api/leaderboard[?round_id=]``: players and models on the same clips."""
    from .board import board

    game = _game(request)
    rid = request.query_params.get("round_id")
    keys = None
    if rid is not None:
        r = _round_for(game, request, rid)
        if r is None:
            return _error(404, "unknown round")
        keys = r["keys"]
    return JSONResponse(board(game, keys, _player_id(request)))


def round_routes() -> list[BaseRoute]:
    """Starting and reading rounds, reveals and the leaderboard."""
    return [
        Route("/api/rounds", start_round, methods=["POST"]),
        Route("/api/rounds/{round_id}", round_state),
        Route("/api/rounds/{round_id}/reveal/{key}", reveal),
        Route("/api/leaderboard", leaderboard),
    ]


# -- guesses ----------------------------------------------------------------


def _store_guess(
    game: Game, r: dict[str, Any], clip: Clip, addr: str, lat: float, lon: float
) -> Response:
    """Store a guess (flagged when the answer was shown before) and answer with the reveal."""
    rid, key = r["id"], clip.key
    d = distance_km(lat, lon, clip.lat, clip.lon)
    s = score(d)
    address = game.hash_address(addr)
    shown = game.new_reveals([key], r["player_id"], address)
    try:
        with game.writing(), game.engine.begin() as conn:
            seen = game.seen_before(conn, key, r["player_id"], address)
            conn.execute(
                insert(guesses).values(
                    player_id=r["player_id"],
                    round_id=rid,
                    clip_key=key,
                    latitude=lat,
                    longitude=lon,
                    distance_km=d,
                    geoscore=s,
                    created_at=now(),
                    after_reveal=seen,
                )
            )
            game.insert_reveals(conn, shown)
            total = conn.execute(
                select(func.coalesce(func.sum(guesses.c.geoscore), 0.0), func.count()).where(
                    guesses.c.round_id == rid
                )
            ).one()
    except IntegrityError:
        return _error(409, "this clip already has your guess in this round")
    game.remember_reveals(shown)
    out = game.reveal(clip, lat, lon, d, s)
    out["after_reveal"] = seen
    out["round"] = {
        "score": round(float(total[0]), 1),
        "guessed": int(total[1]),
        "n": len(r["keys"]),
        "max_score": _max_score(len(r["keys"])),
    }
    return JSONResponse(out, status_code=201)


async def guess(request: Request) -> Response:
    """``POST /api/guesses``: ``{round_id, key, lat, lon}`` -> the reveal."""
    game = _game(request)
    addr = _address(request)
    game.limit("guesses", addr, _player_id(request))
    data = await read_json_object(request)
    point = _guess_coordinates(data)
    if point is None:
        return _error(
            422,
            "lat must be a number in [-90, 90] and lon a number in [-180, 180], "
            f"got lat={data.get('lat')!r}, lon={data.get('lon')!r}",
        )
    lat, lon = point
    rid, key = data.get("round_id"), data.get("key")
    if not isinstance(rid, str) or not isinstance(key, str):
        return _error(422, "round_id and key must be strings")

    def write() -> Response:
        r = _round_for(game, request, rid)
        if r is None:
            return _error(404, "unknown round")
        if key not in r["keys"]:
            return _error(404, "clip not in this round")
        clip = game.cat.clips.get(key)
        if clip is None:
            return _error(404, "clip no longer in the catalogue")
        return _store_guess(game, r, clip, addr, lat, lon)

    return await run_in_threadpool(write)


def guess_routes() -> list[BaseRoute]:
    """Guessing a clip."""
    return [Route("/api/guesses", guess, methods=["POST"])]
