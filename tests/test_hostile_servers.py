"""Model-API servers that misbehave, against the commands that talk to them.

A real loopback HTTP server (:class:`_alm_server.FakeALM`, in a thread) plays
malformed answers, huge and dripping bodies, stalled headers, ``Retry-After``
storms and a key echoed back in any case. ``agl-fast query``, ``judge``,
``analyze causes`` and ``spatial ask`` run against it as real subprocesses. Each
run must end by itself within a bound, exit 1 (some items failed), hold exactly
one row per item with the expected ``error_type``, and leave no trace of the key
in any file it wrote, its cache or its log (stderr).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("httpx")
sf = pytest.importorskip("soundfile")

from _alm_server import BAD_BODIES, BAD_GEMINI, FakeALM  # noqa: E402
from test_alm import make_clips  # noqa: E402

KEY = "sk-Hostile-9Q2w8E3r7T4y6U5i0O1p"
MODEL = "qwen-omni"
FAST = ["--backoff-base", "0.01", "--no-progress", "--breaker-threshold", "1000",
        "--max-attempts", "3"]  # fmt: skip
#: Runs the command given after the RSS file path, then writes the peak RSS (KiB)
#: of that command (its own children only) to the file.
_WRAP = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[2:]).returncode\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "open(sys.argv[1], 'w').write(str(r))\n"
    "sys.exit(rc)\n"
)


class Run:
    """One finished subprocess: exit status, output, wall time and peak RSS (MiB)."""

    def __init__(self, rc: int, out: str, err: str, seconds: float, rss_mib: float) -> None:
        self.rc, self.out, self.err = rc, out, err
        self.seconds, self.rss_mib = seconds, rss_mib


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    for v in ("OPENAI_API_KEY", "VLLM_API_KEY", "GEMINI_API_KEY", "DASHSCOPE_API_KEY"):
        e[v] = KEY
    e["AGL_FAST_KEYS"] = str(tmp_path / "no-keys.ini")
    e["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    e["MPLCONFIGDIR"] = str(tmp_path / "cache" / "mpl")
    return e


@pytest.fixture
def server():
    started = []

    def start(**kw):
        s = FakeALM(KEY, **kw)
        url = s.start()
        started.append(s)
        return s, url

    yield start
    for s in started:
        s.stop()


def agl(env, tmp_path, *args, bound: float = 60.0) -> Run:
    rss = tmp_path / f"rss-{time.monotonic_ns()}"
    cmd = [sys.executable, "-c", _WRAP, str(rss), sys.executable, "-m", "agl_fast", *args]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=bound)
    dt = time.monotonic() - t0
    return Run(p.returncode, p.stdout, p.stderr, dt, int(rss.read_text()) / 1024)


def assert_no_secret(run: Run, *dirs: Path) -> None:
    """The key, in any case, is nowhere: not in a file (text or binary), nor the log."""
    needles = [KEY.lower().encode(), KEY[-12:].lower().encode()]
    for text in (run.out, run.err):
        assert KEY.lower() not in text.lower()
    n = 0
    for d in dirs:
        for f in (p for p in d.rglob("*") if p.is_file()):
            data = f.read_bytes().lower()
            assert not any(s in data for s in needles), f"key found in {f}"
            n += 1
    assert n > 0


def query(env, tmp_path, url, man, audio, out, *extra, provider="vllm", bound=60.0) -> Run:
    base = url + ("" if provider == "gemini" else "/v1")
    return agl(env, tmp_path, "query", "--provider", provider, "--model", MODEL, "--manifest",
               str(man), "--audio-dir", str(audio), "--out", str(out), "--base-url", base,
               *FAST, *extra, bound=bound)  # fmt: skip


def rows(out: Path) -> dict[str, dict]:
    t = pq.read_table(out / f"{MODEL}.parquet").to_pylist()
    assert len({r["question_id"] for r in t}) == len(t)
    return {r["question_id"]: r for r in t}


# -- malformed shapes -------------------------------------------------------


def per_clip(names: list[str], prefix: str, tries: int = 3) -> dict[str, list[str]]:
    """One fault per clip (clip ``k{i}`` gets ``names[i]``) for every try."""
    return {f"k{i}": [prefix + n] * tries for i, n in enumerate(names)}


@pytest.mark.parametrize(
    ("provider", "names"), [("vllm", sorted(BAD_BODIES)), ("gemini", sorted(BAD_GEMINI))]
)
def test_malformed_bodies_are_error_rows(server, env, tmp_path, provider, names):
    """Each clip gets another malformed 200 answer: one MalformedResponse row each,
    with a short excerpt, and a resume against a healthy server asks for them all."""
    man, audio, frames = make_clips(tmp_path, len(names))
    srv, url = server(clips=frames, faults=per_clip(names, "bad:"))
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10", provider=provider)
    assert r.rc == 1, r.err[-2000:]
    assert "Traceback" not in r.err
    got = rows(out)
    assert set(got) == {f"k{i}" for i in range(len(names))}
    for i, name in enumerate(names):
        row = got[f"k{i}"]
        assert row["answer_class"] == "error", name
        assert row["error_type"] == "MalformedResponse", (name, row["error"])
        assert len(row["error"]) < 600, name
    srv.faults = {}
    n = srv.requests()
    assert query(env, tmp_path, url, man, audio, out, "--timeout", "10", provider=provider).rc == 0
    assert srv.requests() - n == len(names)


@pytest.mark.parametrize("name", ["usage_str_neg", "usage_1e308", "finish_int"])
def test_poisoned_reply_then_healthy_resume_exports(server, env, tmp_path, name):
    """One bad answer (k1 only) neither poisons the store nor stops a healthy resume,
    and the resume asks again for k1 alone."""
    man, audio, frames = make_clips(tmp_path, 3)
    srv, url = server(clips=frames, faults={"k1": [f"bad:{name}"] * 3})
    out = tmp_path / "o"
    assert query(env, tmp_path, url, man, audio, out, "--timeout", "10").rc == 1
    assert rows(out)["k1"]["error_type"] == "MalformedResponse"
    before = {k: srv.requests(k) for k in ("k0", "k1", "k2")}
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10")
    assert r.rc == 0, r.err[-2000:]
    assert srv.requests("k0") == before["k0"] and srv.requests("k2") == before["k2"]
    assert srv.requests("k1") == before["k1"] + 1
    got = rows(out)
    assert [got[k]["answer_class"] for k in ("k0", "k1", "k2")] == ["ok"] * 3
    assert all(0 <= got[k]["prompt_tokens"] <= 10**9 for k in got)


def test_legacy_store_with_bad_values_exports(server, env, tmp_path):
    """A store written before validation (a float token count of 1e308, a list as
    finish reason, text in an integer column) still exports."""
    man, audio, frames = make_clips(tmp_path, 2)
    _, url = server(clips=frames)
    out = tmp_path / "o"
    assert query(env, tmp_path, url, man, audio, out, "--timeout", "10").rc == 0
    db = sqlite3.connect(out / "results.sqlite")
    with db:
        db.execute("UPDATE results SET prompt_tokens = 1e308, finish_reason = x'00ff', "
                   "completion_tokens = 'ten', cost_usd = 'much'")  # fmt: skip
    db.close()
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10")
    assert r.rc == 0, r.err[-2000:]
    got = rows(out)
    assert set(got) == {"k0", "k1"}
    assert all(v["prompt_tokens"] is None and v["completion_tokens"] is None
               for v in got.values())  # fmt: skip


def test_dashscope_stream_of_a_wrong_shape(server, env, tmp_path):
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames)
    srv.always = "bad:choices_str"
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10", provider="dashscope")
    assert r.rc == 1, r.err[-2000:]
    assert {v["error_type"] for v in rows(out).values()} == {"MalformedResponse"}


# -- waiting ----------------------------------------------------------------

_FAR = "Fri, 31 Dec 2100 23:59:59 GMT"


_RETRY_AFTER = {"inf": "RateLimited", "86400": "RateLimited", "1e999": "RateLimited",
                _FAR: "RateLimited", "nan": "HTTPError", "-5": "HTTPError",
                "soon-ish": "HTTPError"}  # fmt: skip


def test_retry_after_storm_is_bounded(server, env, tmp_path):
    """Each clip gets another Retry-After: a wait over the cap is a RateLimited row
    quoting the server's value at once; an unreadable or negative one is plain backoff."""
    values = list(_RETRY_AFTER)
    man, audio, frames = make_clips(tmp_path, len(values))
    srv, url = server(clips=frames, faults=per_clip(values, "429:"))
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10", bound=30)
    assert r.rc == 1 and r.seconds < 30, r.err[-2000:]
    got = rows(out)
    assert set(got) == {f"k{i}" for i in range(len(values))}
    for i, value in enumerate(values):
        row = got[f"k{i}"]
        assert row["error_type"] == _RETRY_AFTER[value], (value, row["error"])
        assert "HTTP 429" in row["error"]
        if _RETRY_AFTER[value] == "RateLimited":
            assert value in row["error"] and "--max-retry-wait" in row["error"]
            assert srv.requests(f"k{i}") == 1
    # the server is fine again: a resume asks again for every clip, once each
    srv.faults = {}
    n = srv.requests()
    assert query(env, tmp_path, url, man, audio, out, "--timeout", "10").rc == 0
    assert srv.requests() == n + len(values)


