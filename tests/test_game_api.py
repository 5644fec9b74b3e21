"""The game server's API through Starlette's test client on a real SQLite file."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from agl_fast.game import (
    SCHEMA_VERSION,
    GameConfig,
    create_app,
    export_guesses,
    load_catalogue,
    make_engine,
    migrate,
    write_demo,
)
from agl_fast.game.clips import _DEMO, _DEMO_MODELS


def ref_haversine(lat1, lon1, lat2, lon2, r=6371.0088):
    """Textbook haversine, independent of agl_fast.geo."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * r * math.asin(math.sqrt(a))


TRUTH = {row[0]: (row[1], row[2], row[3], row[4]) for row in _DEMO}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return write_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def db_file(tmp_path) -> Path:
    return tmp_path / "game.sqlite"


def make_client(demo, db_file, address="testclient", **kw) -> TestClient:
    cat = load_catalogue(*demo)
    app = create_app(GameConfig(catalogue=cat, db_url=f"sqlite:///{db_file}", **kw))
    return TestClient(app, client=(address, 50000))


@pytest.fixture
def client(demo, db_file):
    with make_client(demo, db_file) as c:
        yield c


def n_guesses(db_file: Path) -> int:
    with sqlite3.connect(db_file) as con:
        return int(con.execute("SELECT count(*) FROM guesses").fetchone()[0])


def start(client, n=3) -> dict:
    r = client.post("/api/rounds", json={"n": n})
    assert r.status_code == 201, r.text
    return r.json()


