"""Evaluation of geo-localisation answers against the AGL1K ground truth.

>>> from agl_fast import evaluate as ev
>>> truth = ev.read_truth("geoLocalization_schema.csv")  # doctest: +SKIP
>>> pred, _ = ev.read_predictions("model_progress_fixed.json")  # doctest: +SKIP
>>> scored, _ = ev.score(pred, truth, mode="agl1k",
...                      aliases_path="agl1k_country_aliases.tsv")  # doctest: +SKIP
>>> ev.table_metrics(scored)["geoscore"]  # doctest: +SKIP
"""

from __future__ import annotations

from .baselines import BASELINES, baseline_predictions
from .metrics import (
    HEADLINE,
    PairedResult,
    bootstrap_ci,
    breakdown,
    continent_confusion,
    paired_bootstrap,
    table_metrics,
)
from .parse import ParsedAnswer, parse_answer
from .readers import ReadReport, model_name, read_predictions, read_truth
from .report import leaderboard, tidy_metrics
from .score import MODES, JoinReport, score

__all__ = [
    "BASELINES",
    "HEADLINE",
    "MODES",
    "JoinReport",
    "PairedResult",
    "ParsedAnswer",
    "ReadReport",
    "baseline_predictions",
    "bootstrap_ci",
    "breakdown",
    "continent_confusion",
    "leaderboard",
    "model_name",
    "paired_bootstrap",
    "parse_answer",
    "read_predictions",
    "read_truth",
    "score",
    "table_metrics",
    "tidy_metrics",
]
