"""The game on PostgreSQL: migrations, a round, the replay refusal and the export.

Uses ``$AGL_FAST_TEST_PG_URL`` (a SQLAlchemy URL such as
``postgresql+psycopg://user@127.0.0.1:5432/db``) when set; otherwise starts a
throwaway cluster with Debian's ``initdb``/``pg_ctl`` under a temporary
directory (as the ``postgres`` user when running as root). Skips when
neither is possible; install the server with ``apt-get install postgresql``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from _game import free_port

pytest.importorskip("psycopg")
pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from starlette.testclient import TestClient

from agl_fast.game import (
    SCHEMA_VERSION,
    GameConfig,
    create_app,
    export_guesses,
    load_catalogue,
    make_engine,
    write_demo,
)
from agl_fast.game.db import current_version


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    url = os.environ.get("AGL_FAST_TEST_PG_URL")
    if url:
        yield url
        return
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("no PostgreSQL: set AGL_FAST_TEST_PG_URL or apt-get install postgresql")
    prefix: list[str] = []
    # A fresh directory straight under the system temp dir: reachable by the
    # cluster's owner (pytest keeps its own base directory private).
    root = Path(tempfile.mkdtemp(prefix="agl-fast-pg-"))
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None or subprocess.run(["id", "postgres"], capture_output=True).returncode:
            shutil.rmtree(root)
            pytest.skip("running as root without a postgres user to own the cluster")
        prefix = [runuser, "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    data, port = root / "data", free_port()

    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, *a], capture_output=True, text=True, timeout=120, cwd=root)

    r = run(initdb, "-D", str(data), "-A", "trust", "-U", "game", "--no-sync", "-E", "UTF8")
    if r.returncode:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"initdb failed: {r.stderr[-500:]}")
    opts = f"-h 127.0.0.1 -p {port} -k {root} -F"
    r = run(pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start")
    if r.returncode:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"pg_ctl start failed: {r.stderr[-500:]}")
    try:
        yield f"postgresql+psycopg://game@127.0.0.1:{port}/postgres"
    finally:
        run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def test_round_on_postgres(pg_url, tmp_path):
    from sqlalchemy import text

    engine = make_engine(pg_url)
    with engine.begin() as conn:  # a clean schema for this run
        conn.execute(
            text(
                "DROP TABLE IF EXISTS reveals, guesses, rounds, players, agl_settings, "
                "agl_schema_version"
            )
        )
    demo = write_demo(tmp_path / "demo")
    app = create_app(GameConfig(catalogue=load_catalogue(*demo), db_url=pg_url))
    assert current_version(engine) == SCHEMA_VERSION
    with TestClient(app) as c:
        rnd = c.post("/api/rounds", json={"n": 5}).json()
        for clip in rnd["clips"]:
            body = {"round_id": rnd["round_id"], "key": clip["key"], "lat": 1.5, "lon": 2.5}
            assert c.post("/api/guesses", json=body).status_code == 201
        assert c.post("/api/guesses", json=body).status_code == 409
        state = c.get(f"/api/rounds/{rnd['round_id']}").json()
        assert state["done"]
        board = c.get(f"/api/leaderboard?round_id={rnd['round_id']}").json()
        assert {e["name"] for e in board["entries"]} >= {"you", "demo-echo", "demo-prior"}
        cookies = dict(c.cookies)
    # a restarted server (nothing cached) shows an answer again: the showing is kept once
    again = create_app(GameConfig(catalogue=load_catalogue(*demo), db_url=pg_url))
    with TestClient(again) as c:
        c.cookies.update(cookies)
        key = rnd["clips"][0]["key"]
        assert c.get(f"/api/rounds/{rnd['round_id']}/reveal/{key}").status_code == 200
        # a fresh player at the same address guesses after the answers were shown
        c.cookies.clear()
        late = c.post("/api/rounds", json={"n": 1}).json()
        body = {"round_id": late["round_id"], "key": late["clips"][0]["key"], "lat": 1, "lon": 2}
        r = c.post("/api/guesses", json=body)
        assert r.status_code == 201 and r.json()["after_reveal"] is True
        board = c.get("/api/leaderboard").json()
        assert board["after_reveal"] == {"guesses": 1, "players": 1}
    with engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM reveals")).scalar()
        assert n == 5 + 1  # the first player's five, kept once, and the late one's
    assert export_guesses(engine, tmp_path / "Human.parquet") == 5
    engine.dispose()