def test_page_and_assets_are_served_locally(client):
    r = client.get("/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert "default-src 'self'" in r.headers["content-security-policy"]
    for src in ("/static/app.js", "/static/style.css"):
        assert src in r.text
        assert client.get(src).status_code == 200
    assert "http://" not in r.text.replace("http://www.w3.org", "")
    world = client.get("/static/world.json").json()
    assert len(world["countries"]) > 150
    names = {c["name"] for c in world["countries"]}
    assert {"France", "Brazil", "Japan", "Nigeria"} <= names


def test_round_sends_no_truth_and_sets_anonymous_cookie(client):
    r = client.post("/api/rounds", json={"n": 5})
    assert r.status_code == 201
    cookie = r.headers["set-cookie"]
    assert "agl_player=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    text = r.text
    for _key, lat, lon, city, country, *_ in _DEMO:
        assert city not in text and country not in text
        assert str(lat) not in text and str(lon) not in text
    body = r.json()
    assert sorted(c["key"] for c in body["clips"]) == sorted(TRUTH)
    state = client.get(f"/api/rounds/{body['round_id']}").json()
    assert all("reveal" not in c for c in state["clips"])
    assert not any(city in json.dumps(state) for _, _, _, city, *_ in _DEMO)


def test_guess_reveals_truth_distance_geoscore_and_models(client, db_file):
    rnd = start(client, n=5)
    key = rnd["clips"][0]["key"]
    lat, lon = 10.0, 20.0
    r = client.post(
        "/api/guesses", json={"round_id": rnd["round_id"], "key": key, "lat": lat, "lon": lon}
    )
    assert r.status_code == 201, r.text
    rv = r.json()
    tlat, tlon, city, _ = TRUTH[key]
    assert rv["truth"]["lat"] == pytest.approx(tlat) and rv["truth"]["city"] == city
    d = ref_haversine(lat, lon, tlat, tlon)
    assert rv["distance_km"] == pytest.approx(d, abs=0.06)
    assert rv["geoscore"] == pytest.approx(5000 * math.exp(-d / 1492.7), abs=0.06)
    assert rv["round"] == {
        "score": pytest.approx(rv["geoscore"], abs=0.06),
        "guessed": 1,
        "n": 5,
        "max_score": 25000,
    }
    idx = [k for k, *_ in _DEMO].index(key)
    models = {m["model"]: m for m in rv["models"]}
    assert set(models) == set(_DEMO_MODELS)
    for name, answers in _DEMO_MODELS.items():
        mlat, mlon, mcity, _ = answers[idx]
        assert models[name]["lat"] == pytest.approx(mlat)
        assert mcity in models[name]["reasoning"]
        md = ref_haversine(mlat, mlon, tlat, tlon)
        assert models[name]["distance_km"] == pytest.approx(md, abs=0.06)
    assert n_guesses(db_file) == 1
    again = client.get(f"/api/rounds/{rnd['round_id']}/reveal/{key}")
    assert again.status_code == 200 and again.json()["distance_km"] == rv["distance_km"]


def test_new_rounds_prefer_clips_not_yet_guessed(client):
    first = start(client, n=3)
    for c in first["clips"]:
        body = {"round_id": first["round_id"], "key": c["key"], "lat": 0.0, "lon": 0.0}
        assert client.post("/api/guesses", json=body).status_code == 201
    second = start(client, n=3)
    keys1 = {c["key"] for c in first["clips"]}
    keys2 = [c["key"] for c in second["clips"]]
    assert len(set(keys2)) == 3
    assert set(TRUTH) - keys1 <= set(keys2)  # both unseen clips come first


def test_full_round_and_leaderboard_on_same_clips(client):
    rnd = start(client, n=3)
    total = 0.0
    for c in rnd["clips"]:
        tlat, tlon, *_ = TRUTH[c["key"]]
        rv = client.post(
            "/api/guesses",
            json={"round_id": rnd["round_id"], "key": c["key"], "lat": tlat + 1.0, "lon": tlon},
        ).json()
        total += rv["geoscore"]
    state = client.get(f"/api/rounds/{rnd['round_id']}").json()
    assert state["done"] and state["score"] == pytest.approx(total, abs=0.2)
    board = client.get(f"/api/leaderboard?round_id={rnd['round_id']}").json()
    assert sorted(board["clips"]) == sorted(c["key"] for c in rnd["clips"])
    entries = {e["name"]: e for e in board["entries"]}
    assert entries["you"]["n"] == 3 and entries["you"]["me"]
    for name in _DEMO_MODELS:
        assert entries[name]["kind"] == "model" and entries[name]["n"] == 3
    # one degree of latitude from the truth: ~111 km, far better than either toy model
    assert board["entries"][0]["name"] in ("you", "all players")
    scores = [e["geoscore"] for e in board["entries"]]
    assert scores == sorted(scores, reverse=True)


def test_audio_supports_range_requests(client, demo):
    key = _DEMO[0][0]
    data = (demo[1] / f"{key}.wav").read_bytes()
    full = client.get(f"/api/clips/{key}/audio")
    assert full.status_code == 200 and full.content == data
    assert full.headers["accept-ranges"] == "bytes"
    assert full.headers["content-type"].startswith("audio/wav")
    part = client.get(f"/api/clips/{key}/audio", headers={"Range": "bytes=1000-1999"})
    assert part.status_code == 206
    assert part.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    assert part.content == data[1000:2000]
    tail = client.get(f"/api/clips/{key}/audio", headers={"Range": "bytes=-16"})
    assert tail.status_code == 206 and tail.content == data[-16:]
    bad = client.get(f"/api/clips/{key}/audio", headers={"Range": f"bytes={len(data) + 10}-"})
    assert bad.status_code == 416


# ---- security ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/clips/..%2f..%2fetc%2fpasswd/audio",
        "/api/clips/%2e%2e/audio",
        "/api/clips/../../clips.py/audio",
        "/api/clips/demo_00.wav/audio",
        "/api/clips/%2fetc%2fpasswd/audio",
        "/static/../db.py",
        "/static/..%2fdb.py",
        "/static/%2e%2e/app.py",
    ],
)
def test_path_traversal_is_refused(client, path):
    r = client.get(path)
    assert r.status_code == 404
    assert b"sqlalchemy" not in r.content and b"root:" not in r.content


