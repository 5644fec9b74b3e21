"""A loopback server speaking the OpenAI-compatible chat and Gemini REST
protocols, with scripted faults and server-side accounting.

It decodes the audio it receives (soundfile) and names the clip by its
number of samples, so answers and faults can be scripted per clip.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import soundfile as sf


@dataclass
class Record:
    """One request as the server saw it."""

    path: str
    clip: str | None
    t_start: float
    t_end: float = 0.0
    status: int = 0
    delivered: bool = False
    fault: str | None = None
    body: dict[str, Any] = field(default_factory=dict)


def answer_json(city: str, country: str, continent: str, lat: float, lon: float) -> str:
    return json.dumps(
        {
            "reason": f"Sounds typical of {city}.",
            "city": city,
            "country": country,
            "continent": continent,
            "longitude": lon,
            "latitude": lat,
        }
    )


def _ok(**kw: Any) -> dict[str, Any]:
    msg = {"role": "assistant", "content": answer_json("Paris", "France", "Europe", 48.85, 2.35)}
    choice: dict[str, Any] = {"index": 0, "message": msg, "finish_reason": "stop"}
    body: dict[str, Any] = {"choices": [choice], "usage": {"prompt_tokens": 10,
                                                           "completion_tokens": 5}}  # fmt: skip
    body.update(kw)
    return body


#: Malformed 200 answers of the chat-completion protocol: name -> (body, content type).
BAD_BODIES: dict[str, tuple[bytes, str]] = {
    name: (json.dumps(obj).encode() if not isinstance(obj, bytes) else obj, ctype)
    for name, obj, ctype in [
        ("choices_str", {"choices": ["x"]}, "application/json"),
        ("message_str", {"choices": [{"message": "str"}]}, "application/json"),
        ("message_json_str", {"choices": [{"message": json.dumps(_ok()["choices"][0]["message"])}]},
         "application/json"),
        ("body_json_str", json.dumps(json.dumps(_ok())).encode(), "application/json"),
        ("content_object", {"choices": [{"message": {"content": {"city": "Paris"}}}]},
         "application/json"),
        ("choices_null", {"choices": [None]}, "application/json"),
        ("choices_empty", {"choices": []}, "application/json"),
        ("finish_int", {"choices": [{"message": {"content": None}, "finish_reason": 7}]},
         "application/json"),
        ("finish_list", _ok(choices=[{"message": {"content": "x"}, "finish_reason": ["stop"]}]),
         "application/json"),
        ("usage_str_neg", _ok(usage={"prompt_tokens": "ten", "completion_tokens": -5}),
         "application/json"),
        ("usage_1e308", _ok(usage={"prompt_tokens": 1e308, "completion_tokens": 1}),
         "application/json"),
        ("usage_bigint", _ok(usage={"prompt_tokens": 10**30}), "application/json"),
        ("usage_list", _ok(usage=[1, 2]), "application/json"),
        ("not_json", b"this is not JSON {", "application/json"),
        ("json_array", b"[1, 2, 3]", "application/json"),
        ("empty", b"", "application/json"),
        ("html", b"<html><body>502 Bad Gateway</body></html>", "text/html"),
        ("deep", b"[" * 100_000 + b"]" * 100_000, "application/json"),
    ]
}  # fmt: skip

#: Malformed 200 answers of Gemini's ``generateContent``.
BAD_GEMINI: dict[str, tuple[bytes, str]] = {
    name: (json.dumps(obj).encode(), "application/json")
    for name, obj in [
        ("gem_candidates_str", {"candidates": ["x"]}),
        ("gem_parts_str", {"candidates": [{"content": {"parts": "x"}}]}),
        ("gem_part_null", {"candidates": [{"content": {"parts": [None]}}]}),
        ("gem_finish_int", {"candidates": [{"content": {"parts": [{"text": "x"}]},
                                            "finishReason": 7}]}),
        ("gem_usage_1e308", {"candidates": [{"content": {"parts": [{"text": "x"}]}}],
                             "usageMetadata": {"promptTokenCount": 1e308}}),
        ("gem_usage_str", {"candidates": [{"content": {"parts": [{"text": "x"}]}}],
                           "usageMetadata": {"candidatesTokenCount": "ten"}}),
        ("gem_block_int", {"promptFeedback": {"blockReason": 7}}),
    ]
}  # fmt: skip


class FakeALM:
    """``faults``: per clip name (or ``"*"`` for any), a list of faults used in order:
    ``429``, ``429:SECONDS`` (with Retry-After), ``500``, ``503``, ``400``, ``401``,
    ``timeout``, ``reset``, ``truncated``, ``fenced``, ``malformed``, ``safety``,
    ``prompt_block``, ``stream_cut``, ``echo_key:STATUS`` (an error body quoting the key).

    Hostile faults: ``bad:NAME`` (a malformed 200 body of :data:`BAD_BODIES` or
    :data:`BAD_GEMINI`), ``huge:BYTES`` (a 200 body of that size, with its
    Content-Length), ``huge_chunked:BYTES`` (the same, chunked, no length),
    ``drip:SECONDS`` (headers, then one body byte every SECONDS), ``stall:SECONDS``
    (nothing at all for SECONDS, then a reset), ``echo_ok:VARIANT`` (a 200 answer
    quoting the key: ``upper``, ``lower``, ``swap``, ``spaced``). ``always``, if
    set, is the fault of every request that has no scripted one."""

    def __init__(
        self,
        key: str,
        clips: dict[int, str] | None = None,
        answers: dict[str, str] | None = None,
        faults: dict[str, list[str]] | None = None,
        delay: float = 0.0,
        usage: tuple[int, int] = (1000, 100),
        timeout_sleep: float = 3.0,
    ) -> None:
        self.key = key
        self.clips = clips or {}
        self.answers = answers or {}
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.delay = delay
        self.usage = usage
        self.timeout_sleep = timeout_sleep
        self.records: list[Record] = []
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        self.hold_after: int | None = None
        self.release = threading.Event()
        self.files: dict[str, dict[str, Any]] = {}
        self.uploads: dict[str, dict[str, Any]] = {}
        self.answer_fn: Callable[[str | None, dict[str, Any]], str] | None = None
        self.always: str | None = None
        self.stopping = threading.Event()

    # -- bookkeeping -----------------------------------------------------
    def delivered(self, clip: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.records if r.delivered and (clip is None or r.clip == clip))

    def requests(self, clip: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.records if clip is None or r.clip == clip)

    def _fault(self, clip: str | None) -> str | None:
        with self.lock:
            for k in (clip, "*"):
                if k is not None and self.faults.get(k):
                    return self.faults[k].pop(0)
        return self.always

    def clip_of(self, audio: bytes) -> str | None:
        try:
            n = sf.info(io.BytesIO(audio)).frames
        except Exception:
            return None
        return self.clips.get(n, f"frames-{n}")

    def text_for(self, clip: str | None, body: dict[str, Any]) -> str:
        if self.answer_fn is not None:
            return self.answer_fn(clip, body)
        return self.answers.get(clip or "", answer_json("Paris", "France", "Europe", 48.85, 2.35))

    # -- lifecycle -------------------------------------------------------
    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake.handle(self, "POST")

            def do_GET(self) -> None:
                fake.handle(self, "GET")

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # resets and held requests are scripted faults, not server bugs

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.stopping.set()
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- protocol --------------------------------------------------------
    def _send(
        self, h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict | None = None
    ) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        path = h.path
        if path.startswith("/upload/"):
            return self._upload(h, path, raw)
        if method == "GET" and "/files/" in path:
            return self._file_get(h, path)
        body = json.loads(raw) if raw else {}
        gemini = ":generateContent" in path
        authed = (
            h.headers.get("x-goog-api-key") == self.key
            if gemini
            else h.headers.get("Authorization") == f"Bearer {self.key}"
        )
        audio, _text_prompt = self._audio(body, gemini)
        clip = self.clip_of(audio) if audio else body.get("_clip")
        rec = Record(path=path, clip=clip, t_start=time.monotonic(), body=body)
        with self.lock:
            self.records.append(rec)
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            answered = sum(1 for r in self.records if r.delivered)
            hold = self.hold_after is not None and answered >= self.hold_after
        try:
            if hold:
                rec.fault = "held"
                self.release.wait(30)
                return self._reset(h)
            if self.delay:
                time.sleep(self.delay)
            if not authed:
                rec.status = 401
                given = h.headers.get("x-goog-api-key") or h.headers.get("Authorization", "")
                return self._send(h, 401, {"error": {"message": f"Incorrect API key: {given}"}})
            fault = self._fault(clip)
            rec.fault = fault
            if fault and self._apply_fault(h, rec, fault):
                return
            text = self.text_for(clip, body)
            finish = "stop"
            if fault == "fenced":
                text = "Here you go:\n```json\n" + text + "\n```"
            elif fault == "malformed":
                text = "I believe this is somewhere in Europe, maybe near a coast."
            elif fault == "safety":
                text, finish = "", ("SAFETY" if gemini else "content_filter")
            if gemini:
                self._gemini(h, rec, text, finish, fault)
            elif body.get("stream"):
                self._stream(h, rec, text, finish, cut=fault == "stream_cut")
            else:
                self._openai(h, rec, text, finish)
        except (BrokenPipeError, ConnectionResetError):
            rec.delivered = False
        finally:
            rec.t_end = time.monotonic()
            with self.lock:
                self.inflight -= 1

    def _audio(self, body: dict[str, Any], gemini: bool) -> tuple[bytes | None, str]:
        try:
            if gemini:
                for p in body["contents"][0]["parts"]:
                    if "inline_data" in p:
                        return base64.b64decode(p["inline_data"]["data"]), ""
                    if "file_data" in p:
                        fid = p["file_data"]["file_uri"].rsplit("/", 1)[-1]
                        return self.files[fid]["data"], ""
                return None, ""
            for part in body["messages"][0]["content"]:
                if part.get("type") == "input_audio":
                    d = part["input_audio"]["data"]
                    return base64.b64decode(d.split(",", 1)[-1]), ""
        except (KeyError, IndexError, TypeError):
            pass
        return None, ""

    def _reset(self, h: BaseHTTPRequestHandler) -> None:
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        h.close_connection = True
        h.connection.close()

    def _apply_fault(self, h: BaseHTTPRequestHandler, rec: Record, fault: str) -> bool:
        kind, _, arg = fault.partition(":")
        if kind in ("429", "500", "503", "400", "401"):
            rec.status = int(kind)
            headers = {"Retry-After": arg} if arg else {}
            self._send(h, rec.status, {"error": {"message": f"fault {kind}"}}, headers)
            return True
        if kind == "echo_key":
            rec.status = int(arg)
            self._send(h, rec.status, {"error": {"message": f"bad request from key {self.key}"}})
            return True
        if kind == "timeout":
            time.sleep(self.timeout_sleep)
            self._reset(h)
            return True
        if kind == "reset":
            self._reset(h)
            return True
        if kind == "truncated":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "4000")
            h.end_headers()
            h.wfile.write(b'{"choices": [{"message": {"content": "{\\"city')
            h.wfile.flush()
            self._reset(h)
            return True
        if kind == "bad":
            data, ctype = {**BAD_BODIES, **BAD_GEMINI}[arg]
            rec.status = 200
            h.send_response(200)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
            rec.delivered = True
            return True
        if kind in ("huge", "huge_chunked"):
            rec.status = 200
            size = int(arg)
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            if kind == "huge":
                h.send_header("Content-Length", str(size))
            else:
                h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            block = b'{"choices": [{"message": {"content": "' + b"a" * (1 << 20)
            sent = 0
            while sent < size and not self.stopping.is_set():
                piece = block[: size - sent]
                if kind == "huge":
                    h.wfile.write(piece)
                else:
                    h.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                sent += len(piece)
            if kind == "huge_chunked":
                h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
            rec.delivered = True
            return True
        if kind == "drip":
            rec.status = 200
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "100000")
            h.end_headers()
            h.wfile.flush()
            for _ in range(200):  # stops when the client hangs up (broken pipe)
                h.wfile.write(b" ")
                h.wfile.flush()
                if self.stopping.wait(float(arg)):
                    break
            return True
        if kind == "stall":
            self.stopping.wait(float(arg))
            self._reset(h)
            return True
        if kind == "echo_ok":
            key = {"upper": self.key.upper(), "lower": self.key.lower(),
                   "swap": self.key.swapcase(), "spaced": f"  {self.key}\t"}[arg]  # fmt: skip
            text = json.dumps({"reason": f"your key is {key}", "city": key,
                               "country": "France", "continent": "Europe",
                               "latitude": 48.8, "longitude": 2.3})  # fmt: skip
            self._openai(h, rec, text, "stop")
            return True
        if kind == "prompt_block":
            rec.status = 200
            self._send(h, 200, {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})
            rec.delivered = True
            return True
        return False

    def _openai(self, h: BaseHTTPRequestHandler, rec: Record, text: str, finish: str) -> None:
        pt, ct = self.usage
        payload = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:8],
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        }
        rec.status = 200
        self._send(h, 200, payload)
        rec.delivered = True

    def _stream(
        self, h: BaseHTTPRequestHandler, rec: Record, text: str, finish: str, cut: bool
    ) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def chunk(obj: Any) -> None:
            data = f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()
            h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            h.wfile.flush()

        pieces = [text[i : i + 40] for i in range(0, len(text), 40)]
        for i, p in enumerate(pieces):
            chunk({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
            if cut and i == 1:
                self._reset(h)
                return
        chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        pt, ct = self.usage
        chunk({"choices": [], "usage": {"prompt_tokens": pt, "completion_tokens": ct}})
        chunk("[DONE]")
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
        rec.status = 200
        rec.delivered = True

    def _gemini(
        self, h: BaseHTTPRequestHandler, rec: Record, text: str, finish: str, fault: str | None
    ) -> None:
        pt, ct = self.usage
        cand: dict[str, Any] = {"finishReason": "STOP" if finish == "stop" else finish, "index": 0}
        if text:
            cand["content"] = {"role": "model", "parts": [{"text": text}]}
        if fault == "safety":
            cand["safetyRatings"] = [
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}
            ]
        payload = {
            "candidates": [cand],
            "usageMetadata": {
                "promptTokenCount": pt,
                "candidatesTokenCount": ct,
                "totalTokenCount": pt + ct,
                "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": pt - 200}],
            },
        }
        rec.status = 200
        self._send(h, 200, payload)
        rec.delivered = True

    # -- Gemini File API ---------------------------------------------------
    def _upload(self, h: BaseHTTPRequestHandler, path: str, raw: bytes) -> None:
        if h.headers.get("x-goog-api-key") != self.key:
            return self._send(h, 401, {"error": {"message": "no key"}})
        if path.startswith("/upload/v1beta/files"):
            sid = uuid.uuid4().hex[:10]
            self.uploads[sid] = {"mime": h.headers.get("X-Goog-Upload-Header-Content-Type")}
            host = f"http://127.0.0.1:{self.httpd.server_address[1]}"
            return self._send(h, 200, {}, {"X-Goog-Upload-URL": f"{host}/upload/session/{sid}"})
        sid = path.rsplit("/", 1)[-1]
        fid = "f" + sid
        self.files[fid] = {"data": raw, "mime": self.uploads[sid]["mime"], "polls": 0}
        info = {"name": f"files/{fid}", "uri": f"http://files/{fid}", "state": "PROCESSING",
                "mimeType": self.uploads[sid]["mime"]}  # fmt: skip
        self._send(h, 200, {"file": info})

    def _file_get(self, h: BaseHTTPRequestHandler, path: str) -> None:
        fid = path.rsplit("/", 1)[-1]
        f = self.files[fid]
        f["polls"] += 1
        self._send(h, 200, {"name": f"files/{fid}", "uri": f"http://files/{fid}", "state": "ACTIVE",
                            "mimeType": f["mime"]})  # fmt: skip
