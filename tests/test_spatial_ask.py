"""``agl-fast spatial ask`` end to end against a loopback model server (real HTTP)."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest

pytest.importorskip("pyroomacoustics")

import pyarrow.parquet as pq
import soundfile as sf

from _alm_server import FakeALM
from agl_fast.cli import main
from agl_fast.commands.spatial_ask import PREAMBLE
from agl_fast.spatial.answers import score_qa
from agl_fast.spatial.dataset import build_dataset, read_qa

KEY = "sk-test-" + "k" * 32


@pytest.fixture(autouse=True)
def api_key(monkeypatch, tmp_path):
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    monkeypatch.setenv("AGL_FAST_KEYS", str(tmp_path / "no-keys.ini"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ask_ds")
    build_dataset(root, 5, seed=5, seconds=0.5, receiver="two_mic", max_sources=2, test_every=1)
    return root


def _question(body: dict) -> str:
    for part in body["messages"][0]["content"]:
        if part.get("type") == "text":
            return part["text"].split("Question: ", 1)[-1]
    raise AssertionError("no text part")


def _audio(body: dict) -> np.ndarray:
    for part in body["messages"][0]["content"]:
        if part.get("type") == "input_audio":
            raw = base64.b64decode(part["input_audio"]["data"].split(",", 1)[-1])
            return sf.read(io.BytesIO(raw), dtype="float32", always_2d=True)[0]
    raise AssertionError("no audio part")


def test_ask_scores_a_model_through_the_harness(data, tmp_path, capsys):
    rows = read_qa(data, split="test")
    assert {r["type"] for r in rows} >= {"I", "II"}
    # The model answers every question with its reference answer, except the
    # Yes/No questions, which it always answers "Yes". It tells the scenes
    # apart by the audio it receives (the clips the command wrote).
    scripted = {(r["scene"], r["question"]): "Yes" if r["type"] == "III" else r["answer"]
                for r in rows}  # fmt: skip
    out = tmp_path / "ask"
    channels: list[int] = []
    server = FakeALM(KEY)

    def answer(clip, body):
        y = _audio(body)
        channels.append(y.shape[1])
        scene = next(
            p.stem for p in (out / "audio").glob("*.wav")
            if sf.info(str(p)).frames == len(y)
            and np.array_equal(sf.read(str(p), dtype="float32", always_2d=True)[0], y)
        )  # fmt: skip
        return scripted[(scene, _question(body))]

    server.answer_fn = answer
    url = server.start()
    try:
        args = ["spatial", "ask", "--data", str(data), "--provider", "vllm", "--model", "m",
                "--base-url", url, "--out", str(out), "--no-progress"]  # fmt: skip
        assert main(args) == 0
        assert server.requests() == len(rows)
        assert set(channels) == {2}  # binaural clips, not a down-mix
        table = pq.read_table(out / "answers.parquet").to_pylist()
        assert [t["question"] for t in table] == [r["question"] for r in rows]
        assert all(t["answer_class"] == "ok" for t in table)
        scores = json.loads((out / "scores.json").read_text())
        # Independent of the run: score the answers the model was scripted to give.
        want = score_qa(rows, [scripted[(r["scene"], r["question"])] for r in rows])
        for k, v in want.items():
            if k != "n":
                assert scores[k] == pytest.approx(v), k
        for k in [k for k in scores if k.startswith(("II_doa", "IV_"))]:
            assert scores[k] == 1.0, k
        assert all(scores[k] == 0.0 for k in scores if k.startswith("II_der"))
        n_iii = [r["label"] for r in rows if r["type"] == "III"]
        if n_iii:
            assert scores["III_ba"] == pytest.approx(sum(n_iii) / len(n_iii))
        assert scores["n_failed"] == 0
        # Resumed from the store: nothing is sent again.
        assert main(args) == 0
        assert server.requests() == len(rows)
        # The prompt is the preamble and the question.
        body = server.records[0].body
        text = next(p["text"] for p in body["messages"][0]["content"] if p.get("type") == "text")
        assert text.startswith(PREAMBLE)
    finally:
        server.stop()
    capsys.readouterr()


def test_ask_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    args = ["spatial", "ask", "--data", str(tmp_path), "--provider", "vllm", "--model", "m",
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no qa.jsonl") and err.count("\n") == 1
