"""OpenAI-compatible chat completions (OpenAI, OpenRouter, vLLM/SGLang,
DashScope) with an ``input_audio`` part, and the same servers' text
embeddings (:class:`OpenAIEmbeddings`): one request path, one set of
reply-shape checks."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

from . import reply_shape as shape
from .audio import PreparedAudio
from .protocol import GEOLOCATION_SCHEMA, Provider, ProviderError, Reply, ReplyShapeError

#: Largest embedding (values) accepted from a server.
MAX_EMBEDDING_DIMENSIONS = 65536


class OpenAICompatible(Provider):
    """``POST {base}/chat/completions`` with an ``input_audio`` part (base64)."""

    #: The endpoint under the base URL.
    endpoint = "chat/completions"

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
        url = f"{self.base_url}/{self.endpoint}"
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
        data = shape.obj(data, "response")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ReplyShapeError("no choices")
        choice = shape.entry(choices[0], "choices[0]")
        msg = shape.entry(choice.get("message"), "message")
        pt, ct, at = shape.openai_usage(data.get("usage"))
        reasoning = shape.opt_str(
            msg.get("reasoning_content"), "reasoning_content"
        ) or shape.opt_str(msg.get("reasoning"), "reasoning")
        return Reply(
            text=shape.content(msg.get("content")),
            finish_reason=shape.opt_str(choice.get("finish_reason"), "finish_reason"),
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
                        chunk = shape.obj(json.loads(payload), "stream chunk")
                        if chunk.get("usage"):
                            usage = shape.openai_usage(chunk["usage"])
                        chs = chunk.get("choices") or []
                        if not isinstance(chs, list):
                            raise ReplyShapeError("stream choices is not a list")
                        for ch in chs:
                            ch = shape.entry(ch, "stream choice")
                            delta = shape.obj(ch.get("delta"), "delta")
                            if c := shape.content(delta.get("content")):
                                parts.append(c)
                            if r := shape.opt_str(delta.get("reasoning_content"), "reasoning"):
                                thoughts.append(r)
                            if f := shape.opt_str(ch.get("finish_reason"), "finish_reason"):
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


class OpenAIEmbeddings(OpenAICompatible):
    """``POST {base}/embeddings`` (``{"model", "input"}``) through the chat
    provider's request path (size caps, typed HTTP errors, key scrubbing);
    the reply's text is the embedding as a JSON list. Never streamed."""

    endpoint = "embeddings"

    def __init__(self, name: str, key: str | None, **kw: Any) -> None:
        super().__init__(name, key, **{**kw, "stream": False})

    def build_body(
        self, model: str, prompt: str, audio: PreparedAudio | None, params: dict[str, Any]
    ) -> dict[str, Any]:
        return {"model": model, "input": prompt}

    @staticmethod
    def parse_reply(data: Any) -> Reply:
        """A :class:`Reply` (text: the first embedding as a JSON list) from an
        ``/embeddings`` object; ValueError names what is wrong."""
        data = shape.obj(data, "response")
        items = data.get("data")
        if not isinstance(items, list) or not items:
            raise ReplyShapeError("no data list")
        vec = shape.entry(items[0], "data[0]").get("embedding")
        if not isinstance(vec, list) or not 0 < len(vec) <= MAX_EMBEDDING_DIMENSIONS:
            raise ReplyShapeError(
                f"embedding is not a list of 1 to {MAX_EMBEDDING_DIMENSIONS} numbers"
            )
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vec):
            raise ReplyShapeError("embedding holds a value that is not a number")
        out = [float(x) for x in vec]
        if not all(math.isfinite(x) for x in out):
            raise ReplyShapeError("embedding holds a value that is not finite")
        pt, _, _ = shape.openai_usage(data.get("usage"))
        return Reply(text=json.dumps(out), finish_reason="stop", prompt_tokens=pt)
