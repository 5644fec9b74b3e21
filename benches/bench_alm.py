"""ALM query throughput: the harness vs a sequential one-by-one loop.

Both send the same clips with the AGL1K benchmark prompt to the same loopback
OpenAI-compatible server, which answers after a fixed latency (a stand-in for
a model's time to answer). The reference is the paper's script's way: one
request after the other (httpx, blocking), audio read with soundfile and sent
as base64 WAV. The harness runs ``agl-fast query`` machinery (store, limits,
parsing, Parquet) with ``--concurrency``. Prints clips per second and the
ratio (the suite ``benches/test_alm.py`` gates it).

    python benches/bench_alm.py [--quick] [--clips 64] [--latency 0.2] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

ANSWER = json.dumps(
    {
        "reason": "gulls and surf",
        "city": "Essaouira",
        "country": "Morocco",
        "continent": "Africa",
        "longitude": -9.77,
        "latitude": 31.51,
    }
)


def serve(latency: float) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            time.sleep(latency)
            body = json.dumps(
                {
                    "choices": [{"message": {"content": ANSWER}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 900, "completion_tokens": 80},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def make_clips(d: Path, n: int, seconds: float) -> Path:
    rng = np.random.default_rng(0)
    rows = ["key,mp3name"]
    for i in range(n):
        y = 0.1 * rng.standard_normal(int(16000 * (seconds + 0.01 * i))).astype(np.float32)
        sf.write(d / f"c{i}.wav", y, 16000)
        rows.append(f"k{i},c{i}.wav")
    (d / "manifest.csv").write_text("\n".join(rows) + "\n")
    return d / "manifest.csv"


def sequential(d: Path, n: int, url: str, prompt: str) -> float:
    import httpx

    t0 = time.perf_counter()
    with httpx.Client(timeout=60) as client:
        for i in range(n):
            y, sr = sf.read(d / f"c{i}.wav", dtype="float32")
            buf = io.BytesIO()
            sf.write(buf, y, sr, format="WAV", subtype="PCM_16")
            content = [
                {"type": "text", "text": prompt},
                {"type": "input_audio", "input_audio": {
                    "data": base64.b64encode(buf.getvalue()).decode(), "format": "wav"}},
            ]  # fmt: skip
            r = client.post(
                f"{url}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": content}]},
            )
            json.loads(r.json()["choices"][0]["message"]["content"])
    return time.perf_counter() - t0


def harness(d: Path, url: str, concurrency: int, out: Path) -> float:
    from agl_fast.cli import main

    t0 = time.perf_counter()
    args = ["query", "--provider", "vllm", "--model", "m", "--manifest", str(d / "manifest.csv"),
            "--audio-dir", str(d), "--out", str(out), "--base-url", url,
            "--concurrency", str(concurrency), "--no-progress"]  # fmt: skip
    code = main(args)
    if code != 0:
        raise SystemExit(f"query failed with status {code}")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="24 clips")
    ap.add_argument("--clips", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0, help="clip length")
    ap.add_argument("--latency", type=float, default=0.2, help="server latency (s)")
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    n = 24 if args.quick else args.clips
    from agl_fast.alm.prompts import DEFAULT_PROMPT, TEMPLATES

    prompt = TEMPLATES[DEFAULT_PROMPT].text
    httpd, url = serve(args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            make_clips(d, n, args.seconds)
            t_seq = sequential(d, n, url, prompt)
            t_har = harness(d, url, args.concurrency, d / "out")
    finally:
        httpd.shutdown()
        httpd.server_close()
    ratio = t_seq / t_har
    print(f"{n} clips of {args.seconds:g} s, server latency {args.latency:g} s\n")
    print("| implementation | seconds | clips/s | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| sequential loop (httpx, soundfile) | {t_seq:.2f} | {n / t_seq:.1f} | 1.00 |")
    print(
        f"| agl-fast query --concurrency {args.concurrency} | {t_har:.2f} | "
        f"{n / t_har:.1f} | {ratio:.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
