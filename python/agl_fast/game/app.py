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
rate limited per client address (token bucket).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import secrets
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, insert, select
from sqlalchemy.exc import IntegrityError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from ..geo import geoscore, haversine
from .clips import AUDIO_TYPES, Catalogue, Clip
from .db import guesses, make_engine, migrate, now, players, rounds

STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "agl_player"
REFUSAL_KM = 10000.0
MAX_BODY = 4096
_ID_CHARS = set("0123456789abcdef")
CSP = (
    "default-src 'self'; img-src 'self' data:; media-src 'self'; "
    "style-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"
)


@dataclass
class GameConfig:
    """Settings of one game server."""

    catalogue: Catalogue
    db_url: str
    round_size: int = 5
    rate_per_s: float = 20.0
    burst: int = 60
    secure_cookie: bool = False
    seed: int | None = None


class RateLimiter:
    """Per-client token bucket: ``rate`` tokens a second, at most ``burst``."""

    def __init__(self, app: ASGIApp, rate: float, burst: int) -> None:
        self.app, self.rate, self.burst = app, float(rate), float(burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, client: str) -> bool:
        t = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(client, (self.burst, t))
            tokens = min(self.burst, tokens + (t - last) * self.rate)
            ok = tokens >= 1.0
            self._buckets[client] = (tokens - 1.0 if ok else tokens, t)
            if len(self._buckets) > 100_000:  # forget idle clients
                self._buckets = {k: v for k, v in self._buckets.items() if t - v[1] < 60}
        return ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            client = (scope.get("client") or ("?", 0))[0]
            if not self.allow(client):
                resp = JSONResponse(
                    {"error": "too many requests"}, status_code=429, headers={"Retry-After": "1"}
                )
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _distance(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    return float(haversine([lat1], [lon1], [lat2], [lon2], n_threads=1)[0])


def _score(d_km: float) -> float:
    return float(geoscore([d_km])[0])


def _coordinate(v: Any, lo: float, hi: float) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    x = float(v)
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


def _player_id(request: Request) -> str | None:
    pid = request.cookies.get(COOKIE, "")
    return pid if len(pid) == 32 and set(pid) <= _ID_CHARS else None


def _round_for(game: Game, request: Request, round_id: str) -> dict[str, Any] | None:
    pid = _player_id(request)
    if pid is None:
        return None
    with game.engine.connect() as conn:
        row = conn.execute(
            select(rounds).where(rounds.c.id == round_id, rounds.c.player_id == pid)
        ).first()
    if row is None:
        return None
    return {"id": row.id, "player_id": pid, "keys": json.loads(row.clip_keys)}


async def _json_body(request: Request) -> dict[str, Any] | None:
    body = await request.body()
    if len(body) > MAX_BODY:
        return None
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


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
        data = await _json_body(request)
        if data is None:
            return _error(400, "body must be a JSON object")
        n = data.get("n", config.round_size)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 50:
            return _error(422, f"n must be an integer in [1, 50], got {n!r}")
        pid, new = _player_id(request), False
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
        clips = []
        for i, k in enumerate(r["keys"]):
            item: dict[str, Any] = {"index": i, "key": k, "audio": f"/api/clips/{k}/audio"}
            g = by_key.get(k)
            if g is not None and k in game.cat.clips:
                item["reveal"] = game.reveal(
                    game.cat.clips[k], g.latitude, g.longitude, g.distance_km, g.geoscore
                )
            clips.append(item)
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
        data = await _json_body(request)
        if data is None:
            return _error(400, "body must be a JSON object of at most 4 KiB")
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
            if key not in r["keys"] or key not in game.cat.clips:
                return _error(404, "clip not in this round")
            clip = game.cat.clips[key]
            d = _distance(lat, lon, clip.lat, clip.lon)
            s = _score(d)
            try:
                with game.writing(), engine.begin() as conn:
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
                        )
                    )
                    total = conn.execute(
                        select(
                            func.coalesce(func.sum(guesses.c.geoscore), 0.0), func.count()
                        ).where(guesses.c.round_id == rid)
                    ).one()
            except IntegrityError:
                return _error(409, "this clip already has your guess in this round")
            out = game.reveal(clip, lat, lon, d, s)
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
        return JSONResponse(
            game.reveal(game.cat.clips[key], g.latitude, g.longitude, g.distance_km, g.geoscore)
        )

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

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.game = game
    return RateLimiter(app, config.rate_per_s, config.burst)
