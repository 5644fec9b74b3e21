"""The game server against hostile clients.

Deeply nested JSON, oversized and endless bodies (raw sockets against a real
``agl-fast serve`` process, whose memory is read from ``/proc``), clips gone
from the catalogue, spoofed ``X-Forwarded-For``, request floods per player and
per address, and players who guess a clip after its answer was shown.
"""

from __future__ import annotations

import json
import select
import socket
import sqlite3
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")
pytest.importorskip("httpx")

import httpx
from starlette.testclient import TestClient

from _game import rss_kib, serve, serve_process
from agl_fast.exceptions import ParameterError
from agl_fast.game import GameConfig, create_app, load_catalogue, write_demo
from agl_fast.game.clips import _DEMO
from agl_fast.game.limits import (
    MAX_BODY,
    MAX_JSON_DEPTH,
    ClientAddress,
    Limit,
    TokenBuckets,
    address_key,
)

TRUTH = {row[0]: (row[1], row[2]) for row in _DEMO}
MB = 1_000_000


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return write_demo(tmp_path_factory.mktemp("demo"))


def make_app(demo, db: Path, catalogue=None, **kw):
    cat = catalogue if catalogue is not None else load_catalogue(*demo)
    return create_app(GameConfig(catalogue=cat, db_url=f"sqlite:///{db}", **kw))


def client_at(app, address: str) -> TestClient:
    return TestClient(app, client=(address, 40000))


def start(c: TestClient, n: int = 5) -> dict:
    r = c.post("/api/rounds", json={"n": n})
    assert r.status_code == 201, r.text
    return r.json()


def guess(c: TestClient, rnd: dict, key: str, lat: float, lon: float):
    return c.post(
        "/api/guesses", json={"round_id": rnd["round_id"], "key": key, "lat": lat, "lon": lon}
    )


def db_rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchall()


# ---- nesting depth -----------------------------------------------------------------------

DEEP = {
    "3000-deep array": b"[" * 3000,
    "balanced 1500-deep array": b"[" * 1500 + b"]" * 1500,
    "600-deep object": b'{"":' * 600 + b"1" + b"}" * 600,
    "deep value in a guess": b'{"round_id": "x", "lat": ' + b"[" * 40 + b"]" * 40 + b"}",
}


@pytest.mark.parametrize("body", DEEP.values(), ids=DEEP.keys())
@pytest.mark.parametrize("path", ["/api/rounds", "/api/guesses"])
def test_deep_json_is_a_400_on_every_json_endpoint(demo, tmp_path, path, body):
    db = tmp_path / "g.sqlite"
    with client_at(make_app(demo, db), "192.0.2.1") as c:
        start(c, 1)
        r = c.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    assert db_rows(db, "SELECT count(*) FROM guesses") == [(0,)]


