"""What every provider is: the base class, capabilities and errors; the
protocols are :mod:`.openai_compat` (chat completions), :mod:`.gemini`
(Gemini's REST API) and :mod:`.hf_backend` (local transformers models), and
:mod:`.providers` makes one by name.

Each provider turns (model, prompt, optional audio, sampling parameters) into
one HTTP exchange and returns a :class:`Reply`, or raises
:class:`ProviderError` saying whether a retry can help. Keys travel only in
request headers; every error message is scrubbed of the key.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import httpx

from ..exceptions import AglError, ParameterError
from ..remote.ratelimit import DEFAULT_MAX_RESPONSE_BYTES, parse_retry_after
from ..remote.redact import redact
from .audio import PreparedAudio

MB = 1 << 20
MAX_TOKEN_COUNT = 10**9
"""Largest token count accepted in a reply's usage block."""
EXCERPT_CHARS = 200
"""Characters of a malformed body quoted in the error message."""


@dataclass(frozen=True)
class Capabilities:
    """What a provider accepts (defaults from its documentation; all overridable).

    ``max_request_bytes`` bounds the base64 audio inline in one request;
    ``file_api_bytes`` (Gemini) is the largest upload above it.
    """

    protocol: str
    base_url: str
    formats: tuple[str, ...]
    max_seconds: float | None
    max_request_bytes: int
    json_schema: bool
    streaming: bool
    stream_required: bool = False
    file_api_bytes: int | None = None
    audio_tokens_per_second: float = 25.0


CAPABILITIES: dict[str, Capabilities] = {
    "openai": Capabilities(
        "openai",
        "https://api.openai.com/v1",
        ("wav", "mp3"),
        None,
        20 * MB,
        True,
        True,
        audio_tokens_per_second=10.0,
    ),
    "openrouter": Capabilities(
        "openai",
        "https://openrouter.ai/api/v1",
        ("wav", "mp3", "flac"),
        None,
        20 * MB,
        True,
        True,
        audio_tokens_per_second=32.0,
    ),
    "vllm": Capabilities(
        "openai",
        "http://127.0.0.1:8000/v1",
        ("wav", "flac", "mp3"),
        None,
        64 * MB,
        True,
        True,
        audio_tokens_per_second=25.0,
    ),
    "dashscope": Capabilities(
        "openai",
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        ("wav", "mp3"),
        None,
        10 * MB,
        False,
        True,
        stream_required=True,
        audio_tokens_per_second=25.0,
    ),
    "gemini": Capabilities(
        "gemini",
        "https://generativelanguage.googleapis.com",
        ("wav", "flac", "mp3"),
        9.5 * 3600,
        20 * MB,
        True,
        True,
        file_api_bytes=2048 * MB,
        audio_tokens_per_second=32.0,
    ),
    # in-process (:mod:`.hf_backend`): nothing is sent, so nothing is cut to fit
    "transformers": Capabilities(
        "transformers",
        "in-process",
        ("wav",),
        None,
        1 << 40,
        False,
        False,
        audio_tokens_per_second=25.0,
    ),
}
PROVIDERS = tuple(CAPABILITIES)

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
AUTH_STATUS = frozenset({401, 403})

GEOLOCATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "city": {"type": "string"},
        "country": {"type": "string"},
        "continent": {"type": "string"},
        "longitude": {"type": "number"},
        "latitude": {"type": "number"},
    },
    "required": ["reason", "city", "country", "continent", "longitude", "latitude"],
}


class ReplyShapeError(AglError, ValueError):
    """A reply that departs from its provider's documented shape; the
    request turns it into a ``MalformedResponse`` :class:`ProviderError`."""


