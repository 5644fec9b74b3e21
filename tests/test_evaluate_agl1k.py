"""``agl1k`` mode reproduces the published Qwen2.5-Omni figures (Tables 1, 2)."""

from __future__ import annotations

import pytest

from agl_fast import evaluate as ev

# Printed in the paper (Table 1 and Table 2) for Qwen2.5-Omni.
PUBLISHED = {
    "geoscore": 1317.74,
    "mean_distance_km": 5476.83,
    "continent_acc": 0.45,
    "country_acc": 0.26,
    "city_acc": 0.02,
    "reject_rate": 0.31,
    "acc_1km": 0.00,
    "acc_10km": 0.04,
    "acc_500km": 0.17,
    "speech_distance_km": 4540.06,
    "nonspeech_distance_km": 7777.20,
    "q25_km": 983.09,
    "q50_km": 5952.77,
    "q75_km": 10000.0,
    "distance_Animal_km": 7723.77,
    "distance_Music_km": 5694.41,
    "distance_Nature_km": 7871.21,
    "distance_Things_km": 7854.18,
}


@pytest.fixture(scope="module")
def qwen_metrics(shared_dir):
    d = shared_dir / "agl1k"
    truth = ev.read_truth(d / "geoLocalization_schema.csv")
    pred, report = ev.read_predictions(d / "qwen25-omni_seed_42_progress_fixed.json")
    assert report.n_rows == 1442
    scored, join = ev.score(pred, truth, mode="agl1k", aliases_path=d / "agl1k_country_aliases.tsv")
    assert join.n_scored == 1442 and join.n_unknown_keys == 0
    return ev.table_metrics(scored)


@pytest.mark.parametrize("metric", sorted(PUBLISHED))
def test_published_figure(qwen_metrics, metric):
    assert round(qwen_metrics[metric], 2) == PUBLISHED[metric]


def test_truth_header_defect_repaired(shared_dir):
    truth = ev.read_truth(shared_dir / "agl1k" / "geoLocalization_schema.csv")
    assert len(truth) == 1444
    assert {"channel", "environment_and_background"} <= set(truth.columns)
    assert truth["source_ambiguous_sounds"].notna().all()
