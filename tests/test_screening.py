"""The screening API of the game server: off by default, behind the curator's
token, bounded and rate limited, stored in the game's database (a real SQLite
file) and read back by ``localizability select --screening``."""

from __future__ import annotations

import sqlite3

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from starlette.testclient import TestClient

from agl_fast.game import GameConfig, create_app, load_catalogue, write_demo
from agl_fast.game.limits import MAX_NOTE_CHARS, Limit
from agl_fast.game.screening import TOKEN_HEADER, read_decisions

TOKEN = "curator-secret-0123456789"


@pytest.fixture
def demo(tmp_path):
    return write_demo(tmp_path / "demo")


def _client(demo, db, **kw):
    cat = load_catalogue(*demo)
    app = create_app(GameConfig(catalogue=cat, db_url=f"sqlite:///{db}", **kw))
    return TestClient(app, client=("192.0.2.10", 50000))


def test_screening_is_off_unless_a_token_is_set(demo, tmp_path):
    with _client(demo, tmp_path / "g.sqlite") as c:
        assert c.get("/screen").status_code == 404
        assert c.get("/api/screening", headers={TOKEN_HEADER: "x" * 20}).status_code == 404
        body = {"key": "demo-berlin", "decision": "reject"}
        assert c.post("/api/screening", json=body).status_code == 404


def test_decisions_need_the_token_are_checked_and_resume(demo, tmp_path):
    db = tmp_path / "g.sqlite"
    with _client(demo, db, screening_token=TOKEN) as c:
        page = c.get("/screen")
        assert page.status_code == 200 and "screen.js" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert c.get("/api/screening").status_code == 403
        assert c.get("/api/screening", headers={TOKEN_HEADER: TOKEN[:-1] + "x"}).status_code == 403
        h = {TOKEN_HEADER: TOKEN}
        listing = c.get("/api/screening", headers=h).json()
        keys = [x["key"] for x in listing["clips"]]
        assert len(keys) >= 3 and all(x["decision"] is None for x in listing["clips"])
        for body, status in [
            ({"key": keys[0], "decision": "maybe"}, 422),
            ({"key": "no-such-clip", "decision": "accept"}, 422),
            ({"key": keys[0], "decision": "accept", "note": 5}, 422),
            ({"key": keys[0], "decision": "accept", "note": "x" * (MAX_NOTE_CHARS + 1)}, 422),
            ({"key": keys[0], "decision": "reject", "note": "wind noise only"}, 201),
            ({"key": keys[1], "decision": "accept", "note": "tram bell, Czech voices"}, 201),
        ]:
            r = c.post("/api/screening", json=body, headers=h)
            assert r.status_code == status, (body, r.text)
        assert c.post("/api/screening", json={"key": keys[0]}).status_code == 403
        # a changed mind: the latest decision counts
        r = c.post("/api/screening", json={"key": keys[0], "decision": "accept"}, headers=h)
        assert r.status_code == 201
        r = c.post("/api/screening", json={"key": keys[0], "decision": "reject",
                                            "note": "music over it"}, headers=h)  # fmt: skip
        assert r.status_code == 201
    # a new server on the same database resumes where the curator stopped
    with _client(demo, db, screening_token=TOKEN) as c:
        listing = c.get("/api/screening", headers={TOKEN_HEADER: TOKEN}).json()
        got = {x["key"]: (x["decision"], x["note"]) for x in listing["clips"]}
        assert got[keys[0]] == ("reject", "music over it")
        assert got[keys[1]] == ("accept", "tram bell, Czech voices")
        assert listing["accepted"] == 1 and listing["rejected"] == 1
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM screening").fetchone()[0] == 2
    d = read_decisions(f"sqlite:///{db}")
    assert {k: v.decision for k, v in d.items()} == {keys[0]: "reject", keys[1]: "accept"}


def test_decisions_are_rate_limited(demo, tmp_path):
    limit = Limit(per_minute=1.0, burst=3)
    with _client(demo, tmp_path / "g.sqlite", screening_token=TOKEN,
                 screening_limit_address=limit) as c:  # fmt: skip
        h = {TOKEN_HEADER: TOKEN}
        key = c.get("/api/screening", headers=h).json()["clips"][0]["key"]
        codes = [
            c.post("/api/screening", json={"key": key, "decision": "accept"}, headers=h).status_code
            for _ in range(5)
        ]
        assert codes == [201, 201, 201, 429, 429]


def test_serve_refuses_a_short_token(demo, capsys):
    from agl_fast.cli import main

    truth, audio, _ = demo
    code = main(["serve", "--truth", str(truth), "--audio-dir", str(audio),
                 "--screening-token", "short"])  # fmt: skip
    assert code == 2 and "at least 16" in capsys.readouterr().err


def test_a_curated_pool_is_screened_by_its_paths(tmp_path):
    """A scored pool has ``path`` (below the audio folder, at any depth), no ``mp3name``;
    a path outside the folder is never served."""
    import shutil

    import pyarrow as pa

    from agl_fast import manifest as mf

    _, audio, _ = write_demo(tmp_path / "demo")
    root = tmp_path / "corpus"
    (root / "a" / "b").mkdir(parents=True)
    wavs = sorted(audio.glob("*.wav"))[:2]
    for w in wavs:
        shutil.copy(w, root / "a" / "b" / w.name)
    outside = tmp_path / "outside.wav"
    shutil.copy(wavs[0], outside)
    keys = ["deep1", "deep2", "escape", "absolute"]
    paths = [f"a/b/{wavs[0].name}", str(root / "a" / "b" / wavs[1].name), "../outside.wav",
             str(outside)]  # fmt: skip
    pool = tmp_path / "scored.parquet"
    mf.write_manifest(
        pa.table({"key": keys, "path": paths, "latitude": [1.0, 2.0, 3.0, 4.0],
                  "longitude": [5.0, 6.0, 7.0, 8.0], "l_k": [2.0, 2.0, 2.0, 2.0]}),
        pool,
    )  # fmt: skip
    cat = load_catalogue(pool, root)
    assert sorted(cat.clips) == ["deep1", "deep2"]
    app = create_app(
        GameConfig(
            catalogue=cat, db_url=f"sqlite:///{tmp_path / 'g.sqlite'}", screening_token=TOKEN
        )
    )
    with TestClient(app) as c:
        got = c.get("/api/screening", headers={TOKEN_HEADER: TOKEN}).json()
        assert [x["key"] for x in got["clips"]] == ["deep1", "deep2"]
        r = c.get(got["clips"][0]["audio"])
        assert r.status_code == 200 and r.content == wavs[0].read_bytes()