def test_max_retry_wait_option(server, env, tmp_path):
    """A wait under the default cap but over ``--max-retry-wait`` is refused too."""
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames)
    srv.always = "429:30"
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10", "--max-retry-wait", "1")
    assert r.rc == 1 and r.seconds < 20
    assert {v["error_type"] for v in rows(out).values()} == {"RateLimited"}
    assert srv.requests() == 2


def test_slow_drip_is_bounded_by_the_timeout(server, env, tmp_path):
    """--timeout 3 against one byte every 2 s: each request ends after about 3 s."""
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames)
    srv.always = "drip:2"
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "3", "--max-attempts", "1",
              "--concurrency", "1")  # fmt: skip
    assert r.rc == 1, r.err[-2000:]
    got = rows(out)
    assert {v["error_type"] for v in got.values()} == {"Timeout"}
    for v in got.values():
        assert 2.9 <= v["latency_s"] < 4.5, v["latency_s"]
    assert r.seconds < 20


def test_stalled_headers_are_bounded_by_the_timeout(server, env, tmp_path):
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames)
    srv.always = "stall:20"
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "2", "--max-attempts", "1")
    assert r.rc == 1 and r.seconds < 15, r.err[-2000:]
    got = rows(out)
    assert {v["error_type"] for v in got.values()} == {"Timeout"}
    assert all(v["latency_s"] < 3.5 for v in got.values())


