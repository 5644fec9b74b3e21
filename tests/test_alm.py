"""The ALM query harness against loopback servers (no network)."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

sf = pytest.importorskip("soundfile")
pytest.importorskip("httpx")

from _alm_server import FakeALM, answer_json  # noqa: E402
from agl_fast.alm import cost, judges  # noqa: E402
from agl_fast.alm.providers import CAPABILITIES, make_provider  # noqa: E402
from agl_fast.alm.query import answer_class, build_jobs, export, read_manifest  # noqa: E402
from agl_fast.alm.runner import Engine, Limits  # noqa: E402
from agl_fast.cli import main  # noqa: E402
from agl_fast.exceptions import ParameterError  # noqa: E402
from agl_fast.remote import ratelimit  # noqa: E402
from agl_fast.remote.store import Store  # noqa: E402

KEY = "sk-test-7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c2e"
SR = 16000
FAST = ["--backoff-base", "0.02", "--no-progress", "--timeout", "5", "--breaker-threshold", "50"]


def make_clips(d: Path, n: int) -> tuple[Path, Path, dict[int, str]]:
    """n synthetic WAV clips of distinct lengths, their manifest, frames -> key."""
    audio = d / "audio"
    audio.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    frames = {}
    rows = []
    for i in range(n):
        m = SR // 4 + 160 * i
        sf.write(audio / f"c{i}.wav", 0.1 * rng.standard_normal(m).astype(np.float32), SR)
        frames[m] = f"k{i}"
        rows.append({"key": f"k{i}", "mp3name": f"c{i}.wav"})
    man = d / "manifest.csv"
    with man.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["key", "mp3name"])
        w.writeheader()
        w.writerows(rows)
    return man, audio, frames


@pytest.fixture
def server():
    servers = []

    def start(**kw):
        s = FakeALM(KEY, **kw)
        url = s.start()
        servers.append(s)
        return s, url

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(autouse=True)
def api_key(monkeypatch, tmp_path):
    for v in ("OPENAI_API_KEY", "VLLM_API_KEY", "GEMINI_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.setenv(v, KEY)
    monkeypatch.setenv("AGL_FAST_KEYS", str(tmp_path / "no-keys.ini"))


def query(url, man, audio, out, provider="vllm", model="qwen-omni", *extra):
    base = url + ("" if provider == "gemini" else "/v1")
    args = ["query", "--provider", provider, "--model", model, "--manifest", str(man),
            "--audio-dir", str(audio), "--out", str(out), "--base-url", base,
            *FAST, *extra]  # fmt: skip
    return main(args)


def table(out, model="qwen-omni"):
    return pq.read_table(out / f"{model.replace('/', '__')}.parquet").to_pandas()


# --- units -----------------------------------------------------------------


def test_retry_after_forms():
    assert ratelimit.parse_retry_after("3") == 3.0
    assert ratelimit.parse_retry_after("13s") == 13.0
    assert ratelimit.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert ratelimit.parse_retry_after("soon") is None
    assert ratelimit.parse_retry_after(None) is None
    assert ratelimit.parse_retry_after("inf") == float("inf")
    assert ratelimit.parse_retry_after("1e999") == float("inf")
    assert ratelimit.parse_retry_after("nan") is None
    assert ratelimit.parse_retry_after("-5") == 0.0
    assert ratelimit.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0


def test_redact_masks_every_case_and_whitespace_variant():
    from agl_fast.remote.redact import redact

    key = "sk-AbCdEf0123456789XyZ"
    text = f"a {key.upper()} b {key.lower()} c {key.swapcase()} d {key} e"
    got = redact(text, f"  {key}\n")
    assert got == "a *** b *** c *** d *** e"
    assert redact(f"tail {key[-12:].lower()}", key) == "tail ***"
    assert redact("abc", "ab") == "abc"  # secrets under 4 characters are not masked


def test_reply_shapes_are_validated():
    from agl_fast.alm.providers import Gemini, OpenAICompatible

    good = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}  # fmt: skip
    r = OpenAICompatible.parse_reply(good)
    assert (r.text, r.finish_reason, r.prompt_tokens, r.completion_tokens) == ("hi", "stop", 3, 1)
    bad = [
        ({"choices": ["x"]}, "not an object"),
        ({"choices": [None]}, "not an object"),
        ({"choices": [{"message": "str"}]}, "message is a str"),
        ({"choices": [{"message": {"content": None}, "finish_reason": 7}]}, "finish_reason"),
        ({**good, "usage": {"prompt_tokens": "ten"}}, "token count"),
        ({**good, "usage": {"completion_tokens": -5}}, "token count"),
        ({**good, "usage": {"prompt_tokens": 1e308}}, "token count"),
        ({**good, "usage": {"prompt_tokens": 10**10}}, "token count"),
        ([1, 2], "response is a list"),
        ("{}", "response is a str"),
    ]
    for body, match in bad:
        with pytest.raises(ValueError, match=match):
            OpenAICompatible.parse_reply(body)
    with pytest.raises(ValueError, match="token count"):
        Gemini.parse_reply({"candidates": [{"content": {"parts": [{"text": "x"}]}}],
                            "usageMetadata": {"promptTokenCount": 1e308}})  # fmt: skip
    with pytest.raises(ValueError, match="part is a NoneType"):
        Gemini.parse_reply({"candidates": [{"content": {"parts": [None]}}]})


def test_backoff_is_bounded_and_jittered():
    import random

    r = random.Random(1)
    d = [ratelimit.backoff_delay(a, 1.0, 8.0, r) for a in range(10) for _ in range(20)]
    assert max(d) <= 8.0 and min(d) >= 0.0
    assert len({round(x, 6) for x in d}) > 100


def test_circuit_breaker_opens_and_half_opens():
    import asyncio

    async def scenario():
        b = ratelimit.CircuitBreaker(threshold=2, cooldown=0.2)
        b.failure()
        assert not b.is_open
        b.failure()
        assert b.is_open
        t0 = time.monotonic()
        await b.wait()  # the probe goes through after the cooldown
        waited = time.monotonic() - t0
        b.failure()  # the probe failed: open again
        assert b.is_open and b.n_opened == 2
        await b.wait()
        b.success()
        assert not b.is_open
        t1 = time.monotonic()
        await b.wait()
        return waited, time.monotonic() - t1

    waited, closed = asyncio.run(scenario())
    assert waited >= 0.19 and closed < 0.05


def test_token_bucket_rate():
    import asyncio

    async def scenario():
        b = ratelimit.TokenBucket(600)  # 10 a second, burst 10
        t0 = time.monotonic()
        for _ in range(25):
            await b.acquire()
        return time.monotonic() - t0

    assert 1.4 <= asyncio.run(scenario()) < 2.5


def test_price_table_and_lookup(tmp_path):
    p = tmp_path / "prices.json"
    p.write_text(json.dumps({"my-model": {"input": 2.0, "output": 8.0, "audio_input": 4.0}}))
    t = cost.load_prices(p)
    pr = cost.lookup("vendor/my-model", "openrouter", t)
    assert pr is not None
    assert pr.cost(1_000_000, 500_000, 400_000) == pytest.approx(0.6 * 2 + 0.4 * 4 + 0.5 * 8)
    assert cost.lookup("google/gemini-2.5-flash-001", "openrouter", t) == t["gemini-2.5-flash"]
    assert cost.lookup("unknown", "openai", t) is None
    assert cost.lookup("unknown", "vllm", t) == cost.FREE
    p.write_text(json.dumps({"m": {"input": -1, "output": 1}}))
    with pytest.raises(ParameterError, match="must not be negative"):
        cost.load_prices(p)


def test_judge_score_validation():
    cats = ["Speech", "Music", "Animal"]
    s, unknown, status = judges.validate_scores(
        judges.first_json_object('```json\n{"speech": 0.8, "Birds": 0.5, "Music": 0.3}\n```'), cats
    )
    assert status == "ok" and unknown == 1
    assert s == {"Speech": 0.8, "Music": 0.3, "Animal": 0.0}
    assert judges.validate_scores({"Speech": 7}, cats)[2] == "out_of_range"
    assert judges.validate_scores({"Speech": "high"}, cats)[2] == "out_of_range"
    assert judges.validate_scores(judges.first_json_object("no json here"), cats)[2] == "no_json"


def test_prepare_truncates_to_duration_and_size(tmp_path, caplog):
    from agl_fast.alm.audio import prepare
    from agl_fast.exceptions import AudioDecodeError

    y = 0.1 * np.random.default_rng(3).standard_normal((SR * 2, 2)).astype(np.float32)
    sf.write(tmp_path / "s.wav", y, SR)
    a = prepare(tmp_path / "s.wav", "wav", SR, max_seconds=1.5)
    assert a.truncated and a.seconds_original == 2.0 and a.seconds_sent == 1.5
    back, sr = sf.read(io.BytesIO(a.data), dtype="float32")
    assert sr == SR and back.ndim == 1 and len(back) == int(1.5 * SR)
    # two 16-bit quantisations (the test file, then the encoder): 2 LSB at most
    np.testing.assert_allclose(back, y[: len(back)].mean(axis=1), atol=2 / 32768 + 1e-6)
    assert caplog.records == []  # a cut asked for is not a warning
    b = prepare(tmp_path / "s.wav", "flac", 8000, max_bytes=20_000)
    assert b.truncated and len(b.b64()) <= 20_000 and b.sample_rate == 8000
    assert "cut to fit the 20000-byte request limit" in caplog.text
    c = prepare(tmp_path / "s.wav", "wav", None)
    assert not c.truncated and c.seconds_sent == 2.0
    with pytest.raises(ParameterError, match="'wav' or 'flac'"):
        prepare(tmp_path / "s.wav", "ogg")
    (tmp_path / "bad.wav").write_bytes(b"not audio at all")
    with pytest.raises(AudioDecodeError, match=r"bad\.wav"):
        prepare(tmp_path / "bad.wav")


def test_keys_from_env_or_private_file(tmp_path, monkeypatch):
    from agl_fast.alm.keys import resolve_key
    from agl_fast.remote.redact import redact

    monkeypatch.delenv("OPENAI_API_KEY")
    ini = tmp_path / "no-keys.ini"
    with pytest.raises(ParameterError, match="OPENAI_API_KEY") as e:
        resolve_key("openai")
    assert KEY not in str(e.value)
    ini.write_text(f"[openai]\napi_key = {KEY}\n")
    ini.chmod(0o644)
    with pytest.raises(ParameterError, match="chmod 600"):
        resolve_key("openai")
    ini.chmod(0o600)
    assert resolve_key("openai") == KEY
    assert resolve_key("vllm") == KEY  # from the environment
    assert redact(f"bad key {KEY} ...{KEY[-12:]}", KEY) == "bad key *** ...***"


def test_truncation_recorded_in_output(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 3)
    srv, url = server(clips=frames)
    out = tmp_path / "o"
    assert query(url, man, audio, out, "vllm", "m", "--max-seconds", "0.26") == 0
    df = table(out, "m").set_index("question_id")
    assert df["truncated"].tolist() == [False, False, True]
    assert df.loc["k2", "audio_seconds_sent"] == pytest.approx(0.26)
    assert df.loc["k2", "audio_seconds_original"] == pytest.approx(0.27)
    assert {r.clip for r in srv.records} == {"k0", "k1"}  # k2 arrives cut to k1's length


def test_manifest_errors(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ParameterError, match="key column"):
        read_manifest(bad, tmp_path)
    with pytest.raises(ParameterError, match="not found"):
        read_manifest(tmp_path / "none.csv", tmp_path)


def test_cli_provider_list_matches_capabilities():
    from agl_fast.alm import cli

    assert set(cli.PROVIDERS) == set(CAPABILITIES)


# --- protocols and faults ----------------------------------------------------


def test_openai_faults_retried_and_classified(server, tmp_path, caplog):
    man, audio, frames = make_clips(tmp_path, 8)
    faults = {
        "k0": ["429"],
        "k1": ["429:1"],
        "k2": ["500", "503"],
        "k3": ["timeout"],
        "k4": ["reset"],
        "k5": ["truncated"],
        "k6": ["fenced"],
        "k7": ["malformed"],
    }
    srv, url = server(clips=frames, faults=faults, timeout_sleep=2.0)
    out = tmp_path / "out"
    assert query(url, man, audio, out, "vllm", "qwen-omni", "--timeout", "0.6") == 0
    df = table(out).set_index("question_id")
    assert len(df) == 8
    cls = df["answer_class"].to_dict()
    assert cls["k7"] == "unparseable"
    assert all(cls[k] == "ok" for k in ("k0", "k1", "k2", "k3", "k4", "k5", "k6"))
    assert df.loc["k6", "predicted_city"] == "Paris"
    assert df.loc["k2", "attempts"] == 3
    assert "k2: attempt 2 of 6 failed" in caplog.text  # each retry is logged
    assert srv.requests("k7") == 1  # an answer, even unparseable, is not re-sent
    for k in ("k0", "k1", "k3", "k4", "k5"):
        assert srv.requests(k) == 2, k
    # Retry-After: 1 honoured (server-side gap between the two attempts)
    r = [x for x in srv.records if x.clip == "k1"]
    assert r[1].t_start - r[0].t_end >= 0.95


def test_permanent_errors_recorded_not_retried_and_rerun(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 3)
    srv, url = server(clips=frames, faults={"k1": ["400"]})
    out = tmp_path / "out"
    assert query(url, man, audio, out) == 1
    df = table(out).set_index("question_id")
    assert df.loc["k1", "answer_class"] == "error" and "HTTP 400" in df.loc["k1", "error"]
    assert df.loc["k1", "predicted_latitude"] != df.loc["k1", "predicted_latitude"]  # null
    assert srv.requests("k1") == 1
    assert query(url, man, audio, out) == 1  # still failed, and not re-sent
    assert srv.requests("k1") == 1  # permanent: a plain rerun does not re-send
    assert srv.requests() == 3
    assert query(url, man, audio, out, "vllm", "qwen-omni", "--rerun-failed") == 0
    assert srv.requests("k1") == 2 and srv.requests() == 4
    assert (table(out)["answer_class"] == "ok").all()


def test_auth_failure_stops_the_run(server, tmp_path, monkeypatch):
    man, audio, frames = make_clips(tmp_path, 6)
    srv, url = server(clips=frames)
    monkeypatch.setenv("VLLM_API_KEY", "sk-wrong-" + "x" * 30)
    out = tmp_path / "out"
    assert query(url, man, audio, out, "vllm", "qwen-omni", "--concurrency", "1") == 4
    assert srv.requests() == 1
    df = table(out)
    assert len(df) == 1 and df["error"].str.contains("401").all()
    assert "x" * 20 not in df["error"].iloc[0]


def test_gemini_inline_file_api_and_blocked(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 4)
    faults = {"k0": ["safety"], "k1": ["prompt_block"], "k2": ["503"]}
    srv, url = server(clips=frames, faults=faults)
    gem = make_provider("gemini", KEY, base_url=url, timeout=5)
    gem.caps = replace(CAPABILITIES["gemini"], max_request_bytes=11_800)  # k3 above: upload
    gem.poll_seconds = 0.01
    clips, _ = read_manifest(man, audio)
    with Store(tmp_path / "g.sqlite") as store:
        jobs = build_jobs(clips, "gemini", "gemini-2.5-flash", "Where?", "h", {}, 32.0, None)
        eng = Engine(gem, "gemini-2.5-flash", store, {}, "p", "h", answer_class,
                     price=cost.DEFAULT_PRICES["gemini-2.5-flash"], progress=False,
                     limits=Limits(backoff_base=0.01))  # fmt: skip
        s = eng.run(jobs)
        df = export(eng, jobs, tmp_path / "g.parquet").to_pandas().set_index("question_id")
    assert s.n_answered == 4 and s.n_failed == 0
    assert df.loc["k0", "answer_class"] == "blocked" and df.loc["k0", "finish_reason"] == "safety"
    assert df.loc["k1", "answer_class"] == "blocked"
    assert df.loc["k2", "answer_class"] == "ok" and srv.requests("k2") == 2
    assert df.loc["k3", "answer_class"] == "ok"
    assert len(srv.files) >= 1 and all(f["polls"] >= 1 for f in srv.files.values())
    inline = next(r for r in srv.records if r.clip == "k0").body["contents"][0]["parts"]
    assert "inline_data" in inline[1]
    # usage with audio tokens priced at the audio rate
    pr = cost.DEFAULT_PRICES["gemini-2.5-flash"]
    assert df.loc["k3", "cost_usd"] == pytest.approx(pr.cost(1000, 100, 800))


def test_dashscope_streaming_and_cut_stream(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames, faults={"k1": ["stream_cut"]})
    out = tmp_path / "out"
    assert query(url, man, audio, out, "dashscope", "qwen3-omni-flash",
                 "--param", "enable_thinking=false") == 0  # fmt: skip
    df = table(out, "qwen3-omni-flash").set_index("question_id")
    assert (df["answer_class"] == "ok").all()
    assert df.loc["k0", "predicted_city"] == "Paris"
    assert srv.requests("k1") == 2
    body = srv.records[0].body
    assert body["stream"] is True and body["enable_thinking"] is False
    assert body["messages"][0]["content"][1]["input_audio"]["data"].startswith("data:;base64,")


# --- concurrency, rate, budget, keys ----------------------------------------


def test_concurrency_limit_server_side(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 9)
    srv, url = server(clips=frames, delay=0.25)
    assert query(url, man, audio, tmp_path / "o", "vllm", "m", "--concurrency", "3") == 0
    assert srv.max_inflight == 3


def test_circuit_breaker_pauses_requests(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames, faults={"*": ["503"] * 4})
    out = tmp_path / "o"
    assert query(url, man, audio, out, "vllm", "m", "--concurrency", "1",
                 "--breaker-threshold", "3", "--breaker-cooldown", "0.5") == 0  # fmt: skip
    starts = sorted(r.t_start for r in srv.records)
    gaps = np.diff(starts)
    # three quick failures open the breaker; the probe after the cooldown fails
    # and opens it again; the next probe succeeds
    assert len(starts) == 6 and max(gaps[:2]) < 0.45
    assert gaps[2] >= 0.45 and gaps[3] >= 0.45
    assert (table(out, "m")["answer_class"] == "ok").all()


def test_request_rate_limit_server_side(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 12)
    srv, url = server(clips=frames)
    assert query(url, man, audio, tmp_path / "o", "vllm", "m",
                 "--concurrency", "8", "--rpm", "300") == 0  # fmt: skip
    starts = sorted(r.t_start for r in srv.records)
    # bucket of 5 tokens refilled at 5/s: at most 10 starts in any 1 s window
    for i, t in enumerate(starts):
        assert sum(1 for u in starts[i:] if u - t < 1.0) <= 10
    assert starts[-1] - starts[0] >= (12 - 5) / 5 - 0.1


def test_budget_stop_keeps_partial_results(server, tmp_path, capfd):
    man, audio, frames = make_clips(tmp_path, 8)
    srv, url = server(clips=frames, usage=(1000, 100))
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"m": {"input": 1.0, "output": 10.0}}))  # $0.002 an answer
    out = tmp_path / "o"
    assert query(url, man, audio, out, "vllm", "m", "--prices", str(prices), "--dry-run") == 0
    assert srv.requests() == 0 and "8 to send" in capfd.readouterr().err
    assert query(url, man, audio, out, "openai", "other-model", "--max-cost", "1") == 2
    assert "needs a price" in capfd.readouterr().err
    code = query(url, man, audio, out, "vllm", "m", "--concurrency", "1", "--prices",
                 str(prices), "--max-cost", "0.0065", "--max-tokens", "100")  # fmt: skip
    assert code == 3
    df = table(out, "m")
    assert 1 <= len(df) < 8 and (df["answer_class"] == "ok").all()
    assert df["cost_usd"].sum() <= 0.0065
    assert srv.requests() == len(df)
    again = ("--prices", str(prices), "--max-tokens", "100")
    assert query(url, man, audio, out, "vllm", "m", *again) == 0
    assert len(table(out, "m")) == 8 and srv.requests() == 8


def test_no_key_in_any_artefact(server, tmp_path, capfd):
    man, audio, frames = make_clips(tmp_path, 3)
    srv, url = server(clips=frames, faults={"k0": ["echo_key:400"], "k1": ["echo_key:503"]})
    out = tmp_path / "o"
    assert query(url, man, audio, out, "openai", "gpt-4o-audio-preview") == 1
    captured = capfd.readouterr()
    assert srv.requests("k1") == 2
    blobs = [captured.out, captured.err]
    blobs += [p.read_bytes().decode("latin-1") for p in out.rglob("*") if p.is_file()]
    blobs += [table(out, "gpt-4o-audio-preview").to_csv()]
    assert blobs and len(list(out.rglob("*"))) >= 3
    for b in blobs:
        assert KEY not in b and KEY[-12:] not in b
    assert "***" in table(out, "gpt-4o-audio-preview").set_index("question_id").loc["k0", "error"]


# --- resume after SIGKILL --------------------------------------------------


def test_resume_after_sigkill_no_loss_no_double_pay(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 8)
    srv, url = server(clips=frames)
    srv.hold_after = 3
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "agl_fast.cli", "query", "--provider", "vllm", "--model", "m",
           "--manifest", str(man), "--audio-dir", str(audio), "--out", str(out),
           "--base-url", url + "/v1", "--concurrency", "2", *FAST]  # fmt: skip
    env = {**os.environ, "VLLM_API_KEY": KEY}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = out / "results.sqlite"
    deadline = time.monotonic() + 30
    n_stored = 0
    while time.monotonic() < deadline:
        held = sum(1 for r in srv.records if r.fault == "held")
        if held == 2 and db.exists():
            with sqlite3.connect(db) as c:
                n_stored = c.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            if n_stored == srv.delivered():
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    n_before = srv.delivered()
    assert n_stored == n_before >= 3 and not (out / "m.parquet").exists()
    srv.hold_after = None
    srv.release.set()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    df = table(out, "m")
    assert sorted(df["question_id"]) == sorted(frames.values())
    assert (df["answer_class"] == "ok").all()
    for k in frames.values():
        assert srv.delivered(k) == 1, k  # every clip answered (and paid) exactly once


# --- judges ----------------------------------------------------------------


def test_judge_averages_valid_judges(server, tmp_path):
    pred = tmp_path / "pred.jsonl"
    with pred.open("w") as fh:
        for k in ("a", "b"):
            out = json.loads(answer_json("Paris", "France", "Europe", 48.8, 2.3))
            out["reason"] = f"I heard French speech and church bells ({k})."
            fh.write(json.dumps({"question_id": k, "model_output": json.dumps(out)}) + "\n")
    cats = tmp_path / "cats.txt"
    cats.write_text("Speech\nBell\nVehicle\n")

    def answer(clip, body):
        model = body["model"]
        text = body["messages"][0]["content"][0]["text"]
        assert "- Speech\n- Bell\n- Vehicle" in text and "church bells" in text
        if model == "j1":
            return '```json\n{"Speech": 0.8, "Bell": 0.4}\n```'
        if model == "j2":
            return '{"speech": 0.6, "Bell": 0.2, "Dog": 0.9}'
        return '{"Speech": 8, "Bell": 4}'  # another scale: invalid

    srv, url = server()
    srv.answer_fn = answer
    out = tmp_path / "j"
    code = main(["judge", str(pred), "--categories", str(cats), "--judge", "vllm:j1",
                 "--judge", "vllm:j2", "--judge", "vllm:j3", "--out", str(out),
                 "--base-url", url + "/v1", *FAST])  # fmt: skip
    assert code == 0
    c = pq.read_table(out / "contributions.parquet").to_pandas()
    assert list(c.columns) == ["key", "category", "contribution", "n_judges"]
    row = c.set_index(["key", "category"])
    assert row.loc[("a", "Speech"), "contribution"] == pytest.approx(0.7)
    assert row.loc[("a", "Bell"), "contribution"] == pytest.approx(0.3)
    assert row.loc[("b", "Vehicle"), "contribution"] == 0.0
    assert (c["n_judges"] == 2).all() and len(c) == 6
    raw = pq.read_table(out / "judge_scores.parquet").to_pandas()
    assert set(raw.loc[raw["judge"] == "vllm:j3", "status"]) == {"out_of_range"}
    n = srv.requests()
    assert main(["judge", str(pred), "--categories", str(cats), "--judge", "vllm:j1",
                 "--out", str(out), "--base-url", url + "/v1", *FAST]) == 0  # fmt: skip
    assert srv.requests() == n  # cached


# --- end to end on the real recordings ---------------------------------------


def test_paper_prompt_end_to_end_real_recordings(server, tmp_path, shared_dir):
    agl = shared_dir / "agl1k"
    truth = agl / "geoLocalization_schema.csv"
    clips, _missing = read_manifest(truth, agl)
    assert sorted(c.key for c in clips) == ["aporee_26839_30948", "aporee_5201_6631"]
    answers = {
        "essaouira": answer_json("Essaouira", "Morocco", "Africa", 31.5085, -9.7595),
        "berlin": answer_json("Berlin", "Germany", "Europe", 52.52, 13.405),
    }

    def answer(clip, body):
        text = body["messages"][0]["content"][0]["text"]
        assert text.startswith("You are an expert audio analyst") and "JSON response now:" in text
        secs = int(clip.split("-")[1]) / 16000
        return answers["essaouira" if secs < 134 else "berlin"]

    srv, url = server()
    srv.answer_fn = answer
    out = tmp_path / "o"
    assert main(["query", "--provider", "openai", "--model", "gpt-4o-audio-preview",
                 "--manifest", str(truth), "--audio-dir", str(agl), "--out", str(out),
                 "--base-url", url + "/v1", *FAST]) == 0  # fmt: skip
    assert srv.requests() == 2
    info = json.loads((out / "run.json").read_text())
    assert info["prompt_id"] == "agl1k-reference/v1" and info["params"]["seed"] == 42
    pred = out / "gpt-4o-audio-preview.parquet"
    ev = tmp_path / "ev"
    assert main(["evaluate", str(pred), "--truth", str(truth), "--mode", "agl1k",
                 "--out", str(ev), "--n-boot", "0"]) == 0  # fmt: skip
    rows = pq.read_table(ev / "gpt-4o-audio-preview.agl1k.rows.parquet").to_pandas()
    rows = rows.set_index("question_id")
    assert len(rows) == 2 and not rows["refused"].any() and rows["continent_ok"].all()
    from geographiclib.geodesic import Geodesic

    for key, lat, lon, true_lat, true_lon in [
        ("aporee_26839_30948", 31.5085, -9.7595, 31.51633429397, -9.766309261322),
        ("aporee_5201_6631", 52.52, 13.405, 52.4965138837, 13.428567946),
    ]:
        ref = Geodesic.WGS84.Inverse(true_lat, true_lon, lat, lon)["s12"] / 1000
        assert rows.loc[key, "distance_km"] == pytest.approx(ref, abs=1e-6)
