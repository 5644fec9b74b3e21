"""Screening the pool: a curator listens to each clip and accepts or rejects it.

The paper's benchmark was screened by hand before selection. The game server
serves the page for it (``agl-fast serve --screening``) over the same clip
catalogue; the decisions live in the game's database (table ``screening``,
one row per clip, the latest decision wins), so a curator can stop and
resume, and ``agl-fast localizability select --screening DB_URL`` leaves the
rejected clips out.

Routes (all answer 404 while screening is off)
------
``GET /screen``                 the curator's page; the token rides in the URL fragment
``GET /api/screening``          the clips, each with its decision and note
``POST /api/screening``         ``{key, decision: "accept"|"reject", note, curator}``

The API needs the server's screening token in the ``X-Screening-Token``
header (compared in constant time; 403 otherwise). Decisions are rate
limited per client address and notes are bounded
(:data:`~agl_fast.game.limits.MAX_NOTE_CHARS`), like the rest of the game.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.engine import make_url

from ..exceptions import ParameterError
from .db import current_version, make_engine, now, screening

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from .state import Game

__all__ = [
    "DECISIONS",
    "TOKEN_HEADER",
    "Decision",
    "read_decisions",
    "record_decision",
    "screening_routes",
]

#: The two decisions a curator makes.
DECISIONS = ("accept", "reject")
#: Request header that carries the screening token.
TOKEN_HEADER = "X-Screening-Token"
#: Longest curator name kept, in characters.
MAX_CURATOR_CHARS = 64
_SCREENING_VERSION = 4


@dataclass(frozen=True)
class Decision:
    """A curator's decision on one clip."""

    decision: str
    note: str
    curator: str
    decided_at: datetime


def record_decision(
    engine: Engine, key: str, decision: str, note: str = "", curator: str = ""
) -> None:
    """Store the decision on ``key``, replacing an earlier one (one transaction)."""
    if decision not in DECISIONS:
        raise ParameterError(f"decision must be one of {DECISIONS}, got {decision!r}")
    with engine.begin() as conn:
        conn.execute(delete(screening).where(screening.c.clip_key == key))
        conn.execute(
            insert(screening).values(
                clip_key=key, decision=decision, note=note, curator=curator, decided_at=now()
            )
        )


def _decisions(engine: Engine) -> dict[str, Decision]:
    with engine.connect() as conn:
        rows = conn.execute(select(screening)).all()
    return {r.clip_key: Decision(r.decision, r.note, r.curator, r.decided_at) for r in rows}


def read_decisions(db: str | Engine) -> dict[str, Decision]:
    """Every screening decision of a game database, by clip key.

    Parameters
    ----------
    db : str or Engine
        A SQLAlchemy URL (``sqlite:///game.sqlite``, ``postgresql+psycopg://...``)
        or an engine.

    Raises
    ------
    ParameterError
        A SQLite file that does not exist, or a database without the
        screening table (never served with screening, or older than it).
    """
    if isinstance(db, Engine):
        engine, own = db, False
    else:
        url = make_url(db)
        if url.get_backend_name() == "sqlite" and not Path(url.database or "").is_file():
            raise ParameterError(f"screening database not found: {db}")
        engine, own = make_engine(db), True
    try:
        if current_version(engine) < _SCREENING_VERSION:
            raise ParameterError(
                f"{engine.url!r} holds no screening decisions (a game database of schema "
                f"version {_SCREENING_VERSION} or later, written by 'agl-fast serve --screening')"
            )
        return _decisions(engine)
    finally:
        if own:
            engine.dispose()


# -- the web side -----------------------------------------------------------------


def _game(request: Request) -> Game:
    game: Game = request.app.state.game
    return game


def _refusal(request: Request) -> Response | None:
    """404 while screening is off, 403 without the right token, else None."""
    from starlette.responses import JSONResponse

    token = _game(request).config.screening_token
    if not token:
        return JSONResponse({"error": "not found"}, status_code=404)
    given = request.headers.get(TOKEN_HEADER, "")
    if not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8")):
        return JSONResponse({"error": "screening needs the curator's token"}, status_code=403)
    return None


async def page(request: Request) -> Response:
    """``GET /screen``: the curator's page (404 while screening is off)."""
    from starlette.responses import JSONResponse, Response

    from .routes import CSP, STATIC

    if not _game(request).config.screening_token:
        return JSONResponse({"error": "not found"}, status_code=404)
    html = (STATIC / "screen.html").read_text(encoding="utf-8")
    return Response(html, media_type="text/html", headers={"Content-Security-Policy": CSP})


async def listing(request: Request) -> Response:
    """``GET /api/screening``: the pool's clips with their decisions."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    refused = _refusal(request)
    if refused is not None:
        return refused
    game = _game(request)
    done = await run_in_threadpool(_decisions, game.engine)
    clips: list[dict[str, Any]] = []
    for key in sorted(game.cat.clips):
        clip, d = game.cat.clips[key], done.get(key)
        clips.append(
            {
                "key": key,
                "title": clip.title,
                "seconds": clip.seconds,
                "audio": f"/api/clips/{key}/audio",
                "decision": d.decision if d else None,
                "note": d.note if d else "",
            }
        )
    n = {k: sum(c["decision"] == k for c in clips) for k in DECISIONS}
    return JSONResponse({"clips": clips, "accepted": n["accept"], "rejected": n["reject"]})


def _checked(data: dict[str, Any], game: Game) -> tuple[str, str, str, str] | str:
    """``(key, decision, note, curator)`` of a request body, or what is wrong with it."""
    from .limits import MAX_NOTE_CHARS

    key, decision = data.get("key"), data.get("decision")
    note, curator = data.get("note", ""), data.get("curator", "")
    if not isinstance(key, str) or key not in game.cat.clips:
        return "key must name a clip of the pool"
    if decision not in DECISIONS:
        return f"decision must be one of {list(DECISIONS)}, got {decision!r}"
    if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS:
        return f"note must be text of at most {MAX_NOTE_CHARS} characters"
    if not isinstance(curator, str) or len(curator) > MAX_CURATOR_CHARS:
        return f"curator must be text of at most {MAX_CURATOR_CHARS} characters"
    return key, str(decision), note, curator


async def decide(request: Request) -> Response:
    """``POST /api/screening``: store a decision; answers the clip's new state."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    from .guard import client_address, read_json_object
    from .limits import address_key

    refused = _refusal(request)
    if refused is not None:
        return refused
    game = _game(request)
    game.limit("screening decisions", address_key(client_address(request)), None)
    checked = _checked(await read_json_object(request), game)
    if isinstance(checked, str):
        return JSONResponse({"error": checked}, status_code=422)
    key, decision, note, curator = checked

    def write() -> None:
        with game.writing():
            record_decision(game.engine, key, decision, note, curator)

    await run_in_threadpool(write)
    return JSONResponse({"key": key, "decision": decision, "note": note}, status_code=201)


def screening_routes() -> list[BaseRoute]:
    """The page and the API of screening."""
    from starlette.routing import Route

    return [
        Route("/screen", page),
        Route("/api/screening", listing),
        Route("/api/screening", decide, methods=["POST"]),
    ]
