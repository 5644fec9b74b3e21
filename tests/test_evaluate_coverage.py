"""An honest leaderboard: every output carries n and coverage, runs over
different clips are compared on their common subset as well, predictions
that match no truth key and truth rows with bad coordinates are reported,
never a traceback or a silent wrap."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agl_fast import evaluate as ev
from agl_fast.evaluate.report import coverage_note, leaderboard, tidy_metrics

RELEASED = (
    "gemini-3-pro-preview_seed_42_ABCD.jsonl",
    "gpt-4o-audio-preview_seed_42_ABCD.jsonl",
    "qwen25-omni_seed_42_progress_fixed.json",
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agl_fast.cli", "evaluate", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _answered_keys(path: Path) -> set[str]:
    """Question ids of a released file, read with the json module alone."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        recs = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        recs = json.loads(text)
    return {str(r["question_id"]).strip() for r in recs if r.get("question_id")}


def test_released_runs_carry_n_and_coverage_and_are_compared_on_common_clips(
    shared_dir: Path, tmp_path: Path
) -> None:
    d = shared_dir / "agl1k"
    with (d / "geoLocalization_schema.csv").open(encoding="utf-8", newline="") as fh:
        truth_keys = {r["key"] for r in csv.DictReader(fh)}
    answered = {f.split("_seed_")[0]: _answered_keys(d / f) & truth_keys for f in RELEASED}
    common = set.intersection(*answered.values())
    assert {m: len(k) for m, k in answered.items()} == {
        "gemini-3-pro-preview": 263, "gpt-4o-audio-preview": 304, "qwen25-omni": 1442,
    }  # fmt: skip
    assert len(truth_keys) == 1444 and len(common) == 233

    r = _cli(*(str(d / f) for f in RELEASED), "--truth", str(d / "geoLocalization_schema.csv"),
             "--out", str(tmp_path), "--mode", "agl1k", "--n-boot", "0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    # printed: n and coverage of the truth on every row, the paper's figure unchanged
    for model, keys in answered.items():
        cov = f"{len(keys) / len(truth_keys):.1%}"
        assert f"| {model} | agl1k | {len(keys)} | {cov} |" in r.stdout
        assert f"| {model} | agl1k | {len(common)} | {len(common) / 1444:.1%} |" in r.stdout
    assert "| qwen25-omni | agl1k | 1442 | 99.9% | 1317.74 | 5476.83 |" in r.stdout
    assert "the 233 clips every run answered" in r.stdout
    # warned, once, on stderr
    warn = [line for line in r.stderr.splitlines() if "cover different clips" in line]
    assert len(warn) == 1 and "WARNING" in warn[0]
    assert "gemini-3-pro-preview 263 (18.2%)" in warn[0] and "233 clips" in warn[0]

    tidy = pd.read_parquet(tmp_path / "metrics.parquet")
    wide = tidy.pivot_table(index=["model", "subset"], columns="metric", values="value")
    for model, keys in answered.items():
        assert wide.loc[(model, "all"), "n"] == len(keys)
        assert wide.loc[(model, "all"), "coverage"] == pytest.approx(len(keys) / 1444)
        assert wide.loc[(model, "common"), "n"] == 233
        # the common-subset figures are the model's own rows on those clips
        rows = pd.read_parquet(tmp_path / f"{model}.agl1k.rows.parquet")
        assert set(rows["question_id"]) == keys
        mean_km = np.nanmean(rows[rows["question_id"].isin(common)]["distance_km"])
        assert wide.loc[(model, "common"), "mean_distance_km"] == pytest.approx(mean_km)
    log = json.loads((tmp_path / "report.json").read_text())
    assert log["comparison"] == {
        "same_clips": False, "n_common": 233, "warning": warn[0].split("WARNING: ")[1],
    }  # fmt: skip
    assert log["gpt-4o-audio-preview"]["coverage"]["n"] == 304
    assert log["truth"]["n_excluded_invalid_coordinates"] == 0


def test_runs_over_the_same_clips_get_no_warning(shared_dir: Path, tmp_path: Path) -> None:
    d = shared_dir / "agl1k"
    gemini = d / RELEASED[0]
    twin = tmp_path / "twin_seed_1_ABCD.jsonl"
    twin.write_bytes(gemini.read_bytes())
    r = _cli(str(gemini), str(twin), "--truth", str(d / "geoLocalization_schema.csv"),
             "--out", str(tmp_path / "o"), "--mode", "strict", "--n-boot", "0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "cover different clips" not in r.stderr + r.stdout
    assert "common subset" not in r.stdout
    assert "| twin | strict | 263 | 18.2% |" in r.stdout


def _truth_csv(path: Path) -> Path:
    path.write_text(
        "key,latitude,longitude,city,country,continent\n"
        "paris,48.8566,2.3522,Paris,France,Europe\n"
        "wrapped,200,500,Nowhere,Nowhere,Asia\n"
        "text,east,10,Somewhere,Somewhere,Europe\n"
        "blank,,,Empty,Empty,Africa\n"
        "lima,-12.0464,-77.0428,Lima,Peru,South America\n",
        encoding="utf-8",
    )
    return path


def _answers(path: Path, keys: list[str]) -> Path:
    recs = [{"question_id": k, "predicted_latitude": "48.0", "predicted_longitude": "2.0",
             "predicted_city": "Paris", "predicted_country": "France",
             "predicted_continent": "Europe"} for k in keys]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in recs), encoding="utf-8")
    return path