def test_manifest_names_cannot_leave_the_audio_dir(tmp_path, demo):
    truth, audio, _ = demo
    secret = tmp_path / "secret.wav"
    secret.write_bytes((audio / f"{_DEMO[0][0]}.wav").read_bytes())
    inner = tmp_path / "audio"
    inner.mkdir()
    text = truth.read_text(encoding="utf-8").replace(f"{_DEMO[0][0]}.wav", "../secret.wav")
    (tmp_path / "truth.csv").write_text(text, encoding="utf-8")
    for key, *_ in _DEMO[1:]:
        (inner / f"{key}.wav").write_bytes((audio / f"{key}.wav").read_bytes())
    cat = load_catalogue(tmp_path / "truth.csv", inner)
    assert _DEMO[0][0] not in cat.clips and len(cat.clips) == len(_DEMO) - 1


def test_unknown_clip_and_foreign_round_are_refused(client, demo, db_file):
    rnd = start(client, n=2)
    outside = next(k for k in TRUTH if k not in {c["key"] for c in rnd["clips"]})
    for key in ("no_such_clip", outside, "../" + rnd["clips"][0]["key"]):
        r = client.post(
            "/api/guesses", json={"round_id": rnd["round_id"], "key": key, "lat": 1.0, "lon": 2.0}
        )
        assert r.status_code == 404
    # another (anonymous) player cannot guess in, read or reveal this round
    with make_client(demo, db_file) as other:
        start(other, n=1)
        key = rnd["clips"][0]["key"]
        r = other.post(
            "/api/guesses", json={"round_id": rnd["round_id"], "key": key, "lat": 1.0, "lon": 2.0}
        )
        assert r.status_code == 404
        assert other.get(f"/api/rounds/{rnd['round_id']}").status_code == 404
    assert n_guesses(db_file) == 0


