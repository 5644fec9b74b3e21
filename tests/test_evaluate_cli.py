"""Readers of every prediction format and the ``evaluate`` subcommand."""

from __future__ import annotations

import csv
import json

import pandas as pd

from agl_fast import evaluate as ev
from agl_fast.cli import main


def test_progress_csv_with_escaped_newlines_and_parquet(tmp_path):
    p = tmp_path / "m_seed_42_progress.csv"
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["question_id", "predicted_latitude", "predicted_longitude", "model_output"])
        w.writerow(["k1", "48.85", "2.35", 'line one\\n```json\\n{"city": "Paris"}\\n```'])
    df, rr = ev.read_predictions(p)
    assert rr.format == "csv" and df["model_output"][0].count("\n") == 3
    assert ev.model_name(p) == "m"
    q = tmp_path / "m.parquet"
    df.to_parquet(q)
    back, _ = ev.read_predictions(q)
    pd.testing.assert_frame_equal(back, df)


def test_cli_agl1k_on_shared_files(tmp_path, capsys, shared_dir):
    d = shared_dir / "agl1k"
    files = [
        d / "qwen25-omni_seed_42_progress_fixed.json",
        d / "gemini-3-pro-preview_seed_42_ABCD.jsonl",
    ]
    rc = main(
        [
            "evaluate",
            *map(str, files),
            "--truth",
            str(d / "geoLocalization_schema.csv"),
            "--mode",
            "agl1k",
            "--out",
            str(tmp_path),
            "--n-boot",
            "50",
            "--figures",
        ]
    )
    assert rc == 0
    tidy = pd.read_parquet(tmp_path / "metrics.parquet")
    assert list(tidy.columns) == [
        "model", "mode", "subset", "metric", "value", "ci_low", "ci_high",
        "agl_fast_version", "input_sha256", "prompt_sha256",
    ]  # fmt: skip
    row = tidy[(tidy.model == "qwen25-omni") & (tidy.subset == "all") & (tidy.metric == "geoscore")]
    assert round(float(row["value"].iloc[0]), 2) == 1317.74
    assert float(row["ci_low"].iloc[0]) < 1317.74 < float(row["ci_high"].iloc[0])
    assert (
        "| qwen25-omni | agl1k | 1442 | 99.9% | 1317.74 |"
        in (tmp_path / "leaderboard.md").read_text()
    )
    log = json.loads((tmp_path / "report.json").read_text())
    assert log["gemini-3-pro-preview"]["join_agl1k"]["n_scored"] == 263
    assert "1317.74" in capsys.readouterr().out
    for png in (
        "error_cdf.agl1k.png",
        "qwen25-omni.agl1k.confusion.png",
        "qwen25-omni.agl1k.map.png",
    ):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_headline_agl1k_with_strict_beside_baselines_and_regions(tmp_path, capsys, shared_dir):
    """Default ``--mode both``: agl1k first (the paper's figures), strict beside;
    ``--baselines`` adds RANDOM and the B.7 rows; regional tables carry CIs."""
    d = shared_dir / "agl1k"
    rc = main(["evaluate", str(d / "qwen25-omni_seed_42_progress_fixed.json"), "--truth",
               str(d / "geoLocalization_schema.csv"), "--out", str(tmp_path), "--n-boot", "30",
               "--baselines"])  # fmt: skip
    assert rc == 0
    board = (tmp_path / "leaderboard.md").read_text()
    assert board.index("## agl1k") < board.index("## strict")
    assert "| qwen25-omni | agl1k | 1442 | 99.9% | 1317.74 | 5476.83 |" in board
    # B.7 as worded: the middle clip after sorting by (latitude, longitude); the
    # densest 10-degree cell's centre; RANDOM uniform in degrees (seed 0)
    assert "| median-location | agl1k | 1444 | 100.0% | 1986.98 | 3579.76 |" in board
    assert "| densest-region | agl1k | 1444 | 100.0% | 1875.53 | 3559.60 |" in board
    assert "| RANDOM | agl1k | 1444 | 100.0% | 144.39 | 9882.90 |" in board
    tidy = pd.read_parquet(tmp_path / "metrics.parquet")
    assert set(tidy["mode"]) == {"agl1k", "strict"}
    cont = pd.read_csv(tmp_path / "qwen25-omni.agl1k.by_continent.csv")
    assert cont["n"].sum() == 1442 and cont["true_continent"].iloc[0] == "Europe"
    ok = cont[cont["n"] >= 30]
    assert (ok["mean_distance_km_lo"] <= ok["mean_distance_km"]).all()
    assert (ok["mean_distance_km"] <= ok["mean_distance_km_hi"]).all()
    country = pd.read_csv(tmp_path / "qwen25-omni.agl1k.by_country.csv")
    assert country["n"].sum() == 1442 and len(country) > 50


def test_evaluate_typed_errors(tmp_path, capsys):
    bad = tmp_path / "t.csv"
    bad.write_text("key,latitude\nk,1\nk,2\n")
    p = tmp_path / "p.jsonl"
    p.write_text('{"question_id": "k"}\n')
    assert main(["evaluate", str(p), "--truth", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unique" in err


def test_cue_analysis_on_the_released_predictions(tmp_path, shared_dir):
    """Section 4.3's finding on the released answers: language cues are the
    most used in every model's reasoning that has any."""
    d = shared_dir / "agl1k"
    files = [d / "qwen25-omni_seed_42_progress_fixed.json",
             d / "gemini-3-pro-preview_seed_42_ABCD.jsonl",
             d / "gpt-4o-audio-preview_seed_42_ABCD.jsonl"]  # fmt: skip
    rc = main(["evaluate", *map(str, files), "--truth", str(d / "geoLocalization_schema.csv"),
               "--out", str(tmp_path), "--n-boot", "0", "--mode", "agl1k", "--cues",
               "--figures"])  # fmt: skip
    assert rc == 0
    cues = pd.read_csv(tmp_path / "cues.csv")
    n = cues.groupby("model")["n_texts"].first()
    # the released Qwen2.5-Omni file holds no reasoning ("No reasoning provided")
    assert n.to_dict() == {"gemini-3-pro-preview": 261, "gpt-4o-audio-preview": 304,
                           "qwen25-omni": 0}  # fmt: skip
    for model in ("gemini-3-pro-preview", "gpt-4o-audio-preview"):
        part = cues[cues["model"] == model].set_index("cue")["share"]
        assert part.idxmax() == "language" and part["language"] > 0.8
    assert (tmp_path / "cues.png").read_bytes()[:4] == b"\x89PNG"


def test_cue_rules_are_whole_words():
    from agl_fast.evaluate.cues import cues_of

    c = cues_of("I hear French speech, seagulls and the adhan; no music.")
    assert c["language"] and c["animal species"] and c["religion and culture"] and c["music"]
    assert not any(cues_of("Carpets swept; a sword.").values())  # car-, word- inside words