def test_bad_truth_coordinates_are_a_counted_exclusion(tmp_path: Path) -> None:
    truth = _truth_csv(tmp_path / "t.csv")
    pred = _answers(tmp_path / "m.jsonl", ["paris", "wrapped", "text", "blank", "nowhere"])
    r = _cli(str(pred), "--truth", str(truth), "--out", str(tmp_path / "o"), "--n-boot", "0",
             "--mode", "strict")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "2 scorable clips (3 more excluded: invalid coordinates)" in r.stdout
    # one answer scored (paris) of two scorable clips; nothing scored on a wrapped longitude
    assert "| m | strict | 1 | 50.0% |" in r.stdout
    assert "3 of 5 truth rows have invalid coordinates" in r.stderr
    assert "3 predictions are for truth clips with invalid coordinates" in r.stderr
    assert "1 of 5 predictions match no truth key" in r.stderr
    log = json.loads((tmp_path / "o" / "report.json").read_text())
    assert log["truth"]["n_excluded_invalid_coordinates"] == 3
    assert [e["key"] for e in log["truth"]["excluded"]] == ["wrapped", "text", "blank"]
    assert "200" in log["truth"]["excluded"][0]["reason"]
    join = log["m"]["join_strict"]
    assert (join["n_scored"], join["n_truth_excluded"], join["n_excluded_answered"]) == (1, 3, 3)
    assert (join["n_unknown_keys"], join["n_truth_unanswered"]) == (1, 1)
    rows = pd.read_parquet(tmp_path / "o" / "m.strict.rows.parquet")
    assert list(rows["question_id"]) == ["paris"]


def test_score_never_wraps_a_hand_made_truth(tmp_path: Path) -> None:
    truth = pd.DataFrame({"key": ["ok", "far"], "latitude": [10.0, 95.0],
                          "longitude": [20.0, 380.0], "city": ["A", "B"],
                          "country": ["X", "Y"], "continent": ["Asia", "Asia"]})  # fmt: skip
    pred, _ = ev.read_predictions(_answers(tmp_path / "p.jsonl", ["ok", "far"]))
    for mode in ev.MODES:
        scored, jr = ev.score(pred, truth, mode=mode)
        assert list(scored["question_id"]) == ["ok"]
        assert (jr.n_truth, jr.n_truth_excluded, jr.n_excluded_answered) == (2, 1, 1)
        assert jr.coverage == 1.0


def test_predictions_matching_no_truth_key_are_one_line_exit_2(tmp_path: Path) -> None:
    truth = _truth_csv(tmp_path / "t.csv")
    pred = _answers(tmp_path / "other.jsonl", ["x1", "x2"])
    r = _cli(str(pred), "--truth", str(truth), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if "agl-fast evaluate:" in line]
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "none of its 2 predictions matches a key of the truth" in lines[0]
    assert "'x1'" in lines[0] and "'paris'" in lines[0]
    assert not (tmp_path / "o" / "leaderboard.md").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = _cli(str(empty), "--truth", str(truth), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no predictions to score" in r.stderr


def test_coverage_note_and_a_board_without_any_distance() -> None:
    same, warn = coverage_note({"a": ["k1", "k2"], "b": ["k2", "k1"]}, 4)
    assert same == {"k1", "k2"} and warn == ""
    common, warn = coverage_note({"a": ["k1"], "b": ["k2"]}, 4)
    assert common == set()
    assert warn == (
        "the runs cover different clips: a 1 (25.0%), b 1 (25.0%) of 4; no clip was "
        "answered by every run, so there is no common-subset comparison"
    )
    scored = pd.DataFrame({"question_id": ["k"], "distance_km": [np.nan], "refused": [True],
                           "continent_ok": [np.nan], "country_ok": [np.nan],
                           "city_ok": [np.nan], "human_sounds": [0.0],
                           "mode": ["strict"]})  # fmt: skip
    board = leaderboard(tidy_metrics("m", scored, n_boot=0, truth_sizes={"all": 8}))
    assert "| m | strict | 1 | 12.5% | nan |" in board
