"""``agl-fast benchmark demo`` end to end: the shipped pool, loopback model
servers in the process, real HTTP through ``query`` and ``judge``, then
``fit``, ``score`` and ``select`` to the paper's speech share.

The expectations are worked out here from the pool file and the servers'
published rule (the reference is right when speech plus music reach half the
clip; a judge scores ``weight x fraction x scale``), not read from the demo's
output.
"""

from __future__ import annotations

import csv
import json
from importlib import resources

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("httpx")
pytest.importorskip("soundfile")

from agl_fast import manifest as mf
from agl_fast.cli import main

# the servers' weights per unit fraction, times the judges' mean scale (1.0 and 0.8)
A = {"human_sounds": 0.81, "music": 0.63, "sounds_of_things": 0.45,
     "environment_and_background": 0.36, "natural_sounds": 0.09, "animal": 0.09}  # fmt: skip
ABAR = {"human_sounds": 0.09, "music": 0.09, "sounds_of_things": 0.18,
        "environment_and_background": 0.18, "natural_sounds": 0.72, "animal": 0.63}  # fmt: skip
P = {"human_sounds", "music", "sounds_of_things", "environment_and_background"}
N = {"natural_sounds", "animal"}


def _pool():
    text = resources.files("agl_fast.localizability").joinpath("data/demo_pool.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def _expected_selection(theta, share):
    rows = _pool()
    lk = {}
    for r in rows:
        lk[r["key"]] = sum(A[c] * float(r[c]) for c in P) - sum(ABAR[c] * float(r[c]) for c in N)
    speech = {r["key"]: float(r["human_sounds"]) >= 0.1 for r in rows}
    sides = {
        side: sorted((k for k in lk if speech[k] == side and lk[k] > theta), key=lambda k: -lk[k])
        for side in (True, False)
    }
    s_av, n_av = len(sides[True]), len(sides[False])
    size = max(
        m
        for m in range(1, s_av + n_av + 1)
        if round(share * m) <= s_av and m - round(share * m) <= n_av
    )
    s = round(share * size)
    return set(sides[True][:s]) | set(sides[False][: size - s]), s, size - s


def test_demo_runs_fit_score_select_offline(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["benchmark", "demo", "--out", str(out)]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    err = captured.err
    assert json.loads(captured.out)["out"] == str(out)  # stdout is the summary alone
    assert (
        "== reference" in err and "== select" in err and "loopback models: http://127.0.0.1:" in err
    )
    rows = _pool()
    assert len(rows) == 48
    # the reference answered every clip over HTTP, right exactly where speech + music >= 0.5
    ref = pd.read_parquet(out / "reference" / "demo-reference.parquet").set_index("question_id")
    assert len(ref) == 48 and (ref["answer_class"] == "ok").all()
    for r in rows:
        got = ref.loc[r["key"]]
        clear = float(r["human_sounds"]) + float(r["music"]) >= 0.5
        assert (abs(float(got["predicted_latitude"]) - float(r["latitude"])) < 1e-3) == clear, r[
            "key"
        ]
    # two judges scored each clip's groups; the fit recovers their weights
    scores = pd.read_parquet(out / "judges" / "judge_scores.parquet")
    assert scores["judge"].nunique() == 2 and (scores["status"] == "ok").all()
    w = json.loads((out / "localizability" / "weights.json").read_text())
    for c, a, abar in zip(w["categories"], w["a"], w["abar"], strict=True):
        assert a == pytest.approx(A[c], abs=1e-9) and abar == pytest.approx(ABAR[c], abs=1e-9), c
    assert set(w["positive"]) == P and set(w["negative"]) == N and w["theta"] == 0.5
    # score and select: the paper's 0.71 speech share, the most localizable of each side
    keys, n_s, n_ns = _expected_selection(0.5, 0.71)
    bench = mf.read_manifest(out / "benchmark.csv")
    assert set(bench.column("key").to_pylist()) == keys
    sp = np.array(mf.speech_mask(bench), dtype=bool)
    assert (int(sp.sum()), int((~sp).sum())) == (n_s, n_ns) and n_ns > 0
    assert tuple(bench.column_names[:20]) == mf.AGL1K_COLUMNS
    summary = json.loads((out / "demo.json").read_text())
    assert summary["speech"] == n_s and summary["nonspeech"] == n_ns


def test_demo_at_the_papers_threshold_reports_the_short_side(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["benchmark", "demo", "--out", str(out), "--theta", "1"]) == 0
    err = capsys.readouterr().err
    assert "the target mix is not met" in err
    assert "non-speech: 0 of the" in err and "--theta below" in err
    bench = mf.read_manifest(out / "benchmark.csv")
    assert bench.num_rows > 0 and all(mf.speech_mask(bench))


def test_a_bad_pool_is_a_one_line_error(tmp_path, capsys):
    for text, needle in [
        ("key,latitude\nk,1\n", "needs the columns"),
        ("key,latitude,longitude,city,country,continent,mp3name\nk,1,2,a,b,c,../x.wav\n",
         "plain file name"),
    ]:  # fmt: skip
        pool = tmp_path / "pool.csv"
        pool.write_text(text)
        code = main(["benchmark", "demo", "--pool", str(pool), "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert code == 2 and needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.wav").exists()
