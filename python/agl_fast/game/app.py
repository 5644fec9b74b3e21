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
``GET /screen``, ``/api/screening``           screening the pool (:mod:`.screening`; off by default)

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
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from .db import make_engine, migrate
from .guard import Guard
from .limits import Limit
from .routes import COOKIE, CSP, STATIC, guess_routes, page_routes, round_routes
from .screening import screening_routes
from .state import REFUSAL_KM, Game, GameConfig

__all__ = ["COOKIE", "CSP", "REFUSAL_KM", "STATIC", "Game", "GameConfig", "create_app"]

_log = logging.getLogger("agl_fast.game")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    _log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"error": "internal error"}, status_code=500)


def create_app(config: GameConfig) -> ASGIApp:
    """Build the ASGI application (migrates the database first).

    Parameters
    ----------
    config : GameConfig
        The catalogue, database and limits of the server.

    Returns
    -------
    ASGIApp
        The application behind its request guard (body caps, rate limits).
    """
    engine = make_engine(config.db_url)
    migrate(engine)
    game = Game(config, engine)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        engine.dispose()

    app = Starlette(
        routes=[*page_routes(), *round_routes(), *guess_routes(), *screening_routes()],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.game = game
    app.state.index_html = (STATIC / "index.html").read_text(encoding="utf-8")
    requests = Limit(per_minute=config.rate_per_s * 60.0, burst=config.burst)
    return Guard(app, requests=requests, trusted_proxies=config.trusted_proxies)
