"""The game server's defences against hostile clients, applied to requests.

Request bodies are bounded before they are read and JSON nesting before it
is parsed; the client address comes from ``X-Forwarded-For`` only when the
direct peer is a configured proxy; token buckets limit requests per address
(here) and rounds and guesses per player and per address (in the handlers).
The limits themselves are declared in :mod:`agl_fast.game.limits`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .limits import (
    MAX_BODY,
    MAX_JSON_DEPTH,
    REQUESTS_PER_ADDRESS,
    ClientAddress,
    Limit,
    TokenBuckets,
    address_key,
    json_depth,
)

_STATE_KEY = "agl_client"


def too_many(what: str, limit: Limit, wait_s: float) -> HTTPException:
    """The 429 refusal of a spent bucket, with ``Retry-After`` in whole seconds."""
    return HTTPException(
        429,
        f"too many {what}: at most {limit.per_minute:g} a minute after a burst of {limit.burst}",
        headers={"Retry-After": str(max(1, math.ceil(wait_s)))},
    )


def client_address(request: Request) -> str:
    """The client address :class:`Guard` resolved for ``request`` (the peer without it)."""
    state = request.scope.get("state") or {}
    found = state.get(_STATE_KEY)
    return str(found) if found is not None else str((request.client or ("unknown", 0))[0])


def _refuse(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def too_large(max_body: int) -> HTTPException:
    """The 413 refusal of a body over ``max_body`` bytes; the connection is closed unread."""
    return HTTPException(
        413, f"request body larger than {max_body} bytes", headers={"Connection": "close"}
    )


class Guard:
    """ASGI middleware in front of the game: client address, request rate, body size.

    Resolves the client address once (see :class:`ClientAddress`) for the
    handlers, refuses a client over its request rate with 429, and a request
    whose ``Content-Length`` is over ``max_body`` with 413 before a byte of
    the body is read (chunked bodies are capped by :func:`read_json_object`).
    """

    def __init__(
        self,
        app: ASGIApp,
        requests: Limit = REQUESTS_PER_ADDRESS,
        trusted_proxies: Iterable[str] = (),
        max_body: int = MAX_BODY,
    ) -> None:
        self.app, self.max_body = app, max_body
        self.limit = requests
        self.buckets = TokenBuckets(requests)
        self.client = ClientAddress(trusted_proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        addr = self.client(scope)
        scope.setdefault("state", {})[_STATE_KEY] = addr
        refusal: JSONResponse | None = None
        wait = self.buckets.take(address_key(addr))
        if wait > 0.0:
            e = too_many("requests", self.limit, wait)
            refusal = _refuse(429, e.detail, e.headers)
        else:
            lengths = [v for k, v in scope.get("headers", []) if k == b"content-length"]
            if lengths:
                try:
                    n = max(int(v) for v in lengths)
                except ValueError:
                    n = -1
                if n < 0:
                    refusal = _refuse(400, "Content-Length must be a non-negative integer")
                elif n > self.max_body:
                    e = too_large(self.max_body)
                    refusal = _refuse(413, e.detail, e.headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def read_json_object(
    request: Request, max_body: int = MAX_BODY, max_depth: int = MAX_JSON_DEPTH
) -> dict[str, Any]:
    """The request's body as a JSON object, read at most ``max_body`` bytes far.

    An empty body is ``{}``. Raises ``HTTPException`` 413 past ``max_body``
    (chunked bodies included; the rest is never read), 400 for a body that
    is not UTF-8, nests deeper than ``max_depth`` (checked before parsing),
    is not JSON or is not an object.
    """
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise too_large(max_body)
            chunks.append(chunk)
    except ClientDisconnect:
        raise HTTPException(400, "the client went away before the body ended") from None
    try:
        text = b"".join(chunks).decode("utf-8") or "{}"
    except UnicodeDecodeError:
        raise HTTPException(400, "body must be JSON in UTF-8") from None
    if json_depth(text, max_depth) > max_depth:
        raise HTTPException(400, f"JSON nested deeper than {max_depth} levels")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise HTTPException(400, "body is not valid JSON") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "body must be a JSON object")
    return data
