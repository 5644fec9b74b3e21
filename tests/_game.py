"""Helpers of the game tests: a real ``agl-fast serve`` process on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
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
    with serve_process(db_url, *extra) as (base, _):
        yield base


def rss_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of a process, in KiB, from ``/proc``."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


@contextmanager
def serve_process(db_url: str, *extra: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``agl-fast serve`` on a free loopback port; yields its base URL and process.

    The server's output goes to a file (a pipe nobody reads could fill and
    stall it); it is shown when the server fails to start.
    """
    httpx = pytest.importorskip("httpx")
    port = free_port()
    cmd = [sys.executable, "-m", "agl_fast.cli", "serve", "--port", str(port), "--db", db_url]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([*cmd, *extra], stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    out = log.read().decode(errors="replace")
                    raise AssertionError(f"server exited with {proc.returncode}:\n{out}")
                try:
                    # one probe succeeds (rate-limit tests count on it spending one token)
                    if httpx.get(base + "/api/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError("server did not start within 30 s")
                time.sleep(0.1)
            yield base, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