class ProviderError(AglError):
    """A failed exchange; ``retryable`` says whether the same request may succeed later.

    ``error_type`` names the kind of failure as stored in the result row:
    ``HTTPError``, ``Timeout``, ``TransportError``, ``MalformedResponse``,
    ``ResponseTooLarge`` or ``RateLimited``. ``retry_after`` is the wait the
    server asked for in seconds (``inf`` for an unbounded one) and
    ``retry_after_raw`` the header as sent.
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        error_type: str = "HTTPError",
        retry_after_raw: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.error_type = error_type
        self.retry_after_raw = retry_after_raw

    @property
    def is_auth(self) -> bool:
        return self.status in AUTH_STATUS


@dataclass
class Reply:
    """One provider answer."""

    text: str | None
    finish_reason: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    audio_tokens: int | None = None
    reasoning: str | None = None


class Provider(ABC):
    """Common state: name, base URL, key, capabilities, timeout; subclasses
    implement :meth:`_complete`."""

    def __init__(
        self,
        name: str,
        key: str | None,
        base_url: str | None = None,
        timeout: float = 120.0,
        stream: bool | None = None,
        json_schema: bool = False,
        extra: dict[str, Any] | None = None,
        caps: Capabilities | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if name not in CAPABILITIES:
            raise ParameterError(f"unknown provider {name!r}; allowed: {', '.join(PROVIDERS)}")
        self.name = name
        self.caps = caps or CAPABILITIES[name]
        self.key = key
        self.base_url = (base_url or self.caps.base_url).rstrip("/")
        self.timeout = float(timeout)
        self.stream = self.caps.stream_required if stream is None else bool(stream)
        if self.stream and not self.caps.streaming:
            raise ParameterError(f"provider {name!r} does not stream")
        self.json_schema = bool(json_schema) and self.caps.json_schema
        self.extra = dict(extra or {})
        if not (isinstance(max_response_bytes, int) and max_response_bytes > 0):
            raise ParameterError(
                f"max_response_bytes must be a positive integer, got {max_response_bytes!r}"
            )
        self.max_response_bytes = max_response_bytes

    def _scrub(self, text: str) -> str:
        return redact(text, self.key) or ""

    def _excerpt(self, body: str | bytes) -> str:
        if isinstance(body, bytes):
            body = body[: EXCERPT_CHARS * 4].decode("utf-8", "replace")
        return self._scrub(body[:EXCERPT_CHARS].replace("\n", " "))

    def _malformed(self, what: str, body: str | bytes = "") -> ProviderError:
        return ProviderError(
            f"{self.name}: unexpected response shape ({what}): {self._excerpt(body)!r}",
            retryable=True,
            error_type="MalformedResponse",
        )

    def _too_large(self, size: int, exact: bool) -> ProviderError:
        what = f"{size} bytes" if exact else f"more than {size} bytes"
        return ProviderError(
            f"{self.name}: response body of {what} exceeds the limit of "
            f"{self.max_response_bytes} bytes (--max-response-bytes)",
            retryable=True,  # a gateway's bad answer: tried again, and on resume
            error_type="ResponseTooLarge",
        )

    def _check_length(self, resp: httpx.Response) -> None:
        declared = resp.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self.max_response_bytes:
            raise self._too_large(int(declared), exact=True)

    async def _iter_capped(self, resp: httpx.Response) -> Any:
        """The body's decoded chunks, raising ``ResponseTooLarge`` once their total
        passes the cap (a compressed body is counted after decoding)."""
        self._check_length(resp)
        n = 0
        async for chunk in resp.aiter_bytes():
            n += len(chunk)
            if n > self.max_response_bytes:
                raise self._too_large(self.max_response_bytes, exact=False)
            yield chunk

    async def _read_capped(self, resp: httpx.Response) -> bytes:
        buf = bytearray()
        async for chunk in self._iter_capped(resp):
            buf += chunk
        return bytes(buf)

    async def _request(
        self, client: httpx.AsyncClient, method: str, url: str, **kw: Any
    ) -> tuple[httpx.Response, bytes]:
        """One exchange with the body read under the size cap; HTTP errors raise."""
        async with client.stream(method, url, timeout=self.timeout, **kw) as resp:
            data = await self._read_capped(resp)
        if resp.status_code >= 400:
            raise self._http_error(resp, data.decode("utf-8", "replace"))
        return resp, data

    def _json(self, data: bytes) -> Any:
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise ProviderError(
                f"{self.name}: truncated or malformed response body ({len(data)} bytes): "
                f"{self._excerpt(data)!r}",
                retryable=True,
                error_type="MalformedResponse",
            ) from None

    def _http_error(self, resp: httpx.Response, body: str) -> ProviderError:
        status = resp.status_code
        raw_retry = resp.headers.get("retry-after")
        retry = parse_retry_after(raw_retry)
        if retry is None and '"retryDelay"' in body:
            try:
                for d in json.loads(body).get("error", {}).get("details", []):
                    if "retryDelay" in d:
                        retry = parse_retry_after(d["retryDelay"])
            except (ValueError, AttributeError):
                pass
        snippet = self._excerpt(body)
        return ProviderError(
            f"{self.name} HTTP {status}: {snippet}",
            status=status,
            retryable=status in TRANSIENT_STATUS or status >= 500,
            retry_after=retry,
            retry_after_raw=None if raw_retry is None else self._scrub(raw_retry[:100]),
        )

    async def complete(
        self,
        client: httpx.AsyncClient,
        model: str,
        prompt: str,
        audio: PreparedAudio | None,
        params: dict[str, Any],
    ) -> Reply:
        """Send one request; every failure becomes a :class:`ProviderError`.

        The whole exchange (connect, headers, body, and a Gemini upload) runs
        under one deadline of ``timeout`` seconds on the monotonic clock, so a
        server that drips its body or stalls its headers cannot stretch it.
        """
        try:
            return await asyncio.wait_for(
                self._complete(client, model, prompt, audio, params), self.timeout
            )
        except ProviderError:
            raise
        except (asyncio.TimeoutError, TimeoutError, httpx.TimeoutException) as exc:
            raise ProviderError(
                f"{self.name}: no complete answer within the {self.timeout:g} s deadline "
                f"({type(exc).__name__})",
                retryable=True,
                error_type="Timeout",
            ) from None
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            raise ProviderError(
                f"{self.name}: malformed response ({type(exc).__name__})",
                retryable=True,
                error_type="MalformedResponse",
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"{self.name} transport error: {self._scrub(f'{type(exc).__name__}: {exc}')}",
                retryable=True,
                error_type="TransportError",
            ) from None

    @abstractmethod
    async def _complete(
        self,
        client: httpx.AsyncClient,
        model: str,
        prompt: str,
        audio: PreparedAudio | None,
        params: dict[str, Any],
    ) -> Reply:
        """Send one request and parse the reply (each provider class)."""

    async def _post_json(
        self, client: httpx.AsyncClient, url: str, body: Any, headers: dict[str, str]
    ) -> tuple[Any, bytes]:
        """The decoded JSON answer and its raw bytes (for error excerpts)."""
        _, data = await self._request(client, "POST", url, json=body, headers=headers)
        return self._json(data), data
