"""The game's web application (Starlette): pages, audio stream and JSON API.

Routes
------
``GET /``                                   the player page
``GET /static/...``                         JS, CSS and the world map, served by the app
``GET /api/clips/{key}/audio``              a clip by catalogue key (HTTP range requests)
``POST /api/rounds``                        start a round of N clips (no truth in the answer)
``GET /api/rounds/{round_id}``              the round's clips, with reveals of those guessed
``POST /api/guesses``                       ``{round_id, key, lat, lon}`` -> the reveal
``GET /api/rounds/{round_id}/reveal/{key}`` the reveal, only after the player's guess
``GET /api/leaderboard[?round_id=]``        players and models on the same clips

A player is an anonymous random id in an HTTP-only cookie. Requests are
rate limited per client address, and rounds and guesses per player and per
address (token buckets, :mod:`agl_fast.game.guard`); bodies are bounded before
they are read and JSON nesting before it is parsed. Every showing of a clip's
answer is remembered by player and hashed address, and a later guess of that
clip by the same player or address is stored as ``after_reveal``: the
leaderboard and the export leave such guesses out of the rankings.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import secrets
import threading
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Insert, func, insert, or_, select
from sqlalchemy.exc import IntegrityError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ..geo import geoscore, haversine
from .clips import AUDIO_TYPES, Catalogue, Clip
from .db import address_hasher, guesses, make_engine, migrate, now, players, reveals, rounds
from .guard import Guard, client_address, read_json_object, too_many
from .limits import (
    GUESSES_PER_ADDRESS,
    GUESSES_PER_PLAYER,
    REQUESTS_PER_ADDRESS,
    ROUNDS_PER_ADDRESS,
    ROUNDS_PER_PLAYER,
    Limit,
    TokenBuckets,
    address_key,
)

_log = logging.getLogger("agl_fast.game")

STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "agl_player"
REFUSAL_KM = 10000.0
_ID_CHARS = set("0123456789abcdef")
_KNOWN_REVEALS_MAX = 200_000
CSP = (
    "default-src 'self'; img-src 'self' data:; media-src 'self'; "
    "style-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"
)


@dataclass
class GameConfig:
    """Settings of one game server.

    ``rate_per_s``/``burst`` limit every request per client address; the
    ``*_limit_*`` fields limit new rounds and guesses per player and per
    address. ``trusted_proxies`` (addresses or networks) are the only peers
    whose ``X-Forwarded-For`` is believed; empty, the peer is the client.
    """

    catalogue: Catalogue
    db_url: str
    round_size: int = 5
    rate_per_s: float = REQUESTS_PER_ADDRESS.per_second
    burst: int = REQUESTS_PER_ADDRESS.burst
    secure_cookie: bool = False
    seed: int | None = None
    trusted_proxies: tuple[str, ...] = ()
    round_limit_player: Limit = ROUNDS_PER_PLAYER
    round_limit_address: Limit = ROUNDS_PER_ADDRESS
    guess_limit_player: Limit = GUESSES_PER_PLAYER
    guess_limit_address: Limit = GUESSES_PER_ADDRESS


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _distance(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    return float(haversine([lat1], [lon1], [lat2], [lon2], n_threads=1)[0])


def _score(d_km: float) -> float:
    return float(geoscore([d_km])[0])


def _coordinate(v: Any, lo: float, hi: float) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        x = float(v)
    except OverflowError:  # an integer of thousands of digits
        return None
    return x if math.isfinite(x) and lo <= x <= hi else None


class Game:
    """State shared by the handlers: catalogue, engine, model scores per clip."""

    def __init__(self, config: GameConfig, engine: Engine) -> None:
        self.config, self.engine, self.cat = config, engine, config.catalogue
        # SQLite has one writer at a time: queueing writers on a lock here is
        # much faster than letting them spin on the database's busy handler.
        self._write_lock = threading.Lock() if engine.dialect.name == "sqlite" else None
        self.rng: random.Random = (
            secrets.SystemRandom() if config.seed is None else random.Random(config.seed)
        )
        self.model_rows: dict[str, list[dict[str, Any]]] = {}
        for key, clip in self.cat.clips.items():
            rows = []
            for name, g in sorted(self.cat.models.get(key, {}).items()):
                if g.lat is None or g.lon is None:
                    d = REFUSAL_KM
                else:
                    d = _distance(g.lat, g.lon, clip.lat, clip.lon)
                rows.append(
                    {
                        "model": name,
                        "lat": g.lat,
                        "lon": g.lon,
                        "city": g.city,
                        "country": g.country,
                        "reasoning": g.reasoning[:4000],
                        "distance_km": round(d, 1),
                        "geoscore": round(_score(d), 1),
                    }
                )
            self.model_rows[key] = rows
        self.hash_address = address_hasher(engine)
        self.buckets = {
            ("rounds", "player"): TokenBuckets(config.round_limit_player),
            ("rounds", "address"): TokenBuckets(config.round_limit_address),
            ("guesses", "player"): TokenBuckets(config.guess_limit_player),
            ("guesses", "address"): TokenBuckets(config.guess_limit_address),
        }
        self._known_reveals: set[tuple[str, str, str]] = set()
        self._known_lock = threading.Lock()
        dialect = engine.dialect.name
        self._insert_reveals: Insert
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            self._insert_reveals = sqlite_insert(reveals).on_conflict_do_nothing()
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._insert_reveals = pg_insert(reveals).on_conflict_do_nothing()
        else:
            self._insert_reveals = insert(reveals)

    def limit(self, what: str, address: str, player: str | None) -> None:
        """Spend a token of ``what`` (rounds, guesses) for the address and the player, or 429."""
        for who, key in (("address", address), ("player", player)):
            if key is None:
                continue
            buckets = self.buckets[(what, who)]
            wait = buckets.take(key)
            if wait > 0.0:
                raise too_many(f"{what} from this {who}", buckets.limit, wait)

    def new_reveals(self, keys: Iterable[str], pid: str, address: str) -> list[dict[str, Any]]:
        """Rows of ``reveals`` for the showings of ``keys`` not recorded yet."""
        with self._known_lock:
            fresh = [k for k in keys if (k, pid, address) not in self._known_reveals]
        t = now()
        return [
            {"clip_key": k, "player_id": pid, "address": address, "created_at": t} for k in fresh
        ]

    def insert_reveals(self, conn: Any, rows: list[dict[str, Any]]) -> None:
        """Record showings of answers (an existing one is kept as it is)."""
        if not rows:
            return
        if self.engine.dialect.name in ("sqlite", "postgresql"):
            conn.execute(self._insert_reveals, rows)
            return
        for row in rows:  # other databases: look before inserting
            q = select(reveals.c.id).where(
                reveals.c.clip_key == row["clip_key"],
                reveals.c.player_id == row["player_id"],
                reveals.c.address == row["address"],
            )
            if conn.execute(q).first() is None:
                conn.execute(insert(reveals).values(**row))

    def remember_reveals(self, rows: list[dict[str, Any]]) -> None:
        """Note committed showings, so that showing them again writes nothing."""
        with self._known_lock:
            if len(self._known_reveals) > _KNOWN_REVEALS_MAX:
                self._known_reveals.clear()
            self._known_reveals.update((r["clip_key"], r["player_id"], r["address"]) for r in rows)

    def shown(self, keys: Iterable[str], pid: str, address: str) -> None:
        """Record that the answers of ``keys`` were shown to ``pid`` at ``address``."""
        rows = self.new_reveals(keys, pid, address)
        if not rows:
            return
        with self.writing(), self.engine.begin() as conn:
            self.insert_reveals(conn, rows)
        self.remember_reveals(rows)

    def seen_before(self, conn: Any, key: str, pid: str, address: str) -> bool:
        """Whether the answer of ``key`` was already shown to the player or the address."""
        by = [reveals.c.player_id == pid, reveals.c.address == address]
        q = select(
            or_(*(select(reveals.c.id).where(reveals.c.clip_key == key, w).exists() for w in by))
        )
        return bool(conn.execute(q).scalar())

    def writing(self) -> contextlib.AbstractContextManager[Any]:
        """Context of a write transaction (serialized on SQLite)."""
        return self._write_lock if self._write_lock is not None else contextlib.nullcontext()

    def sample(self, n: int, seen: set[str] | None = None) -> list[str]:
        """``n`` distinct clips, those the player has not guessed yet first."""
        seen = seen or set()
        fresh = sorted(k for k in self.cat.clips if k not in seen)
        old = sorted(k for k in self.cat.clips if k in seen)
        n = max(1, min(n, len(fresh) + len(old)))
        if len(fresh) >= n:
            return self.rng.sample(fresh, n)
        return self.rng.sample(fresh, len(fresh)) + self.rng.sample(old, n - len(fresh))

    def reveal(self, clip: Clip, lat: float, lon: float, d: float, s: float) -> dict[str, Any]:
        return {
            "key": clip.key,
            "guess": {"lat": lat, "lon": lon},
            "truth": {
                "lat": clip.lat,
                "lon": clip.lon,
                "city": clip.city,
                "country": clip.country,
                "continent": clip.continent,
                "title": clip.title,
            },
            "distance_km": round(d, 1),
            "geoscore": round(s, 1),
            "models": self.model_rows.get(clip.key, []),
        }


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


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    _log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"error": "internal error"}, status_code=500)


def create_app(config: GameConfig) -> ASGIApp:
    """Build the ASGI application (migrates the database first)."""
    engine = make_engine(config.db_url)
    migrate(engine)
    game = Game(config, engine)

    html = (STATIC / "index.html").read_text(encoding="utf-8")

    async def index(request: Request) -> Response:
        return Response(html, media_type="text/html", headers={"Content-Security-Policy": CSP})

    async def audio(request: Request) -> Response:
        clip = game.cat.clips.get(request.path_params["key"])
        if clip is None:
            return _error(404, "unknown clip")
        media = AUDIO_TYPES.get(clip.path.suffix.lower(), "application/octet-stream")
        return FileResponse(clip.path, media_type=media, headers={"Cache-Control": "no-store"})

    async def start_round(request: Request) -> Response:
        pid, new = _player_id(request), False
        game.limit("rounds", _address(request), pid)
        data = await read_json_object(request)
        n = data.get("n", config.round_size)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 50:
            return _error(422, f"n must be an integer in [1, 50], got {n!r}")
        if pid is None:
            pid, new = secrets.token_hex(16), True
        rid = secrets.token_hex(16)
        keys: list[str] = []

        def write() -> None:
            seen: set[str] = set()
            if not new:
                with engine.connect() as conn:
                    q = select(guesses.c.clip_key).where(guesses.c.player_id == pid).distinct()
                    seen = {r[0] for r in conn.execute(q)}
            keys[:] = game.sample(n, seen)
            with game.writing(), engine.begin() as conn:
                if (
                    new
                    or conn.execute(select(players.c.id).where(players.c.id == pid)).first() is None
                ):
                    conn.execute(insert(players).values(id=pid, created_at=now()))
                conn.execute(
                    insert(rounds).values(
                        id=rid, player_id=pid, clip_keys=json.dumps(keys), created_at=now()
                    )
                )

        await run_in_threadpool(write)
        body = {
            "round_id": rid,
            "player": pid[:6],
            "clips": [
                {"index": i, "key": k, "audio": f"/api/clips/{k}/audio"} for i, k in enumerate(keys)
            ],
            "max_score": 5000 * len(keys),
        }
        resp = JSONResponse(body, status_code=201)
        resp.set_cookie(
            COOKIE,
            pid,
            max_age=365 * 86400,
            httponly=True,
            samesite="strict",
            secure=config.secure_cookie,
        )
        return resp

    def round_state(request: Request) -> Response:
        r = _round_for(game, request, request.path_params["round_id"])
        if r is None:
            return _error(404, "unknown round")
        with engine.connect() as conn:
            done = conn.execute(select(guesses).where(guesses.c.round_id == r["id"])).all()
        by_key = {g.clip_key: g for g in done}
        clips, shown = [], []
        for i, k in enumerate(r["keys"]):
            item: dict[str, Any] = {"index": i, "key": k, "audio": f"/api/clips/{k}/audio"}
            clip, g = game.cat.clips.get(k), by_key.get(k)
            if clip is None:
                item["removed"] = True  # no longer in the catalogue: no audio, no answer
            elif g is not None:
                item["reveal"] = game.reveal(
                    clip, g.latitude, g.longitude, g.distance_km, g.geoscore
                )
                shown.append(k)
            clips.append(item)
        game.shown(shown, r["player_id"], game.hash_address(_address(request)))
        total = sum(g.geoscore for g in done)
        return JSONResponse(
            {
                "round_id": r["id"],
                "clips": clips,
                "score": round(total, 1),
                "max_score": 5000 * len(r["keys"]),
                "done": len(done) == len(r["keys"]),
            }
        )

    async def guess(request: Request) -> Response:
        addr = _address(request)
        game.limit("guesses", addr, _player_id(request))
        data = await read_json_object(request)
        lat = _coordinate(data.get("lat"), -90.0, 90.0)
        lon = _coordinate(data.get("lon"), -180.0, 180.0)
        if lat is None or lon is None:
            return _error(
                422,
                "lat must be a number in [-90, 90] and lon a number in [-180, 180], "
                f"got lat={data.get('lat')!r}, lon={data.get('lon')!r}",
            )
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
            d = _distance(lat, lon, clip.lat, clip.lon)
            s = _score(d)
            address = game.hash_address(addr)
            shown = game.new_reveals([key], r["player_id"], address)
            try:
                with game.writing(), engine.begin() as conn:
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
                        select(
                            func.coalesce(func.sum(guesses.c.geoscore), 0.0), func.count()
                        ).where(guesses.c.round_id == rid)
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
                "max_score": 5000 * len(r["keys"]),
            }
            return JSONResponse(out, status_code=201)

        return await run_in_threadpool(write)

    def reveal(request: Request) -> Response:
        r = _round_for(game, request, request.path_params["round_id"])
        key = request.path_params["key"]
        if r is None or key not in r["keys"]:
            return _error(404, "unknown round or clip")
        with engine.connect() as conn:
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
        from .board import board

        rid = request.query_params.get("round_id")
        keys = None
        if rid is not None:
            r = _round_for(game, request, rid)
            if r is None:
                return _error(404, "unknown round")
            keys = r["keys"]
        return JSONResponse(board(game, keys, _player_id(request)))

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "clips": len(game.cat.clips)})

    routes = [
        Route("/", index),
        Route("/api/health", health),
        Route("/api/clips/{key}/audio", audio),
        Route("/api/rounds", start_round, methods=["POST"]),
        Route("/api/rounds/{round_id}", round_state),
        Route("/api/rounds/{round_id}/reveal/{key}", reveal),
        Route("/api/guesses", guess, methods=["POST"]),
        Route("/api/leaderboard", leaderboard),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        engine.dispose()

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.game = game
    requests = Limit(per_minute=config.rate_per_s * 60.0, burst=config.burst)
    return Guard(app, requests=requests, trusted_proxies=config.trusted_proxies)
