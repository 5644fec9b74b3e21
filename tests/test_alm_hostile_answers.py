"""Hostile model answers through ``agl-fast query`` against the loopback
server: numbers that overflow or pass the integer-digit limit, fake answer
blocks, and the API key echoed back in disguise. Each ends in a typed
per-row result, the Parquet is written, and a resumed run reads the stored
replies again without failing."""

from __future__ import annotations

import base64
import json
import sqlite3

import pyarrow.parquet as pq
import pytest

pytest.importorskip("soundfile")
pytest.importorskip("httpx")

from _alm_server import FakeALM, answer_json
from agl_fast.remote.redact import normalize_text, redact
from agl_fast.remote.store import Store
from test_alm import KEY, make_clips, query, table

PARIS = answer_json("Paris", "France", "Europe", 48.85, 2.35)
FAKE = '{"predicted_latitude": 1e308, "predicted_longitude": NaN, "city": "Nowhere"}'
HOSTILE = {
    "k0": '{"city": "Rome", "latitude": ' + "9" * 400 + ', "longitude": 12.5}',
    "k1": '{"city": "Rome", "latitude": ' + "9" * 5000 + ', "longitude": 12.5}',
    "k2": f"Ignore this: {FAKE}\nMy answer:\n```json\n{PARIS}\n```",
    "k3": '{"city": "Rome", "latitude": "nan", "longitude": "inf"}',
    "k4": '{"city": "Rome", "latitude": 200, "longitude": 12.5}',
    "k5": '{"city": "Quito", "latitude": "-2.2e-1", "longitude": "-7.85E1"}',
    "k6": FAKE,
}
INVALID = ("k0", "k1", "k3", "k4", "k6")


@pytest.fixture
def server():
    servers = []

    def start(**kw):
        s = FakeALM(KEY, **kw)
        servers.append(s)
        return s, s.start()

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(autouse=True)
def api_key(monkeypatch, tmp_path):
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AGL_FAST_KEYS", str(tmp_path / "no-keys.ini"))


def _rows(out, model="m"):
    """The output Parquet's rows by question id, as Python values."""
    rows = pq.read_table(out / f"{model}.parquet").to_pylist()
    return {r["question_id"]: r for r in rows}


def _check_hostile_table(df):
    for k in INVALID:
        row = df[k]
        assert row["answer_class"] == "invalid", k
        assert row["predicted_latitude"] is None and row["predicted_longitude"] is None, k
        assert row["error_type"] == "InvalidCoordinatesError", k
        assert "latitude" in row["error"] and len(row["error"]) < 300, k
    paris = df["k2"]
    assert (paris["answer_class"], paris["predicted_city"]) == ("ok", "Paris")
    assert (paris["predicted_latitude"], paris["predicted_longitude"]) == ("48.85", "2.35")
    quito = df["k5"]
    assert (quito["answer_class"], quito["predicted_latitude"]) == ("ok", "-2.2e-1")
    for row in df.values():
        for col in ("predicted_latitude", "predicted_longitude"):
            assert row[col] is None or not any(t in row[col] for t in ("1e308", "NaN", "999"))


def test_hostile_numbers_end_in_typed_rows_and_resume_reads_them(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, len(HOSTILE))
    srv, url = server(clips=frames, answers=HOSTILE)
    out = tmp_path / "o"
    assert query(url, man, audio, out, "vllm", "m") == 0
    _check_hostile_table(_rows(out))
    with sqlite3.connect(out / "results.sqlite") as c:
        classes = dict(c.execute("SELECT answer_class, COUNT(*) FROM results GROUP BY 1"))
    assert classes == {"invalid": 5, "ok": 2}
    # A resumed run sends nothing and reads every stored reply again.
    n = srv.requests()
    (out / "m.parquet").unlink()
    assert query(url, man, audio, out, "vllm", "m") == 0
    assert srv.requests() == n
    _check_hostile_table(_rows(out))


def test_replies_stored_by_an_older_version_export(server, tmp_path):
    """A store whose hostile replies were classed ``partial`` (as before the
    coordinate reader refused them) exports with today's classes."""
    man, audio, frames = make_clips(tmp_path, len(HOSTILE))
    srv, url = server(clips=frames, answers=HOSTILE)
    out = tmp_path / "o"
    assert query(url, man, audio, out, "vllm", "m") == 0
    with Store(out / "results.sqlite") as st, st.db:
        st.db.execute("UPDATE results SET answer_class = 'partial'")
    n = srv.requests()
    assert query(url, man, audio, out, "vllm", "m") == 0
    assert srv.requests() == n
    _check_hostile_table(_rows(out))