def test_brackets_in_strings_do_not_count_as_depth(demo, tmp_path):
    with client_at(make_app(demo, tmp_path / "g.sqlite"), "192.0.2.1") as c:
        rnd = start(c, 1)
        key = rnd["clips"][0]["key"]
        nested = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
        # brackets inside strings, an escaped quote before them, and nesting at the limit
        body = (
            f'{{"round_id": "{rnd["round_id"]}", "key": "{key}", "lat": 1.0, "lon": 2.0, '
            f'"note": "\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "extra": {nested}}}'
        )
        r = c.post("/api/guesses", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 201, r.text
        too_deep = body.replace(nested, "[" + nested + "]")
        r = c.post("/api/guesses", content=too_deep, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "nested deeper" in r.json()["error"]


@pytest.mark.parametrize(
    "body, message",
    [
        ("[1, 2]".encode("utf-16"), "UTF-8"),
        (b'{"n": 1', "not valid JSON"),
        (b"\xef\xbb\xbf{}", "not valid JSON"),
        (b'{"n": 1e999999, "x": NaN}', "n must be an integer"),
    ],
)
def test_odd_encodings_are_refused_with_a_message(demo, tmp_path, body, message):
    with client_at(make_app(demo, tmp_path / "g.sqlite"), "192.0.2.1") as c:
        r = c.post("/api/rounds", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code in (400, 422) and message in r.json()["error"]


def test_hostile_values_never_reach_the_database_as_errors(demo, tmp_path):
    db = tmp_path / "g.sqlite"
    with client_at(make_app(demo, db), "192.0.2.1") as c:
        rnd = start(c, 1)
        key = rnd["clips"][0]["key"]
        huge = "1" + "0" * 4000  # an integer no float holds
        body = f'{{"round_id": "{rnd["round_id"]}", "key": "{key}", "lat": {huge}, "lon": 0}}'
        r = c.post("/api/guesses", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and "lat must be a number" in r.json()["error"]
        for rid in ("\x00" * 32, "a" * 31 + "\x00", "'; DROP TABLE guesses; --", "\ud800"):
            body = json.dumps({"round_id": rid, "key": key, "lat": 1, "lon": 2})
            r = c.post("/api/guesses", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 404, r.text
        for path in (
            "/api/rounds/%00",
            "/api/leaderboard?round_id=%00",
            "/api/rounds/%ff/reveal/x",
        ):
            assert c.get(path).status_code == 404
    assert db_rows(db, "SELECT count(*) FROM guesses") == [(0,)]


# ---- clips gone from the catalogue -------------------------------------------------------


def test_clips_removed_from_the_catalogue_are_404_not_500(demo, tmp_path):
    db = tmp_path / "g.sqlite"
    with client_at(make_app(demo, db), "192.0.2.1") as c:
        rnd = start(c, 5)
        keys = [x["key"] for x in rnd["clips"]]
        for k in keys[:3]:
            assert guess(c, rnd, k, *TRUTH[k]).status_code == 201
        cookies = dict(c.cookies)
    # the server restarts with a catalogue that lost a guessed and an unguessed clip
    gone = {keys[0], keys[4]}
    full = load_catalogue(*demo)
    cat = type(full)(
        clips={k: v for k, v in full.clips.items() if k not in gone}, models=full.models
    )
    with client_at(make_app(demo, db, catalogue=cat), "192.0.2.1") as c:
        c.cookies.update(cookies)
        r = c.get(f"/api/rounds/{rnd['round_id']}/reveal/{keys[0]}")
        assert r.status_code == 404 and r.json()["error"] == "clip no longer in the catalogue"
        assert c.get(f"/api/rounds/{rnd['round_id']}/reveal/{keys[1]}").status_code == 200
        r = guess(c, rnd, keys[4], 1.0, 2.0)
        assert r.status_code == 404 and r.json()["error"] == "clip no longer in the catalogue"
        assert c.get(f"/api/clips/{keys[4]}/audio").status_code == 404
        state = c.get(f"/api/rounds/{rnd['round_id']}").json()
        by_key = {x["key"]: x for x in state["clips"]}
        assert by_key[keys[0]].get("removed") and "reveal" not in by_key[keys[0]]
        assert by_key[keys[4]].get("removed")
        assert "reveal" in by_key[keys[1]] and not by_key[keys[1]].get("removed")
        board = c.get(f"/api/leaderboard?round_id={rnd['round_id']}")
        assert board.status_code == 200
        assert {e["name"]: e["n"] for e in board.json()["entries"]}["you"] == 3


# ---- bodies: refused before they are read ------------------------------------------------


def _post_raw(port: int, head: bytes, body_chunks, total: int) -> tuple[int, bytes, float]:
    """Send ``head`` then body chunks until the server answers; ``(bytes sent, answer, s)``."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    t0 = time.monotonic()
    sent = 0
    with s:
        s.sendall(head)
        try:
            for chunk in body_chunks:
                if select.select([s], [], [], 0)[0]:
                    break  # the answer came: stop, as a client reading it would
                s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection without reading the rest
        answer = b""
        try:
            while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
                data = s.recv(65536)
                if not data:
                    break
                answer += data
        except ConnectionResetError:
            pass
    assert sent <= total
    return sent, answer, time.monotonic() - t0


def test_a_100_mb_body_is_refused_before_it_is_read(tmp_path):
    total, piece = 100 * MB, b"[" * 65536
    with serve_process(f"sqlite:///{tmp_path / 'g.sqlite'}", "--demo") as (base, proc):
        port = int(base.rsplit(":", 1)[1])
        before = rss_kib(proc.pid)
        head = (
            "POST /api/guesses HTTP/1.1\r\nHost: game\r\nContent-Type: application/json\r\n"
            f"Content-Length: {total}\r\n\r\n"
        ).encode()
        # the declared length alone is refused: the answer comes before any body byte
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        with s:
            s.sendall(head)
            answer = b""
            while data := s.recv(65536):  # until the server closes the connection
                answer += data
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"connection: close" in answer.lower()
        assert f"larger than {MAX_BODY} bytes".encode() in answer
        # an attacker who keeps sending gets the same answer and a closed connection
        sent_cl, answer, _ = _post_raw(
            port, head, (piece for _ in range(total // len(piece))), total
        )
        assert answer.startswith(b"HTTP/1.1 413 ")
        after_cl = rss_kib(proc.pid)
        # chunked: no length to check, the reader stops at the cap
        head = (
            b"POST /api/rounds HTTP/1.1\r\nHost: game\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        frame = b"%x\r\n" % len(piece) + piece + b"\r\n"
        sent_ch, answer, secs = _post_raw(
            port, head, (frame for _ in range(total // len(piece))), total
        )
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        after = rss_kib(proc.pid)
        assert httpx.get(base + "/api/health").status_code == 200
    print(
        f"\n100 MB bodies: RSS {before['VmRSS'] / 1024:.1f} -> {after['VmRSS'] / 1024:.1f} MiB, "
        f"peak {before['VmHWM'] / 1024:.1f} -> {after['VmHWM'] / 1024:.1f} MiB; "
        f"body bytes the client got into the socket before it was closed: "
        f"{sent_cl / MB:.1f} MB (Content-Length), {sent_ch / MB:.1f} MB (chunked, "
        f"answered in {secs:.2f} s)"
    )
    # nothing like 100 MB was read: the peak grew by less than 16 MiB
    assert after_cl["VmHWM"] - before["VmHWM"] < 16 * 1024
    assert after["VmHWM"] - before["VmHWM"] < 16 * 1024
    assert sent_ch < total / 2


def test_a_body_at_the_cap_is_read_and_one_byte_more_is_not(demo, tmp_path):
    with client_at(make_app(demo, tmp_path / "g.sqlite"), "192.0.2.1") as c:
        pad = MAX_BODY - len(b'{"n": 1, "p": ""}')
        ok = b'{"n": 1, "p": "' + b" " * pad + b'"}'
        assert len(ok) == MAX_BODY
        headers = {"Content-Type": "application/json"}
        assert c.post("/api/rounds", content=ok, headers=headers).status_code == 201
        over = ok[:-2] + b' "}'
        r = c.post("/api/rounds", content=over, headers=headers)
        assert r.status_code == 413 and r.headers["connection"] == "close"

        def chunks():  # no Content-Length: the cap holds for a stream too
            yield ok[:-2]
            yield b' "}'

        r = c.post("/api/rounds", content=chunks(), headers=headers)
        assert r.status_code == 413


# ---- rate limits and proxies ---------------------------------------------------------------


def _codes(base: str, n: int, headers_for) -> list[int]:
    with httpx.Client(base_url=base, timeout=10) as c:
        return [c.get("/api/health", headers=headers_for(i)).status_code for i in range(n)]


def test_spoofed_forwarded_for_is_limited_like_a_direct_client(tmp_path):
    limits = ("--demo", "--rate", "0.001", "--burst", "10")
    with serve(f"sqlite:///{tmp_path / 'a.sqlite'}", *limits) as base:
        direct = _codes(base, 15, lambda i: {})
    with serve(f"sqlite:///{tmp_path / 'b.sqlite'}", *limits) as base:
        spoofed = _codes(base, 15, lambda i: {"X-Forwarded-For": f"198.51.100.{i}"})
        after = _codes(base, 1, lambda i: {})
    # the start-up health check spent one token of the burst
    assert direct == [200] * 9 + [429] * 6
    assert spoofed == direct  # one bucket: the peer's
    assert after == [429]


def test_forwarded_for_is_believed_from_a_trusted_proxy(tmp_path):
    limits = ("--demo", "--rate", "0.001", "--burst", "10", "--trusted-proxy", "127.0.0.0/8")
    with serve(f"sqlite:///{tmp_path / 'a.sqlite'}", *limits) as base:
        many = _codes(base, 15, lambda i: {"X-Forwarded-For": f"198.51.100.{i}"})
        one = _codes(base, 12, lambda i: {"X-Forwarded-For": "203.0.113.5"})
        # a client's own forged hop sits left of what the proxy appends: ignored
        forged = _codes(base, 1, lambda i: {"X-Forwarded-For": "192.0.2.77, 203.0.113.5"})
        other = _codes(base, 1, lambda i: {"X-Forwarded-For": "192.0.2.77"})
    assert many == [200] * 15  # one bucket per forwarded client
    assert one == [200] * 10 + [429] * 2
    assert forged == [429] and other == [200]


def test_client_address_resolution():
    scope = {"client": ("10.1.2.3", 5000), "headers": [(b"x-forwarded-for", b"1.1.1.1, 9.9.9.9")]}
    assert ClientAddress()(scope) == "10.1.2.3"
    assert ClientAddress(["10.0.0.0/8"])(scope) == "9.9.9.9"
    assert ClientAddress(["10.0.0.0/8", "9.9.9.9"])(scope) == "1.1.1.1"
    chain = {**scope, "headers": [(b"x-forwarded-for", b"junk, 10.0.0.7")]}
    assert ClientAddress(["10.0.0.0/8"])(chain) == "10.0.0.7"  # garbage is not a client
    v6 = {"client": ("::1", 1), "headers": [(b"x-forwarded-for", b"[2001:db8:1:2::5]:443")]}
    assert ClientAddress(["::1"])(v6) == "2001:db8:1:2::5"
    assert address_key("2001:db8:1:2::5") == address_key("2001:db8:1:2:ffff::1")
    assert address_key("2001:db8:1:2::5") == "2001:db8:1:2::/64"
    assert address_key("::ffff:192.0.2.1") == "192.0.2.1"
    with pytest.raises(ParameterError, match="trusted proxy is an IP address or network"):
        ClientAddress(["proxy.example"])
    with pytest.raises(ParameterError, match="PER_MINUTE/BURST such as 30/10, got '30'"):
        Limit.parse("30")
    with pytest.raises(ParameterError, match=r"positive number a minute, got 0\.0"):
        Limit.parse("0/5")
    with pytest.raises(ParameterError, match="burst must be an integer >= 1, got 0"):
        Limit(per_minute=1.0, burst=0)


def test_token_buckets_refill_and_stay_bounded():
    b = TokenBuckets(Limit(per_minute=0.6, burst=2), max_keys=2)  # a token per 100 s
    assert [b.take("a"), b.take("a")] == [0.0, 0.0]
    assert b.take("a") == pytest.approx(100.0, rel=0.01)  # seconds until the next token
    assert b.take("b") == 0.0
    # beyond max_keys live clients, new ones share one bucket (memory stays bounded)
    assert [b.take("c"), b.take("d")] == [0.0, 0.0]
    assert b.take("e") > 99.0
    assert b.take("a") > 99.0  # known clients keep their own buckets
    fast = TokenBuckets(Limit(per_minute=600.0, burst=1))  # a token per 100 ms
    assert fast.take("x") == 0.0
    wait = fast.take("x")
    assert 0.0 < wait <= 0.1
    time.sleep(wait + 0.05)
    assert fast.take("x") == 0.0


def test_serve_refuses_bad_limits_and_proxies(capsys):
    from agl_fast.cli import main

    assert main(["serve", "--demo", "--trusted-proxy", "my-proxy"]) == 2
    assert "trusted proxy is an IP address" in capsys.readouterr().err
    assert main(["serve", "--demo", "--guess-limit-player", "fast"]) == 2
    assert "PER_MINUTE/BURST" in capsys.readouterr().err


def test_rounds_are_limited_per_player_and_per_address(demo, tmp_path):
    db = tmp_path / "g.sqlite"
    app = make_app(
        demo,
        db,
        round_limit_player=Limit(per_minute=0.01, burst=3),
        round_limit_address=Limit(per_minute=0.01, burst=6),
    )
    with client_at(app, "192.0.2.1") as c:
        # the first round makes the player (no bucket yet), the next three spend its tokens
        codes = [c.post("/api/rounds", json={"n": 1}).status_code for _ in range(4)]
        assert codes == [201] * 4
        r = c.post("/api/rounds", json={"n": 1})
        assert r.status_code == 429
        assert r.json()["error"].startswith("too many rounds from this player")
        assert int(r.headers["retry-after"]) > 60
        # a fresh player id (no cookie) from the same address: the address bucket
        c.cookies.clear()
        assert c.post("/api/rounds", json={"n": 1}).status_code == 201
        c.cookies.clear()
        r = c.post("/api/rounds", json={"n": 1})
        assert r.status_code == 429
        assert r.json()["error"].startswith("too many rounds from this address")
    with client_at(app, "192.0.2.2") as other:  # another address is not affected
        assert other.post("/api/rounds", json={"n": 1}).status_code == 201
    assert db_rows(db, "SELECT count(*) FROM rounds") == [(6,)]


def test_guesses_are_limited_per_player_and_per_address(demo, tmp_path):
    db = tmp_path / "g.sqlite"
    app = make_app(
        demo,
        db,
        guess_limit_player=Limit(per_minute=0.01, burst=2),
        guess_limit_address=Limit(per_minute=0.01, burst=4),
    )
    with client_at(app, "192.0.2.1") as a:
        rnd = start(a, 5)
        keys = [x["key"] for x in rnd["clips"]]
        assert [guess(a, rnd, k, 1.0, 2.0).status_code for k in keys[:2]] == [201, 201]
        r = guess(a, rnd, keys[2], 1.0, 2.0)
        assert r.status_code == 429 and "too many guesses from this player" in r.json()["error"]
        a.cookies.clear()
        rnd_b = start(a, 5)
        assert guess(a, rnd_b, rnd_b["clips"][0]["key"], 1.0, 2.0).status_code == 201
        r = guess(a, rnd_b, rnd_b["clips"][1]["key"], 1.0, 2.0)
        assert r.status_code == 429 and "from this address" in r.json()["error"]
    assert db_rows(db, "SELECT count(*) FROM guesses") == [(3,)]


# ---- leaderboard integrity -----------------------------------------------------------------


def test_guesses_after_the_answer_was_shown_are_flagged_and_not_ranked(demo, tmp_path):
    db = tmp_path / "g.sqlite"
    app = make_app(demo, db)
    keys = sorted(TRUTH)
    with client_at(app, "192.0.2.1") as alice:
        rnd = start(alice, 5)
        for k in keys:  # a blind, poor player: 10 degrees off
            lat, lon = TRUTH[k]
            r = guess(alice, rnd, k, lat - 10.0 if lat > 0 else lat + 10.0, lon)
            assert r.status_code == 201 and r.json()["after_reveal"] is False
        alice_cookie = dict(alice.cookies)
        # the same address, a fresh player id, the answers just seen: a perfect score
        alice.cookies.clear()
        rnd2 = start(alice, 5)
        for x in rnd2["clips"]:
            r = guess(alice, rnd2, x["key"], *TRUTH[x["key"]])
            assert r.status_code == 201 and r.json()["geoscore"] == 5000.0
            assert r.json()["after_reveal"] is True
        cheat_cookie = dict(alice.cookies)
    with client_at(app, "198.51.100.20") as carol:  # elsewhere: blind
        rnd3 = start(carol, 5)
        for k in keys:
            lat, lon = TRUTH[k]
            assert guess(carol, rnd3, k, lat + 5.0 if lat < 80 else lat - 5, lon).status_code == 201
    # alice reads one answer again from a new address; whoever plays there is marked too
    with client_at(app, "203.0.113.9") as moved:
        moved.cookies.update(alice_cookie)
        assert moved.get(f"/api/rounds/{rnd['round_id']}/reveal/{keys[0]}").status_code == 200
        moved.cookies.clear()
        rnd4 = start(moved, 5)
        for k in keys:
            r = guess(moved, rnd4, k, 0.0, 0.0)
            assert r.json()["after_reveal"] is (k == keys[0])
    flags = db_rows(
        db, "SELECT player_id, sum(after_reveal), count(*) FROM guesses GROUP BY player_id"
    )
    assert sorted(f[1] for f in flags) == [0, 0, 1, 5] and all(f[2] == 5 for f in flags)
    # nothing on the leaderboard ranks the perfect after-the-answer player
    with client_at(app, "192.0.2.1") as view:
        view.cookies.update(cheat_cookie)
        board = view.get("/api/leaderboard").json()
    ranked = [e for e in board["entries"] if not e["after_reveal"]]
    flagged = [e for e in board["entries"] if e["after_reveal"]]
    assert board["after_reveal"] == {"guesses": 6, "players": 2}
    assert all(e["geoscore"] < 5000.0 for e in ranked)
    assert board["entries"][: len(ranked)] == ranked  # flagged rows come after, unranked
    me = next(e for e in flagged if e["me"])
    assert me["name"] == "you (after the answer was shown)" and me["n"] == 5
    assert me["geoscore"] == 5000.0 and not any(e["me"] for e in ranked)
    crowd = next(e for e in ranked if e["kind"] == "crowd")
    assert crowd["n"] == 5 + 5 + 4  # alice, carol, and the blind four of the last player
    # the export leaves the flagged guesses out of the human crowd
    import pyarrow.parquet as pq

    from agl_fast.game import export_guesses, make_engine

    engine = make_engine(f"sqlite:///{db}")
    assert export_guesses(engine, tmp_path / "Human.parquet") == 5
    engine.dispose()
    t = pq.read_table(tmp_path / "Human.parquet").to_pydict()
    n = dict(zip(t["question_id"], t["n_guesses"], strict=True))
    assert n == {k: (2 if k == keys[0] else 3) for k in keys}


def test_addresses_are_stored_only_as_salted_hashes(demo, tmp_path):
    db = tmp_path / "g.sqlite"
    with client_at(make_app(demo, db), "192.0.2.123") as c:
        rnd = start(c, 1)
        assert guess(c, rnd, rnd["clips"][0]["key"], 1.0, 2.0).status_code == 201
    dump = "\n".join(sqlite3.connect(db).iterdump())
    assert "192.0.2.123" not in dump
    (stored,) = db_rows(db, "SELECT address FROM reveals")[0]
    assert len(stored) == 32 and int(stored, 16) >= 0
    other = tmp_path / "h.sqlite"
    with client_at(make_app(demo, other), "192.0.2.123") as c:
        rnd = start(c, 1)
        assert guess(c, rnd, rnd["clips"][0]["key"], 1.0, 2.0).status_code == 201
    assert db_rows(other, "SELECT address FROM reveals")[0][0] != stored  # salt per database


def test_json_error_bodies_everywhere(demo, tmp_path):
    with client_at(make_app(demo, tmp_path / "g.sqlite"), "192.0.2.1") as c:
        for method, path in (
            ("GET", "/nope"),
            ("POST", "/api/leaderboard"),
            ("GET", "/api/guesses"),
        ):
            r = c.request(method, path)
            assert r.status_code in (404, 405) and "error" in json.loads(r.text)
