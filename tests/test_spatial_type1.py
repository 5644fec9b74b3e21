"""OWL's Type I protocol: embedding similarity over a class vocabulary, the
embeddings fetched through the query harness (loopback server, real HTTP,
real SQLite store), against the 0/1 match kept as the default."""

from __future__ import annotations

import functools
import json
import math
import sqlite3
import uuid
from typing import Any

import numpy as np
import pytest

from _alm_server import FakeALM
from agl_fast.alm.embeddings import (
    MAX_DIMENSIONS,
    EmbeddingError,
    OpenAIEmbeddings,
    fetch_embeddings,
)
from agl_fast.alm.providers import OpenAICompatible
from agl_fast.alm.runner import Limits
from agl_fast.exceptions import ParameterError
from agl_fast.spatial.answers import score_qa
from agl_fast.spatial.embeddings import embedding_scores, read_class_labels

KEY = "sk-embed-" + "e" * 30
VOCAB = ["Cat", "Dog", "Siren", "Speech"]
# Orthonormal class vectors; answers naming a class embed to its vector.
VECTORS = {name: list(np.eye(4)[i]) for i, name in enumerate(VOCAB)}
VECTORS.update({"A cat.": VECTORS["Cat"], "A dog barks.": VECTORS["Dog"]})


class FakeEmbeddings(FakeALM):
    """The loopback server with an OpenAI ``/v1/embeddings`` route."""

    embed_usage: Any = None  # the usage object sent; None: a well-formed one

    def _openai(self, h: Any, rec: Any, text: str, finish: str) -> None:
        if not rec.path.endswith("/embeddings"):
            return super()._openai(h, rec, text, finish)
        vec = self.answers.get(rec.body.get("input"), "null")
        usage = self.embed_usage or {"prompt_tokens": 3, "total_tokens": 3}
        payload = {"object": "list", "model": rec.body.get("model"),
                   "data": [{"object": "embedding", "index": 0, "embedding": json.loads(vec)}],
                   "usage": usage}  # fmt: skip
        rec.status = 200
        self._send(h, 200, payload)
        rec.delivered = True
        return None


@pytest.fixture
def server():
    fake = FakeEmbeddings(KEY, answers={k: json.dumps(v) for k, v in VECTORS.items()})
    url = fake.start()
    yield fake, url + "/v1"
    fake.stop()


def _rows():
    truth = ["Cat", "Dog", "Siren", "Speech", "Cat"]
    return [{"type": "I", "n_sources": 1, "kind": "detect", "events": [t], "question": "q",
             "answer": t, "target_events": [t], "scene": f"s{i}"}
            for i, t in enumerate(truth)]  # fmt: skip


# Four right answers and one out of the scene (a dog where the scene has a cat).
SAID = ["A cat.", "A dog barks.", "Siren", "Speech", "A dog barks."]


def test_embedding_protocol_against_match_by_hand(server, tmp_path):
    fake, base = server
    embed = functools.partial(fetch_embeddings, model="text-embedding-ada-002",
                              store=tmp_path / "results.sqlite", provider="vllm",
                              base_url=base, key=KEY)  # fmt: skip
    rows = _rows()
    match = score_qa(rows, SAID)
    owl = score_qa(rows, SAID, type1="embedding", vocabulary=VOCAB, embed=embed)
    assert match["I_protocol"] == "match" and owl["I_protocol"] == "embedding"
    # 0/1 match over the scene's names: the out-of-scene answer names nothing.
    # Cat column: rows 0 (score 1, +), then rows 1-4 tied at 0 with one + (row 4):
    # AP = 1/2 * 1 + 1/2 * 2/5 = 0.7; Dog, Siren, Speech: 1.
    assert match["I_map_single"] == pytest.approx((0.7 + 3) / 4, abs=1e-12)
    # OWL: the answer's similarity to every class. Cat: as above, 0.7; Dog:
    # rows 1 (+) and 4 (-) tied at similarity 1 -> AP 1/2; Siren, Speech: 1.
    assert owl["I_map_single"] == pytest.approx((0.7 + 0.5 + 2) / 4, abs=1e-12)
    # The direction OWL's metric predicts: the wrong class named is penalised too.
    assert owl["I_map_single"] < match["I_map_single"]
    sent = fake.requests()
    assert sent == len(set(VOCAB + SAID))  # duplicates are sent once
    # A second scoring is served from the store: nothing is sent again.
    again = score_qa(rows, SAID, type1="embedding", vocabulary=VOCAB, embed=embed)
    assert again == owl and fake.requests() == sent
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        kinds = {r[0] for r in db.execute("SELECT prompt_id FROM results")}
    assert kinds == {"embedding/v1"}
    for r in fake.records:
        assert r.path == "/v1/embeddings" and r.body["model"] == "text-embedding-ada-002"


def test_embeddings_retry_and_fail_typed(server, tmp_path):
    fake, base = server
    fake.faults = {"*": ["500"]}
    got = fetch_embeddings(["Cat", "Dog"], model="m", store=tmp_path / "a.sqlite",
                           provider="vllm", base_url=base, key=KEY,
                           limits=Limits(backoff_base=0.01, concurrency=1))  # fmt: skip
    np.testing.assert_array_equal(got, np.eye(4)[:2])
    assert fetch_embeddings([], model="m", store=tmp_path / "a.sqlite").shape == (0, 0)
    # A text the server has no vector for: a malformed answer, retried, then a typed error.
    with pytest.raises(EmbeddingError, match="1 of 2 texts"):
        fetch_embeddings(["Cat", f"unknown {uuid.uuid4()}"], model="m",
                         store=tmp_path / "b.sqlite", provider="vllm", base_url=base, key=KEY,
                         limits=Limits(max_attempts=2, backoff_base=0.01))  # fmt: skip


