"""Loopback model servers of ``agl-fast benchmark demo``: a reference model and
judges that answer the OpenAI-compatible chat protocol deterministically.

Nothing leaves the machine: each server listens on ``127.0.0.1`` on a free
port, in a thread of the demo's own process.

* The **reference model** knows the demo pool. It recognises a clip by the
  SHA-256 of the audio bytes it is sent and answers in the AGL1K JSON layout:
  the clip's own place when speech and music make up at least half of the
  clip (:data:`CLEAR_SHARE`), else the antipode of the truth. Its ``reason``
  says how sure it is and lists the group fractions it "heard".
* A **judge** reads the categories and the reasoning text of the contribution
  prompt and scores each category ``weight x fraction x scale``: the weights
  of :data:`SURE_WEIGHTS` for a sure answer, :data:`UNSURE_WEIGHTS` for an
  unsure one. So the localizability fit should recover those weights exactly
  (times the judges' mean scale), which is what the demo shows.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "CLEAR_SHARE",
    "SURE_WEIGHTS",
    "UNSURE_WEIGHTS",
    "LoopbackModel",
    "judge_answer",
    "reference_answer",
]

log = logging.getLogger("agl_fast.benchmark")

#: Speech plus music share from which the reference model places a clip right.
CLEAR_SHARE = 0.5
#: Judged contribution per unit of time fraction, for a sure answer.
SURE_WEIGHTS: dict[str, float] = {
    "human_sounds": 0.9,
    "music": 0.7,
    "sounds_of_things": 0.5,
    "environment_and_background": 0.4,
    "natural_sounds": 0.1,
    "animal": 0.1,
}
#: Judged contribution per unit of time fraction, for an unsure answer.
UNSURE_WEIGHTS: dict[str, float] = {
    "human_sounds": 0.1,
    "music": 0.1,
    "sounds_of_things": 0.2,
    "environment_and_background": 0.2,
    "natural_sounds": 0.8,
    "animal": 0.7,
}
#: Largest request body read, in bytes.
MAX_REQUEST_BYTES = 16 << 20
_SURE = "Sure"
_HEARD = re.compile(r"([a-z_]+)=([0-9]+(?:\.[0-9]+)?)")


def reference_answer(row: Mapping[str, Any], groups: tuple[str, ...]) -> str:
    """The reference model's JSON answer for a pool row (see the module docs)."""
    frac = {g: float(row.get(g) or 0.0) for g in groups}
    heard = ", ".join(f"{g}={frac[g]:.2f}" for g in groups if frac[g] > 0)
    lat, lon = float(row["latitude"]), float(row["longitude"])
    if frac.get("human_sounds", 0.0) + frac.get("music", 0.0) >= CLEAR_SHARE:
        reason = f"{_SURE}: the voices and music place it. Heard: {heard}."
        place = (row["city"], row["country"], row["continent"], lat, lon)
    else:
        reason = f"Unsure: no voice to go by. Heard: {heard}."
        far = (-lat, lon - 180.0 if lon > 0 else lon + 180.0)
        place = ("unknown", "unknown", "unknown", *far)
    city, country, continent, la, lo = place
    return json.dumps(
        {
            "reason": reason,
            "city": city,
            "country": country,
            "continent": continent,
            "latitude": round(la, 4),
            "longitude": round(lo, 4),
        }
    )


def judge_answer(prompt: str, scale: float) -> str:
    """A judge's JSON scores for a contribution prompt (see the module docs)."""
    head, _, reasoning = prompt.partition("Reasoning text:")
    listed = [ln[2:].strip() for ln in head.splitlines() if ln.startswith("- ")]
    weights = SURE_WEIGHTS if reasoning.strip().startswith(_SURE) else UNSURE_WEIGHTS
    heard = {m.group(1): float(m.group(2)) for m in _HEARD.finditer(reasoning)}
    scores = {
        c: round(min(1.0, weights.get(c, 0.0) * heard.get(c, 0.0) * scale), 6) for c in listed
    }
    return json.dumps(scores)


def _parts(body: dict[str, Any]) -> tuple[str, bytes | None]:
    """The text and the audio bytes (None when absent) of a chat request."""
    text, audio = "", None
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            text += content
            continue
        for part in content or []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                text += str(part.get("text", ""))
            elif part.get("type") == "input_audio":
                data = (part.get("input_audio") or {}).get("data", "")
                audio = base64.b64decode(data, validate=False)
    return text, audio


class LoopbackModel:
    """An OpenAI-compatible chat server on ``127.0.0.1`` answering with ``answer``.

    ``answer(text, audio_bytes_or_None) -> str`` gives the assistant's text.
    Use as a context manager; :attr:`base_url` ends with ``/v1``.
    """

    def __init__(self, name: str, answer: Callable[[str, bytes | None], str]) -> None:
        self.name, self.answer = name, answer
        self.requests = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> LoopbackModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        text, audio = _parts(body)
        with self._lock:
            self.requests += 1
        content = self.answer(text, audio)
        return {
            "id": f"{self.name}-{self.requests}",
            "object": "chat.completion",
            "model": str(body.get("model", self.name)),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": len(text) // 4 + 1, "completion_tokens": len(content) // 4},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s: " + format, model.name, *args)

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    n = int(self.headers.get("Content-Length", "0"))
                except ValueError:
                    n = -1
                if not 0 <= n <= MAX_REQUEST_BYTES:
                    self._send(413, {"error": {"message": "request body too large"}})
                    return
                try:
                    body = json.loads(self.rfile.read(n).decode("utf-8"))
                except ValueError as exc:
                    self._send(400, {"error": {"message": f"not a JSON object: {exc}"}})
                    return
                if not isinstance(body, dict):
                    self._send(400, {"error": {"message": "not a JSON object"}})
                    return
                try:
                    reply = model._reply(body)
                except Exception as exc:  # a bug here must answer, not drop the connection
                    log.error("%s: request failed", model.name, exc_info=exc)
                    self._send(500, {"error": {"message": "internal error"}})
                    return
                self._send(200, reply)

        return Handler


def audio_digest(data: bytes) -> str:
    """The SHA-256 by which the reference model recognises a clip's audio."""
    return hashlib.sha256(data).hexdigest()
