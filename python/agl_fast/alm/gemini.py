"""Gemini's REST API: inline audio or the Files API, JSON-schema answers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from . import reply_shape as shape
from .audio import PreparedAudio
from .protocol import GEOLOCATION_SCHEMA, Provider, ProviderError, Reply, ReplyShapeError

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
        info = shape.obj(shape.obj(self._json(data), "upload answer").get("file"), "file")
        deadline = time.monotonic() + self.timeout
        while info.get("state") == "PROCESSING" and time.monotonic() < deadline:
            await asyncio.sleep(self.poll_seconds)
            _, data = await self._request(
                client,
                "GET",
                f"{self.base_url}/v1beta/{shape.opt_str(info.get('name'), 'file name')}",
                headers=self._headers(),
            )
            info = shape.obj(self._json(data), "file")
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
        data = shape.obj(data, "response")
        usage = shape.obj(data.get("usageMetadata"), "usageMetadata")
        audio_tokens = None
        details = usage.get("promptTokensDetails") or []
        if not isinstance(details, list):
            raise ReplyShapeError("promptTokensDetails is not a list")
        for d in details:
            d = shape.entry(d, "promptTokensDetails entry")
            if d.get("modality") == "AUDIO":
                audio_tokens = shape.token_count(d.get("tokenCount"))
        prompt_tokens = shape.token_count(usage.get("promptTokenCount"))
        out_tokens = shape.token_count(usage.get("candidatesTokenCount"))
        if thought_tokens := shape.token_count(usage.get("thoughtsTokenCount")):
            out_tokens = shape.token_count((out_tokens or 0) + thought_tokens)
        cands = data.get("candidates") or []
        if not isinstance(cands, list):
            raise ReplyShapeError("candidates is not a list")
        if not cands:
            feedback = shape.obj(data.get("promptFeedback"), "promptFeedback")
            block = shape.opt_str(feedback.get("blockReason"), "blockReason")
            if block:
                return Reply(None, _GEMINI_BLOCK.get(block, block.lower()), prompt_tokens)
            raise ReplyShapeError("no candidates")
        cand = shape.entry(cands[0], "candidates[0]")
        cparts = shape.obj(cand.get("content"), "content").get("parts") or []
        if not isinstance(cparts, list):
            raise ReplyShapeError("parts is not a list")
        text: list[str] = []
        thoughts: list[str] = []
        for p in cparts:
            p = shape.entry(p, "part")
            (thoughts if p.get("thought") else text).append(
                shape.opt_str(p.get("text"), "part text") or ""
            )
        finish = shape.opt_str(cand.get("finishReason"), "finishReason")
        return Reply(
            text="".join(text),
            finish_reason=finish.lower() if finish else None,
            prompt_tokens=prompt_tokens,
            completion_tokens=out_tokens,
            audio_tokens=audio_tokens,
            reasoning="".join(thoughts) or None,
        )
