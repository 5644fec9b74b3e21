"""Bounded loopback load test of a real ``agl-fast serve`` (uvicorn) process.

200 simulated players (one HTTP client and cookie each) play rounds for
``AGL_FAST_LOAD_SECONDS`` (default 15 s): start a round, fetch a range of
each clip, guess it, read the leaderboard. Asserts no error responses and
no lost guesses (every 201 is a row in the database); prints requests/s and
latency percentiles (never asserted: they depend on the machine).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import time

import numpy as np
import pytest

from _game import serve

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

PLAYERS = 200
SECONDS = float(os.environ.get("AGL_FAST_LOAD_SECONDS", "15"))


async def _player(base: str, seed: int, stop: float, lat_ms: list[float], errors: list[str]) -> int:
    rng = random.Random(seed)
    stored = 0
    limits = httpx.Limits(max_connections=2)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as c:

        async def call(method: str, url: str, **kw) -> httpx.Response | None:
            t = time.perf_counter()
            try:
                r = await c.request(method, url, **kw)
            except httpx.HTTPError as e:
                errors.append(f"{method} {url}: {type(e).__name__} {e}")
                return None
            lat_ms.append((time.perf_counter() - t) * 1e3)
            if r.status_code >= 400:
                errors.append(f"{method} {url}: {r.status_code} {r.text[:200]}")
                return None
            return r

        first = True
        while first or time.monotonic() < stop:  # at least one round each
            first = False
            r = await call("POST", "/api/rounds", json={"n": 3})
            if r is None:
                return stored
            rnd = r.json()
            for clip in rnd["clips"]:
                a = await call("GET", clip["audio"], headers={"Range": "bytes=0-4095"})
                if a is None or a.status_code != 206 or len(a.content) != 4096:
                    errors.append(f"range: {a.status_code if a else None}")
                    return stored
                g = await call(
                    "POST",
                    "/api/guesses",
                    json={
                        "round_id": rnd["round_id"],
                        "key": clip["key"],
                        "lat": rng.uniform(-60, 70),
                        "lon": rng.uniform(-180, 180),
                    },
                )
                if g is None:
                    return stored
                stored += 1
            if await call("GET", f"/api/leaderboard?round_id={rnd['round_id']}") is None:
                return stored
    return stored


async def _swarm(base: str) -> tuple[int, list[float], list[str], float]:
    lat_ms: list[float] = []
    errors: list[str] = []
    t0 = time.monotonic()
    stop = t0 + SECONDS
    stored = await asyncio.gather(*(_player(base, i, stop, lat_ms, errors) for i in range(PLAYERS)))
    return sum(stored), lat_ms, errors, time.monotonic() - t0


def test_200_concurrent_players(tmp_path):
    db = tmp_path / "load.sqlite"
    with serve(f"sqlite:///{db}", "--demo", "--rate", "1000000", "--burst", "1000000") as base:
        stored, lat_ms, errors, wall = asyncio.run(_swarm(base))
    assert not errors, f"{len(errors)} errors, first: {errors[:3]}"
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT count(*) FROM guesses").fetchone()[0]
        dup = con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM guesses GROUP BY player_id, round_id, clip_key "
            "HAVING count(*) > 1)"
        ).fetchone()[0]
        players = con.execute("SELECT count(DISTINCT player_id) FROM guesses").fetchone()[0]
    assert stored > 0 and rows == stored and dup == 0
    assert players == PLAYERS
    p50, p95, p99 = np.percentile(lat_ms, [50, 95, 99])
    print(
        f"\nload: {PLAYERS} players, {wall:.1f} s, {len(lat_ms)} requests, "
        f"{len(lat_ms) / wall:.0f} req/s, {stored} guesses stored; latency "
        f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms"
    )
