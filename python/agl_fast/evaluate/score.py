"""Join predictions to the truth and score every row in a named mode."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from ..coords import validate_coordinates
from ..exceptions import ParameterError
from . import agl1k, strict
from .readers import CATEGORY_COLUMNS, COORDINATE_PROBLEM

Mode = Literal["agl1k", "strict"]
MODES = ("agl1k", "strict")


@dataclass
class JoinReport:
    """Counts of the prediction/truth join.

    ``n_truth`` truth clips, of which ``n_truth_excluded`` have invalid
    coordinates (:data:`COORDINATE_PROBLEM`) and are never scored (an answer
    to one of them is counted in ``n_excluded_answered``); ``n_scored`` of
    the others were answered, ``n_truth_unanswered`` were not.
    """

    n_predictions: int
    n_scored: int
    n_unknown_keys: int
    n_truth_unanswered: int
    n_truth: int = 0
    n_truth_excluded: int = 0
    n_excluded_answered: int = 0

    @property
    def coverage(self) -> float:
        """Share of the scorable truth clips that were answered (NaN for none)."""
        usable = self.n_truth - self.n_truth_excluded
        return self.n_scored / usable if usable > 0 else float("nan")


def truth_problems(truth: pd.DataFrame) -> pd.Series:
    """What is wrong with each truth row's coordinates: a reason, or None
    where they are valid numbers in range.

    Uses the table's :data:`COORDINATE_PROBLEM` column when it has one, else
    checks ``latitude`` and ``longitude`` (:func:`agl_fast.coords.validate_coordinates`).
    """
    if COORDINATE_PROBLEM in truth.columns:
        col = truth[COORDINATE_PROBLEM]
        return col.where(col.notna(), None)
    _, _, reasons = validate_coordinates(
        truth["latitude"].tolist(), truth["longitude"].tolist(), missing_ok=False
    )
    return pd.Series(list(reasons), index=truth.index, dtype=object)


def join(pred: pd.DataFrame, truth: pd.DataFrame) -> tuple[pd.DataFrame, JoinReport]:
    """Inner join of predictions (``question_id``) and truth (``key``).

    Predictions for keys not in the truth are dropped and counted; truth
    clips without an answer are counted (they are not scored); truth clips
    with invalid coordinates (:func:`truth_problems`) are left out and
    counted, with the answers given to them.
    """
    keep = [
        "key",
        "latitude",
        "longitude",
        "city",
        "country",
        "continent",
        "human_sounds",
        *CATEGORY_COLUMNS.values(),
    ]
    bad = truth_problems(truth).notna().to_numpy()
    t_all = truth[[c for c in keep if c in truth.columns]]
    t = t_all[~bad]
    p = pred.drop(
        columns=[c for c in keep[1:] if c in pred.columns], errors="ignore"
    ).drop_duplicates("question_id")
    j = p.merge(t, left_on="question_id", right_on="key", how="inner")
    report = JoinReport(
        n_predictions=len(p),
        n_scored=len(j),
        n_unknown_keys=int((~p["question_id"].isin(t_all["key"])).sum()),
        n_truth_unanswered=int((~t["key"].isin(p["question_id"])).sum()),
        n_truth=len(truth),
        n_truth_excluded=int(bad.sum()),
        n_excluded_answered=int(p["question_id"].isin(t_all["key"][bad]).sum()),
    )
    return j.reset_index(drop=True), report


def score(
    pred: pd.DataFrame,
    truth: pd.DataFrame,
    *,
    mode: Mode = "strict",
    aliases_path: str | Path | None = None,
) -> tuple[pd.DataFrame, JoinReport]:
    """Per-row scores in ``mode``, with the truth's subset columns attached.

    Parameters
    ----------
    pred, truth : pandas.DataFrame
        From :func:`~agl_fast.evaluate.read_predictions` and
        :func:`~agl_fast.evaluate.read_truth`.
    mode : {"agl1k", "strict"}
        The published rules or the strict ones (see the module docs).
    aliases_path : path, optional
        The AGL1K country alias table (``agl1k_country_aliases.tsv``).
        Required in ``agl1k`` mode for the published figures; ``strict``
        mode adds its entries to its own alias table.
    """
    if mode not in MODES:
        raise ParameterError(f"mode must be one of {MODES}, got mode={mode!r}")
    joined, report = join(pred, truth)
    aliases = agl1k.load_aliases(str(aliases_path)) if aliases_path else {}
    if mode == "agl1k":
        rows = agl1k.score_rows(joined, aliases)
    else:
        rows = strict.score_rows(joined, aliases)
    for c in ("human_sounds", *CATEGORY_COLUMNS.values()):
        rows[c] = joined[c].to_numpy() if c in joined.columns else float("nan")
    rows["mode"] = mode
    return rows, report