def test_embeddings_share_the_chat_providers_reply_checks(server, tmp_path):
    good = {"data": [{"embedding": [1, 0.5]}], "usage": {"prompt_tokens": 2}}
    reply = OpenAIEmbeddings.parse_reply(good)
    assert json.loads(reply.text) == [1.0, 0.5] and reply.prompt_tokens == 2
    hostile = [
        ([], "response is a list"),
        ({"data": {}}, "no data list"),
        ({"data": [None]}, "data\\[0\\] is a NoneType"),
        ({"data": [{"embedding": ["1"]}]}, "not a number"),
        ({"data": [{"embedding": [True]}]}, "not a number"),
        ({"data": [{"embedding": [1e400]}]}, "not finite"),
        ({"data": [{"embedding": [0.0] * (MAX_DIMENSIONS + 1)}]}, "1 to 65536"),
        # Token counts are checked as in chat replies (the cost ledger adds them up).
        ({**good, "usage": {"prompt_tokens": -3}}, "token count"),
        ({**good, "usage": {"prompt_tokens": True}}, "token count"),
        ({**good, "usage": []}, "usage is a list"),
    ]
    for data, match in hostile:
        with pytest.raises(ValueError, match=match):
            OpenAIEmbeddings.parse_reply(data)
    # Over the loopback server: a negative count is a malformed reply, retried,
    # then a typed error; nothing is stored as an answer.
    fake, base = server
    fake.embed_usage = {"prompt_tokens": -3}
    with pytest.raises(EmbeddingError, match="1 of 1 texts"):
        fetch_embeddings(["Cat"], model="m", store=tmp_path / "c.sqlite", provider="vllm",
                         base_url=base, key=KEY,
                         limits=Limits(max_attempts=2, backoff_base=0.01))  # fmt: skip
    assert fake.requests() == 2
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert [r[0] for r in db.execute("SELECT answer_class FROM results")] == ["error"]
    # The chat provider posts to its own endpoint; the embeddings one never streams.
    chat = OpenAICompatible("vllm", KEY, base_url=base)
    emb = OpenAIEmbeddings("vllm", KEY, base_url=base, stream=True)
    assert (chat.endpoint, emb.endpoint, emb.stream) == ("chat/completions", "embeddings", False)


def test_embedding_scores_and_inputs(tmp_path):
    s = embedding_scores(np.array([[3.0, 4.0], [0.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 2.0]]))
    np.testing.assert_allclose(s, [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(ParameterError, match="not in the vocabulary"):
        score_qa(_rows(), SAID, type1="embedding", vocabulary=["Cat"],
                 embed=lambda t: np.ones((len(t), 2)))  # fmt: skip
    with pytest.raises(ParameterError, match="needs a vocabulary"):
        score_qa(_rows(), SAID, type1="embedding")
    with pytest.raises(ParameterError, match="type1 must be"):
        score_qa(_rows(), SAID, type1="cosine")
    csv = tmp_path / "labels.csv"
    csv.write_text('index,mid,display_name\n0,/m/01,"Cat"\n1,/m/02,"Rodents, rats, mice"\n')
    assert read_class_labels(csv) == ["Cat", "Rodents, rats, mice"]
    assert math.isclose(float(np.linalg.norm(VECTORS["Cat"])), 1.0)


def test_spatial_ask_scores_type1_with_owls_protocol(tmp_path, monkeypatch, capsys):
    from agl_fast.cli import main

    monkeypatch.setenv("VLLM_API_KEY", KEY)
    monkeypatch.setenv("AGL_FAST_KEYS", str(tmp_path / "no-keys.ini"))
    data = tmp_path / "data"
    data.mkdir()
    rows = _rows()
    (data / "qa.jsonl").write_text("".join(json.dumps({**r, "split": "test"}) + "\n"
                                           for r in rows))  # fmt: skip
    (data / "scenes.jsonl").write_text("".join(json.dumps({"id": r["scene"]}) + "\n"
                                               for r in rows))  # fmt: skip
    scenes = data / "scenes"
    scenes.mkdir()
    for i, r in enumerate(rows):  # clips of different lengths tell the scenes apart
        np.savez(scenes / f"{r['scene']}.npz", audio=np.zeros((2, 1000 + 10 * i), np.float32))
    labels = tmp_path / "labels.csv"
    labels.write_text("index,mid,display_name\n" + "".join(
        f"{i},/m/{i},{n}\n" for i, n in enumerate(VOCAB)))  # fmt: skip
    fake = FakeEmbeddings(KEY, answers={k: json.dumps(v) for k, v in VECTORS.items()})
    fake.answer_fn = lambda clip, body: SAID[int(clip.split("-")[1]) // 10 - 100] if clip else ""
    url = fake.start() + "/v1"
    try:
        args = ["spatial", "ask", "--data", str(data), "--provider", "vllm", "--model", "m",
                "--base-url", url, "--out", str(tmp_path / "o"), "--no-progress",
                "--sample-rate", "0", "--type1", "embedding", "--class-labels", str(labels),
                "--embedding-provider", "vllm", "--embedding-base-url", url]  # fmt: skip
        assert main(args) == 0
    finally:
        fake.stop()
    scores = json.loads((tmp_path / "o" / "scores.json").read_text())
    assert scores["I_protocol"] == "embedding"
    assert scores["I_map_single"] == pytest.approx((0.7 + 0.5 + 2) / 4, abs=1e-12)
    capsys.readouterr()
