"""``localizability select`` to a target speech / non-speech mix, and ``fit``
on the released AGL1K CSV's group fractions.

The scored pools are built here with known ``l_k`` and speech fractions, so
every expected selection is counted by hand from the construction.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agl_fast import manifest as mf
from agl_fast.cli import main
from agl_fast.localizability import LocalizabilityWeights


def _pool(path, speech_lk, nonspeech_lk):
    """A scored pool: speech clips ``s000..`` (human_sounds 0.8), non-speech
    ``n000..`` (0.0), with the given ``l_k``."""
    keys = [f"s{i:03d}" for i in range(len(speech_lk))]
    keys += [f"n{i:03d}" for i in range(len(nonspeech_lk))]
    lk = np.concatenate([np.asarray(speech_lk, float), np.asarray(nonspeech_lk, float)])
    n = len(keys)
    table = pa.table(
        {
            "key": keys,
            "path": [f"/audio/{k}.mp3" for k in keys],
            "latitude": np.linspace(-40, 50, n),
            "longitude": np.linspace(-120, 120, n),
            "human_sounds": [0.8] * len(speech_lk) + [0.0] * len(nonspeech_lk),
            "l_k": lk,
        }
    )
    mf.write_manifest(table, path)
    return path


def _select(capsys, pool, out, *flags):
    capsys.readouterr()
    code = main(["localizability", "select", "--manifest", str(pool), "--out", str(out), *flags])
    err = capsys.readouterr().err
    report = json.loads(err.splitlines()[0]) if code == 0 else None
    return code, report, err


def _sides(path):
    keys = mf.read_manifest(path).column("key").to_pylist()
    return [k for k in keys if k[0] == "s"], [k for k in keys if k[0] == "n"]


def test_counts_and_speech_share_reach_the_papers_mix(tmp_path, capsys):
    rng = np.random.default_rng(0)
    # 1,200 localizable speech and 500 localizable non-speech clips, plus
    # 100 of each below the threshold
    s_lk = np.concatenate([1.0 + rng.random(1200) * 3, rng.random(100) * 0.9])
    n_lk = np.concatenate([1.0 + rng.random(500) * 3, rng.random(100) * 0.9])
    pool = _pool(tmp_path / "pool.parquet", s_lk, n_lk)
    out = tmp_path / "b.csv"
    code, rep, err = _select(capsys, pool, out, "--counts", "1025,419")
    assert code == 0 and "not met" not in err
    sp, ns = _sides(out)
    assert (len(sp), len(ns)) == (1025, 419)
    # the most localizable of each side
    lk = dict(
        zip(*(mf.read_manifest(pool).column(c).to_pylist() for c in ("key", "l_k")), strict=True)
    )
    assert min(lk[k] for k in sp) >= np.sort(s_lk)[::-1][1024]
    assert min(lk[k] for k in ns) >= np.sort(n_lk)[::-1][418]
    assert rep["speech"] == 1200 and rep["nonspeech"] == 500 and rep["selected"] == 1444
    assert rep["short"] == {"speech": 0, "nonspeech": 0}
    # a share of 1,444 clips: 0.71 * 1444 = 1025.2 -> 1025 and 419
    code, rep, _ = _select(capsys, pool, out, "--speech-share", "0.71", "--n", "1444")
    assert code == 0 and tuple(map(len, _sides(out))) == (1025, 419)
    # a share alone: the largest benchmark of that mix the pool allows
    # (speech limits it: 1200 / 0.71 = 1690.1 clips, 1200 speech + 490)
    code, rep, err = _select(capsys, pool, out, "--speech-share", "0.71")
    assert code == 0 and tuple(map(len, _sides(out))) == (1200, 490) and "not met" not in err


def test_an_empty_side_reports_counts_and_what_to_change(tmp_path, capsys):
    # 667 localizable speech clips; every non-speech clip is below theta = 1
    s_lk = 1.5 + np.arange(667) / 667
    n_lk = np.linspace(0.2, 0.8, 300)
    pool = _pool(tmp_path / "pool.parquet", s_lk, n_lk)
    out = tmp_path / "b.csv"
    code, rep, err = _select(capsys, pool, out, "--balance", "equal")
    assert code == 0  # it used to stop: "667 speech and 0 non-speech", exit 2
    assert rep["speech"] == 667 and rep["nonspeech"] == 0
    assert rep["short"]["nonspeech"] == rep["target"]["nonspeech"] > 0
    assert "non-speech: 0 of the 667 wanted clips have l_k > 1" in err
    assert "the pool holds only 300 non-speech clips at any l_k" in err
    assert "--counts 667,0" in err
    assert tuple(map(len, _sides(out))) == (667, 0)
    # a reachable target: the threshold the advice names gives it
    code, rep, err = _select(capsys, pool, out, "--counts", "400,200")
    line = next(x for x in err.splitlines() if x.strip().startswith("non-speech:"))
    cut = float(line.split("--theta below ")[1].split()[0])
    assert cut == pytest.approx(np.sort(n_lk)[::-1][199], rel=1e-5)
    code, rep, err = _select(capsys, pool, out, "--counts", "400,200", "--theta", str(cut - 1e-4))
    assert code == 0 and "not met" not in err and tuple(map(len, _sides(out))) == (400, 200)


def test_bad_mix_requests_are_one_line_errors(tmp_path, capsys):
    pool = _pool(tmp_path / "pool.parquet", [2.0, 3.0], [2.0])
    out = tmp_path / "b.csv"
    for flags, needle in [
        (["--counts", "3"], "counts are SPEECH,NONSPEECH"),
        (["--counts", "0,0"], "counts are SPEECH,NONSPEECH"),
        (["--speech-share", "1.5"], "speech share must be in [0, 1]"),
        (["--counts", "1,1", "--n", "4"], "counts fix the size"),
        (["--accepted-only"], "--accepted-only needs --screening"),
        (["--screening", f"sqlite:///{tmp_path / 'none.sqlite'}"], "not found"),
    ]:
        code, _, err = _select(capsys, pool, out, *flags)
        assert code == 2 and needle in err and err.count("\n") == 1, (flags, err)
    assert not out.exists()
    with pytest.raises(SystemExit):
        main(["localizability", "select", "--manifest", str(pool), "--out", str(out),
              "--counts", "1,1", "--speech-share", "0.5"])  # fmt: skip
    # nothing localizable at all: an error that still names the counts
    code, _, err = _select(capsys, pool, out, "--theta", "10")
    assert code == 2 and "0 speech and 0 non-speech" in err


def test_fit_on_the_released_csv_group_fractions(shared_dir, tmp_path, capsys):
    d = shared_dir / "agl1k"
    truth = d / "geoLocalization_schema.csv"
    table = mf.read_manifest(truth)
    groups = [g for g in mf.GROUP_COLUMNS if table.column(g).null_count < table.num_rows]
    t = np.stack([table.column(g).to_numpy(zero_copy_only=False) for g in groups], axis=1)
    keys = table.column("key").to_pylist()
    w = dict(zip(groups, np.linspace(0.1, 1.5, len(groups)), strict=True))
    rows = [(k, g, w[g] * t[i, j]) for i, k in enumerate(keys) for j, g in enumerate(groups)
            if t[i, j] > 0]  # fmt: skip
    pq.write_table(
        pa.table(
            {
                "key": [r[0] for r in rows],
                "category": [r[1] for r in rows],
                "contribution": [r[2] for r in rows],
                "n_judges": pa.array([3] * len(rows), pa.int32()),
            }
        ),
        tmp_path / "c.parquet",
    )
    out = tmp_path / "fit"
    code = main(["localizability", "fit", "--manifest", str(truth), "--reference",
                 str(d / "qwen25-omni_seed_42_progress_fixed.json"), "--contributions",
                 str(tmp_path / "c.parquet"), "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    fitted = LocalizabilityWeights.load(out / "weights.json")
    assert fitted.categories == tuple(groups) and len(groups) == 8
    for g, a in zip(fitted.categories, fitted.a, strict=True):
        assert a == pytest.approx(w[g], rel=1e-9)
    info = json.loads((out / "fit.json").read_text())
    assert info["n_clips"] == 1444 and info["n_reference_errors"] > 1400