# -- size -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["huge", "huge_chunked"])
def test_huge_body_is_refused_with_flat_memory(server, env, tmp_path, kind):
    """A 100 MB answer: an error row naming the size, and a small peak RSS."""
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames)
    size = 100_000_000
    srv.always = f"{kind}:{size}"
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "30", "--max-attempts", "1")
    assert r.rc == 1, r.err[-2000:]
    got = rows(out)
    assert {v["error_type"] for v in got.values()} == {"ResponseTooLarge"}
    want = str(size) if kind == "huge" else str(16 << 20)
    assert all(want in v["error"] for v in got.values())
    assert r.rss_mib < 300, r.rss_mib


def test_max_response_bytes_option(server, env, tmp_path):
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames)
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10",
              "--max-response-bytes", "50")  # fmt: skip
    assert r.rc == 1
    assert {v["error_type"] for v in rows(out).values()} == {"ResponseTooLarge"}
    assert srv.requests() == 2 * 3  # retried up to --max-attempts, each try capped
    # a resume without the tight cap asks again for the two failed clips, once each
    assert query(env, tmp_path, url, man, audio, out, "--timeout", "10").rc == 0
    assert srv.requests() == 2 * 3 + 2


# -- secrets ----------------------------------------------------------------


def test_key_echo_never_stored(server, env, tmp_path):
    """A server quoting the key in any case, in answers and in error bodies."""
    variants = ["upper", "lower", "swap", "spaced"]
    man, audio, frames = make_clips(tmp_path, len(variants) + 1)
    faults = per_clip(variants, "echo_ok:", tries=1)
    faults[f"k{len(variants)}"] = ["echo_key:400"]
    _, url = server(clips=frames, faults=faults)
    out = tmp_path / "o"
    r = query(env, tmp_path, url, man, audio, out, "--timeout", "10", "-v")
    assert r.rc == 1, r.err[-2000:]
    got = rows(out)
    assert len(got) == len(variants) + 1
    for i in range(len(variants)):
        assert "***" in got[f"k{i}"]["model_output"]
    assert got[f"k{len(variants)}"]["error_type"] == "HTTPError"
    assert_no_secret(r, out, tmp_path / "cache")


# -- the other commands -----------------------------------------------------

