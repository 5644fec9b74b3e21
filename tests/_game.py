"""Helpers of the game tests: a real ``agl-fast serve`` process on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("AGL_FAST_ARTIFACTS", ROOT / "target" / "test-artifacts"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(db_url: str, *extra: str) -> Iterator[str]:
    """Run ``agl-fast serve`` on a free loopback port; yields its base URL."""
    httpx = pytest.importorskip("httpx")
    port = free_port()
    cmd = [sys.executable, "-m", "agl_fast.cli", "serve", "--port", str(port), "--db", db_url]
    proc = subprocess.Popen(
        [*cmd, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                raise AssertionError(f"server exited with {proc.returncode}:\n{out}")
            try:
                if httpx.get(base + "/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("server did not start within 30 s")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