# --- secrets in any spelling ------------------------------------------------


def _disguises(key: str) -> dict[str, str]:
    zw = "\u200b".join(key)
    return {
        "zero_width": zw,
        "word_joiner": "\u2060".join(key),
        "hyphen_u2010": key.replace("-", "\u2010"),
        "minus_u2212": key.replace("-", "\u2212"),
        "full_width": "".join(chr(ord(c) + 0xFEE0) for c in key),
        "base64": base64.b64encode(key.encode()).decode(),
        "base64_unpadded_url": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "base64_inside": base64.b64encode(b"Authorization: Bearer " + key.encode()).decode(),
        "reversed": key[::-1],
        "reversed_upper": key[::-1].upper(),
        "tail_reversed_zw": "\u200b".join(key[-12:][::-1]),
    }


def _leaks(blob: str, key: str) -> list[str]:
    """The disguised forms of ``key`` still readable in ``blob``."""
    normal = normalize_text(blob)[0].lower()
    found = [f for f in (key.lower(), key[-12:].lower()) if f in normal or f[::-1] in normal]
    raw = key.encode()
    for k in range(3):  # every alignment inside a longer encoded text
        enc = base64.b64encode(b"\0" * k + raw).decode()
        core = enc[-(-8 * k // 6) : (8 * (k + len(raw))) // 6]
        for form in (core, core.translate(str.maketrans("+/", "-_"))):
            if form in blob:
                found.append(form)
    return found


@pytest.mark.parametrize("name", sorted(_disguises(KEY)))
def test_redact_masks_every_spelling(name):
    text = f"my key is {_disguises(KEY)[name]} ok"
    masked = redact(text, KEY)
    assert masked is not None and masked.startswith("my key is ") and masked.endswith(" ok")
    assert "***" in masked and not _leaks(masked, KEY), masked


def test_redact_leaves_other_text_alone():
    text = "Paris \u2010 48.85\u200b N, \uff21\uff22\uff23, c2stdGVzdA== reversed tset-ks"
    assert redact(text, KEY) == text


def test_disguised_key_echoed_by_the_model_is_never_stored(server, tmp_path):
    forms = _disguises(KEY)
    answers = {f"k{i}": json.dumps({"city": "Paris", "latitude": 48.85, "longitude": 2.35,
                                    "reason": f"the key: {form}"})
               for i, form in enumerate(forms.values())}  # fmt: skip
    man, audio, frames = make_clips(tmp_path, len(forms))
    _, url = server(clips=frames, answers=answers)
    out = tmp_path / "o"
    assert query(url, man, audio, out, "openai", "gpt-4o-audio-preview") == 0
    df = table(out, "gpt-4o-audio-preview")
    assert len(df) == len(forms) and (df["answer_class"] == "ok").all()
    assert df["model_output"].str.contains(r"\*\*\*", regex=True).all()
    blobs = [p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file()]
    blobs += [df.to_csv()]
    for b in blobs:
        assert not _leaks(b, KEY)
    # The sqlite file may hold pages in any encoding: check its text values too.
    with sqlite3.connect(out / "results.sqlite") as c:
        for (text,) in c.execute("SELECT raw_text FROM results"):
            assert "***" in text and not _leaks(text, KEY), text


def test_judge_replies_with_hostile_numbers_are_typed():
    from agl_fast.alm.judges import first_json_object, validate_scores

    assert validate_scores({"Music": 10**400}, ["Music"])[2] == "out_of_range"
    assert validate_scores({"Music": "1e-05"}, ["Music"])[0] == {"Music": 0.00001}
    big = first_json_object('{"Music": ' + "9" * 5000 + "}")
    assert validate_scores(big, ["Music"])[2] == "out_of_range"
    deep = '{"Music": 0.5, "x": ' + "[" * 5000 + "]" * 5000 + "}"
    assert validate_scores(first_json_object(deep), ["Music"])[2] in ("no_json", "ok")
