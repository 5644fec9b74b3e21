"""Provider protocols: OpenAI-compatible chat completions and Gemini's REST API.

Each provider turns (model, prompt, optional audio, sampling parameters) into
one HTTP exchange and returns a :class:`Reply`, or raises
:class:`ProviderError` saying whether a retry can help. Keys travel only in
request headers; every error message is scrubbed of the key.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import httpx

from ..exceptions import AglError, ParameterError
from .audio import PreparedAudio
from .keys import redact
from .ratelimit import DEFAULT_MAX_RESPONSE_BYTES, parse_retry_after

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


def _count(v: Any) -> int | None:
    """A token count: None, or an integer in ``[0, MAX_TOKEN_COUNT]``; else ValueError."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKEN_COUNT:
        raise ReplyShapeError(f"token count {str(v)[:40]!r} is not an integer in [0, 1e9]")
    return v


def _opt_str(v: Any, what: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise ReplyShapeError(f"{what} is a {type(v).__name__}, not a string or null")


def _obj(v: Any, what: str) -> dict[str, Any]:
    """``v`` if it is a JSON object, ``{}`` if null/absent; else ValueError."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ReplyShapeError(f"{what} is a {type(v).__name__}, not an object")
    return v


def _entry(v: Any, what: str) -> dict[str, Any]:
    """A list entry that must be a JSON object (null included in what is refused)."""
    if not isinstance(v, dict):
        raise ReplyShapeError(f"{what} is a {type(v).__name__}, not an object")
    return v


def _content(v: Any) -> str | None:
    """A message content: a string, null, or a list of text parts (joined)."""
    if isinstance(v, list):
        out = []
        for p in v:
            p = _entry(p, "content part")
            out.append(_opt_str(p.get("text"), "content part text") or "")
        return "".join(out)
    return _opt_str(v, "content")


def _openai_usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    u = _obj(usage, "usage")
    details = _obj(u.get("prompt_tokens_details"), "usage.prompt_tokens_details")
    return (
        _count(u.get("prompt_tokens")),
        _count(u.get("completion_tokens")),
        _count(details.get("audio_tokens")),
    )


class OpenAICompatible(Provider):
    """``POST {base}/chat/completions`` with an ``input_audio`` part (base64)."""

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def build_body(
        self, model: str, prompt: str, audio: PreparedAudio | None, params: dict[str, Any]
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        if audio is not None:
            data = audio.b64()
            if self.name == "dashscope":
                data = "data:;base64," + data
            content.append(
                {"type": "input_audio", "input_audio": {"data": data, "format": audio.format}}
            )
        body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": content}]}
        for k in ("temperature", "top_p", "seed"):
            if params.get(k) is not None:
                body[k] = params[k]
        if params.get("max_tokens") is not None:
            body["max_tokens"] = params["max_tokens"]
        if self.name in ("openai", "dashscope"):
            body["modalities"] = ["text"]
        if self.json_schema and audio is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "geolocation", "schema": GEOLOCATION_SCHEMA},
            }
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra)
        return body

    async def _complete(
        self,
        client: httpx.AsyncClient,
        model: str,
        prompt: str,
        audio: PreparedAudio | None,
        params: dict[str, Any],
    ) -> Reply:
        url = f"{self.base_url}/chat/completions"
        body = self.build_body(model, prompt, audio, params)
        if self.stream:
            return await self._stream(client, url, body)
        data, raw = await self._post_json(client, url, body, self._headers())
        try:
            return self.parse_reply(data)
        except ValueError as exc:
            raise self._malformed(str(exc), raw) from None

    @staticmethod
    def parse_reply(data: Any) -> Reply:
        """A :class:`Reply` from a chat-completion object; ValueError names what is wrong."""
        data = _obj(data, "response")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ReplyShapeError("no choices")
        choice = _entry(choices[0], "choices[0]")
        msg = _entry(choice.get("message"), "message")
        pt, ct, at = _openai_usage(data.get("usage"))
        reasoning = _opt_str(msg.get("reasoning_content"), "reasoning_content") or _opt_str(
            msg.get("reasoning"), "reasoning"
        )
        return Reply(
            text=_content(msg.get("content")),
            finish_reason=_opt_str(choice.get("finish_reason"), "finish_reason"),
            prompt_tokens=pt,
            completion_tokens=ct,
            audio_tokens=at,
            reasoning=reasoning or None,
        )

    async def _stream(self, client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Reply:
        parts: list[str] = []
        thoughts: list[str] = []
        finish: str | None = None
        usage: tuple[int | None, int | None, int | None] = (None, None, None)
        done = False
        async with client.stream(
            "POST", url, json=body, headers=self._headers(), timeout=self.timeout
        ) as resp:
            if resp.status_code >= 400:
                raise self._http_error(
                    resp, (await self._read_capped(resp)).decode("utf-8", "replace")
                )
            pending = b""
            async for block in self._iter_capped(resp):
                pending += block
                *lines, pending = pending.split(b"\n")
                for raw_line in lines:
                    line = raw_line.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                    try:
                        chunk = _obj(json.loads(payload), "stream chunk")
                        if chunk.get("usage"):
                            usage = _openai_usage(chunk["usage"])
                        chs = chunk.get("choices") or []
                        if not isinstance(chs, list):
                            raise ReplyShapeError("stream choices is not a list")
                        for ch in chs:
                            ch = _entry(ch, "stream choice")
                            delta = _obj(ch.get("delta"), "delta")
                            if c := _content(delta.get("content")):
                                parts.append(c)
                            if r := _opt_str(delta.get("reasoning_content"), "reasoning"):
                                thoughts.append(r)
                            if f := _opt_str(ch.get("finish_reason"), "finish_reason"):
                                finish = f
                    except (ValueError, RecursionError) as exc:
                        raise self._malformed(f"stream chunk: {exc}", payload) from None
                if done:
                    break
        if not done and finish is None:
            raise ProviderError(
                f"{self.name}: stream ended early", retryable=True, error_type="MalformedResponse"
            )
        return Reply(
            text="".join(parts),
            finish_reason=finish,
            prompt_tokens=usage[0],
            completion_tokens=usage[1],
            audio_tokens=usage[2],
            reasoning="".join(thoughts) or None,
        )


_GEMINI_BLOCK = {"OTHER": "blocked", "BLOCKLIST": "blocklist", "SAFETY": "safety"}


class Gemini(Provider):
    """``POST {base}/v1beta/models/{model}:generateContent``; audio inline below
    ``max_request_bytes``, else uploaded through the File API first."""

    poll_seconds = 1.0

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self.key} if self.key else {}

    async def upload(self, client: httpx.AsyncClient, audio: PreparedAudio) -> dict[str, str]:
        """Resumable upload (start, then upload+finalize); waits until the file is ACTIVE."""
        start, _ = await self._request(
            client,
            "POST",
            f"{self.base_url}/upload/v1beta/files",
            json={"file": {"display_name": "agl-fast-clip"}},
            headers={
                **self._headers(),
                "X-Goog-Upload-Protocol": "resumable",
                "X-Goog-Upload-Command": "start",
                "X-Goog-Upload-Header-Content-Length": str(len(audio.data)),
                "X-Goog-Upload-Header-Content-Type": audio.mime,
            },
        )
        upload_url = start.headers.get("x-goog-upload-url")
        if not upload_url:
            raise self._malformed("no upload URL")
        _, data = await self._request(
            client,
            "POST",
            upload_url,
            content=audio.data,
            headers={
                **self._headers(),
                "X-Goog-Upload-Offset": "0",
                "X-Goog-Upload-Command": "upload, finalize",
            },
        )
        info = _obj(_obj(self._json(data), "upload answer").get("file"), "file")
        deadline = time.monotonic() + self.timeout
        while info.get("state") == "PROCESSING" and time.monotonic() < deadline:
            await asyncio.sleep(self.poll_seconds)
            _, data = await self._request(
                client,
                "GET",
                f"{self.base_url}/v1beta/{_opt_str(info.get('name'), 'file name')}",
                headers=self._headers(),
            )
            info = _obj(self._json(data), "file")
        uri = info.get("uri")
        if info.get("state") not in (None, "ACTIVE") or not isinstance(uri, str):
            raise ProviderError(
                f"{self.name}: uploaded file not usable ({str(info.get('state'))[:40]})"
            )
        mime = info.get("mimeType")
        return {"mime_type": mime if isinstance(mime, str) else audio.mime, "file_uri": uri}

    async def _complete(
        self,
        client: httpx.AsyncClient,
        model: str,
        prompt: str,
        audio: PreparedAudio | None,
        params: dict[str, Any],
    ) -> Reply:
        parts: list[dict[str, Any]] = [{"text": prompt}]
        if audio is not None:
            b64 = audio.b64()
            if len(b64) + len(prompt) < self.caps.max_request_bytes:
                parts.append({"inline_data": {"mime_type": audio.mime, "data": b64}})
            else:
                parts.append({"file_data": await self.upload(client, audio)})
        gen: dict[str, Any] = {}
        for k, g in (
            ("temperature", "temperature"),
            ("top_p", "topP"),
            ("seed", "seed"),
            ("max_tokens", "maxOutputTokens"),
        ):
            if params.get(k) is not None:
                gen[g] = params[k]
        if self.json_schema and audio is not None:
            gen["responseMimeType"] = "application/json"
            gen["responseSchema"] = GEOLOCATION_SCHEMA
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": parts}]}
        if gen:
            body["generationConfig"] = gen
        body.update(self.extra)
        mid = model.removeprefix("models/")
        data, raw = await self._post_json(
            client, f"{self.base_url}/v1beta/models/{mid}:generateContent", body, self._headers()
        )
        try:
            return self.parse_reply(data)
        except ValueError as exc:
            raise self._malformed(str(exc), raw) from None

    @staticmethod
    def parse_reply(data: Any) -> Reply:
        """A :class:`Reply` from a ``generateContent`` answer; ValueError names what is wrong."""
        data = _obj(data, "response")
        usage = _obj(data.get("usageMetadata"), "usageMetadata")
        audio_tokens = None
        details = usage.get("promptTokensDetails") or []
        if not isinstance(details, list):
            raise ReplyShapeError("promptTokensDetails is not a list")
        for d in details:
            d = _entry(d, "promptTokensDetails entry")
            if d.get("modality") == "AUDIO":
                audio_tokens = _count(d.get("tokenCount"))
        prompt_tokens = _count(usage.get("promptTokenCount"))
        out_tokens = _count(usage.get("candidatesTokenCount"))
        if thought_tokens := _count(usage.get("thoughtsTokenCount")):
            out_tokens = _count((out_tokens or 0) + thought_tokens)
        cands = data.get("candidates") or []
        if not isinstance(cands, list):
            raise ReplyShapeError("candidates is not a list")
        if not cands:
            feedback = _obj(data.get("promptFeedback"), "promptFeedback")
            block = _opt_str(feedback.get("blockReason"), "blockReason")
            if block:
                return Reply(None, _GEMINI_BLOCK.get(block, block.lower()), prompt_tokens)
            raise ReplyShapeError("no candidates")
        cand = _entry(cands[0], "candidates[0]")
        cparts = _obj(cand.get("content"), "content").get("parts") or []
        if not isinstance(cparts, list):
            raise ReplyShapeError("parts is not a list")
        text: list[str] = []
        thoughts: list[str] = []
        for p in cparts:
            p = _entry(p, "part")
            (thoughts if p.get("thought") else text).append(
                _opt_str(p.get("text"), "part text") or ""
            )
        finish = _opt_str(cand.get("finishReason"), "finishReason")
        return Reply(
            text="".join(text),
            finish_reason=finish.lower() if finish else None,
            prompt_tokens=prompt_tokens,
            completion_tokens=out_tokens,
            audio_tokens=audio_tokens,
            reasoning="".join(thoughts) or None,
        )


def make_provider(name: str, key: str | None, **kw: Any) -> Provider:
    """The provider object for ``name`` (see :data:`CAPABILITIES`)."""
    if name not in CAPABILITIES:
        raise ParameterError(f"unknown provider {name!r}; allowed: {', '.join(PROVIDERS)}")
    cls = Gemini if CAPABILITIES[name].protocol == "gemini" else OpenAICompatible
    return cls(name, key, **kw)