_JUDGE_FAULTS = [("bad:choices_null", "MalformedResponse"), ("429:inf", "RateLimited"),
                 ("huge:20000000", "ResponseTooLarge"), ("echo_ok:upper", None)]  # fmt: skip


def _pred(tmp_path: Path) -> Path:
    pred = tmp_path / "pred.jsonl"
    with pred.open("w") as fh:
        for k in ("a", "b"):
            out = {"reason": f"French speech and church bells ({k}).", "city": "Lyon",
                   "country": "France", "continent": "Europe", "latitude": 45.7,
                   "longitude": 4.8}  # fmt: skip
            fh.write(json.dumps({"question_id": k, "model_output": json.dumps(out)}) + "\n")
    return pred


@pytest.mark.parametrize(("fault", "etype"), _JUDGE_FAULTS)
def test_judge_against_a_hostile_server(server, env, tmp_path, fault, etype):
    srv, url = server()
    srv.always = fault
    cats = tmp_path / "cats.txt"
    cats.write_text("Speech\nBell\n")
    out = tmp_path / "j"
    r = agl(env, tmp_path, "judge", str(_pred(tmp_path)), "--categories", str(cats),
            "--judge", "vllm:j1", "--out", str(out), "--base-url", url + "/v1", "--timeout",
            "10", *FAST, bound=30)  # fmt: skip
    # an echoed key is still an answer (one that holds no scores): the run may pass
    assert r.rc == (1 if etype else 0), r.err[-2000:]
    db = sqlite3.connect(out / "judges.sqlite")
    got = db.execute("SELECT answer_class, error_type FROM results").fetchall()
    db.close()
    assert len(got) == 2
    if etype is not None:
        assert got == [("error", etype)] * 2
    assert pq.read_table(out / "judge_scores.parquet").num_rows == 4
    assert_no_secret(r, out, tmp_path / "cache")


@pytest.mark.parametrize(("fault", "etype"), _JUDGE_FAULTS)
def test_analyze_causes_against_a_hostile_server(server, env, tmp_path, fault, etype):
    from test_analyze import write_inputs

    truth, pred = write_inputs(tmp_path)
    srv, url = server()
    srv.always = fault
    out = tmp_path / "c"
    r = agl(env, tmp_path, "analyze", "causes", str(pred), "--truth", str(truth), "--out",
            str(out), "--labeller", f"vllm:labeller@{url}/v1", "--timeout", "10", "--attempts",
            "1", *FAST, bound=30)  # fmt: skip
    assert r.rc == 1, r.err[-2000:]
    import pandas as pd

    labels = pd.read_csv(out / "causes.csv")
    assert labels["key"].is_unique
    asked = labels[labels["source"] != "rule"]
    assert len(asked) == 4 and asked["cause"].isna().all()
    if etype is not None:
        db = sqlite3.connect(out / "labels.sqlite")
        types = {t for (t,) in db.execute("SELECT error_type FROM results")}
        db.close()
        assert types == {etype}
    assert_no_secret(r, out, tmp_path / "cache")


@pytest.fixture(scope="module")
def spatial_data(tmp_path_factory):
    pytest.importorskip("pyroomacoustics")
    from agl_fast.spatial.dataset import build_dataset

    root = tmp_path_factory.mktemp("hostile_ask")
    build_dataset(root, 2, seed=3, seconds=0.5, receiver="two_mic", max_sources=1, test_every=1)
    return root


@pytest.mark.parametrize(("fault", "etype"), _JUDGE_FAULTS)
def test_spatial_ask_against_a_hostile_server(server, env, tmp_path, spatial_data, fault, etype):
    srv, url = server()
    srv.always = fault
    out = tmp_path / "s"
    r = agl(env, tmp_path, "spatial", "ask", "--data", str(spatial_data), "--provider", "vllm",
            "--model", "m", "--base-url", url + "/v1", "--out", str(out), "--limit", "3",
            "--timeout", "10", *FAST, bound=40)  # fmt: skip
    assert r.rc in ((0, 1) if etype is None else (1,)), r.err[-2000:]
    t = pq.read_table(out / "answers.parquet").to_pylist()
    assert len(t) == 3 and len({x["key"] for x in t}) == 3
    if etype is not None:
        assert {x["answer_class"] for x in t} == {"error"}
        db = sqlite3.connect(out / "results.sqlite")
        types = {e for (e,) in db.execute("SELECT error_type FROM results")}
        db.close()
        assert types == {etype}
    assert_no_secret(r, out, tmp_path / "cache")