@pytest.mark.parametrize(
    "lat, lon",
    [
        ("10", 20),
        (10, "20"),
        (91, 0),
        (-90.5, 0),
        (0, 180.01),
        (0, -181),
        (None, 0),
        (True, 0),
        (float("nan"), 0),
        (0, float("inf")),
        ([1], 0),
        ({"x": 1}, 0),
    ],
)
def test_malformed_coordinates_are_refused(client, db_file, lat, lon):
    rnd = start(client, n=1)
    body = json.dumps(
        {"round_id": rnd["round_id"], "key": rnd["clips"][0]["key"], "lat": lat, "lon": lon}
    )
    r = client.post("/api/guesses", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert "lat must be a number in [-90, 90]" in r.json()["error"]
    assert n_guesses(db_file) == 0


@pytest.mark.parametrize(
    "body, status",
    [(b"not json", 400), (b"[1, 2]", 400), (b'"x"', 400), (b"{" + b" " * 5000 + b"}", 413)],
)
def test_malformed_bodies_are_refused(client, db_file, body, status):
    start(client, n=1)
    r = client.post("/api/guesses", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status
    assert n_guesses(db_file) == 0


def test_missing_fields_and_bad_round_size(client, db_file):
    rnd = start(client, n=1)
    r = client.post("/api/guesses", json={"key": rnd["clips"][0]["key"], "lat": 1.0, "lon": 2.0})
    assert r.status_code == 422
    for n in (0, 51, "3", 2.5, True):
        assert client.post("/api/rounds", json={"n": n}).status_code == 422
    assert n_guesses(db_file) == 0


def test_replayed_guess_is_refused(client, db_file):
    rnd = start(client, n=1)
    body = {"round_id": rnd["round_id"], "key": rnd["clips"][0]["key"], "lat": 5.0, "lon": 6.0}
    assert client.post("/api/guesses", json=body).status_code == 201
    again = client.post("/api/guesses", json={**body, "lat": 43.0, "lon": 5.0})
    assert again.status_code == 409
    assert n_guesses(db_file) == 1
    with sqlite3.connect(db_file) as con:
        assert con.execute("SELECT latitude FROM guesses").fetchone()[0] == 5.0


def test_truth_is_not_readable_before_the_guess(client, db_file):
    rnd = start(client, n=2)
    key = rnd["clips"][0]["key"]
    r = client.get(f"/api/rounds/{rnd['round_id']}/reveal/{key}")
    assert r.status_code == 403
    assert TRUTH[key][2] not in r.text
    assert client.get(f"/api/rounds/{rnd['round_id']}/reveal/other").status_code == 404
    assert n_guesses(db_file) == 0
    # without the cookie there is no round at all
    client.cookies.clear()
    assert client.get(f"/api/rounds/{rnd['round_id']}/reveal/{key}").status_code == 404


def test_rate_limit(demo, db_file):
    with make_client(demo, db_file, rate_per_s=0.01, burst=3) as c:
        codes = [c.get("/api/health").status_code for _ in range(5)]
    assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]


# ---- database, migrations, export --------------------------------------------------------


def test_migrations_are_versioned_and_idempotent(db_file):
    engine = make_engine(f"sqlite:///{db_file}")
    assert migrate(engine, target=1) == 1
    with sqlite3.connect(db_file) as con:
        idx = {r[1] for r in con.execute("PRAGMA index_list('guesses')")}
    assert "ix_guesses_clip_key" not in idx
    assert migrate(engine) == SCHEMA_VERSION
    assert migrate(engine) == SCHEMA_VERSION
    with sqlite3.connect(db_file) as con:
        idx = {r[1] for r in con.execute("PRAGMA index_list('guesses')")}
        versions = [r[0] for r in con.execute("SELECT version FROM agl_schema_version")]
    assert "ix_guesses_clip_key" in idx and versions == list(range(1, SCHEMA_VERSION + 1))
    engine.dispose()


def test_export_is_scored_by_evaluate_as_human(client, demo, db_file, tmp_path, capsys):
    from agl_fast.cli import main
    from agl_fast.evaluate.readers import model_name, read_predictions

    truth = demo[0]

    def play(c, dlat):
        rnd = start(c, n=5)
        for clip in rnd["clips"]:
            tlat, tlon, *_ = TRUTH[clip["key"]]
            body = {
                "round_id": rnd["round_id"],
                "key": clip["key"],
                "lat": tlat + dlat,
                "lon": tlon,
            }
            assert c.post("/api/guesses", json=body).status_code == 201

    play(client, 2.0)
    play(client, 0.0)  # the same player again, after seeing the answers: not counted
    with make_client(demo, db_file, address="192.0.2.8") as other:  # elsewhere, blind
        play(other, 4.0)
    assert n_guesses(db_file) == 15
    out = tmp_path / "Human.parquet"
    assert main(["serve", "--db", f"sqlite:///{db_file}", "--export", str(out)]) == 0
    df, rep = read_predictions(out)
    assert model_name(out) == "Human" and rep.n_rows == 5 and (df["n_guesses"] == 2).all()
    for rec in df.to_dict("records"):
        tlat, tlon, *_ = TRUTH[rec["question_id"]]
        # the spherical mean of tlat + 2 and tlat + 4 on one meridian is tlat + 3
        assert rec["predicted_latitude"] == pytest.approx(tlat + 3.0, abs=1e-6)
        assert rec["predicted_longitude"] == pytest.approx(tlon, abs=1e-6)
    board = client.get("/api/leaderboard").json()
    me = next(e for e in board["entries"] if e["me"])
    d2 = np.mean([ref_haversine(t[0] + 2.0, t[1], t[0], t[1]) for t in TRUTH.values()])
    assert me["n"] == 5 and me["distance_km"] == pytest.approx(d2, abs=0.1)
    capsys.readouterr()
    assert (
        main(
            [
                "evaluate",
                str(out),
                "--truth",
                str(truth),
                "--mode",
                "agl1k",
                "--out",
                str(tmp_path / "ev"),
                "--n-boot",
                "50",
            ]
        )
        == 0
    )
    assert "Human" in capsys.readouterr().out
    import pandas as pd
    from geographiclib.geodesic import Geodesic

    m = pd.read_parquet(tmp_path / "ev" / "metrics.parquet")
    m = m[(m["model"] == "Human") & (m["subset"] == "all")].set_index("metric")
    d = [Geodesic.WGS84.Inverse(t[0] + 3.0, t[1], t[0], t[1])["s12"] / 1e3 for t in TRUTH.values()]
    assert m.loc["mean_distance_km", "value"] == pytest.approx(np.mean(d), rel=1e-6)
    expect = np.mean(5000 * np.exp(-np.asarray(d) / 1492.7))
    assert m.loc["geoscore", "value"] == pytest.approx(expect, rel=1e-6)
    assert m.loc["geoscore", "ci_low"] <= m.loc["geoscore", "value"] <= m.loc["geoscore", "ci_high"]
    engine = make_engine(f"sqlite:///{db_file}")
    assert export_guesses(engine, tmp_path / "again.parquet") == 5
    engine.dispose()


# ---- real data and the command line -------------------------------------------------------


def test_real_recordings_and_model_answers(shared_dir, tmp_path):
    d = shared_dir / "agl1k"
    cat = load_catalogue(d / "geoLocalization_schema.csv", d, d)
    assert sorted(cat.clips) == ["aporee_26839_30948", "aporee_5201_6631"]
    assert cat.clips["aporee_26839_30948"].country == "Morocco"
    # the answers as the raw JSONL gives them
    raw = {}
    with (d / "gemini-3-pro-preview_seed_42_ABCD.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            raw[str(rec["question_id"])] = rec
    gem = cat.models["aporee_26839_30948"]["gemini-3-pro-preview"]
    assert gem.lat == pytest.approx(float(raw["aporee_26839_30948"]["predicted_latitude"]))
    assert gem.reasoning == raw["aporee_26839_30948"]["model_output"]
    app = create_app(GameConfig(catalogue=cat, db_url=f"sqlite:///{tmp_path / 'g.sqlite'}"))
    with TestClient(app) as c:
        rnd = c.post("/api/rounds", json={"n": 2}).json()
        key = rnd["clips"][0]["key"]
        part = c.get(f"/api/clips/{key}/audio", headers={"Range": "bytes=0-1023"})
        assert part.status_code == 206 and part.headers["content-type"] == "audio/mpeg"
        assert part.content == cat.clips[key].path.read_bytes()[:1024]
        rv = c.post(
            "/api/guesses", json={"round_id": rnd["round_id"], "key": key, "lat": 48.0, "lon": 2.0}
        ).json()
        names = {m["model"] for m in rv["models"]}
        assert "qwen25-omni" in names
        t = cat.clips[key]
        assert rv["distance_km"] == pytest.approx(ref_haversine(48.0, 2.0, t.lat, t.lon), abs=0.06)


def test_serve_command_line_errors(demo, capsys):
    from agl_fast.cli import main

    assert main(["serve", "--truth", str(demo[0])]) == 2
    assert "--audio-dir is required" in capsys.readouterr().err
    assert main(["serve", "--demo", "--audio-dir", str(demo[1])]) == 2
    capsys.readouterr()
    assert main(["serve", "--truth", str(demo[0]), "--audio-dir", str(demo[1] / "missing")]) == 2
    assert "audio directory not found" in capsys.readouterr().err


def test_cli_does_not_load_the_web_stack():
    import subprocess
    import sys

    code = (
        "import sys, agl_fast.cli; agl_fast.cli.build_parser(['serve', '--demo']); "
        "assert not {'starlette', 'sqlalchemy', 'uvicorn'} & set(sys.modules), sys.modules.keys()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
