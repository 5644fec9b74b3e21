"""Which answer parser fills the ``predicted_*`` fields that ``agl1k`` mode scores.

``stored`` (the default)
    The fields as the prediction file holds them. agl-fast's ``query``
    stores what its own parser (:func:`agl_fast.alm.parse.parse_answer`)
    read; the released AGL1K files hold what the reference code read.
``agl-fast``
    Every raw answer (``model_output``) is read again by
    :func:`~agl_fast.alm.parse.parse_answer`: code fences, nesting, near-JSON
    repair, key aliases in any case, ``"48.85° N"``. Answers it cannot read
    get no coordinates (a refusal, 10,000 km, in ``agl1k`` mode).
``upstream``
    Every raw answer is read again as the AGL1K reference pipeline read it
    (:func:`~agl_fast.alm.parse.parse_upstream`): the first brace-free
    object, strict JSON, exact keys; anything else becomes ``Unknown`` and
    ``0.0, 0.0``, which its scoring counts as a refusal at 10,000 km. This
    makes a new run comparable, row for row, with the published table.

The two parsers differ only on answers the reference code could not read:
``agl-fast`` rescues some of them (a trailing comma, a brace inside the
reason, ``"lat": "48.85 N"``, a nested object), which the reference scored
as 10,000 km refusals. Rows without a raw answer (an empty or missing
``model_output``, as in the released Qwen2.5-Omni file) keep their stored
fields under every parser; they are counted.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from ..alm.parse import parse_answer, parse_upstream
from ..exceptions import ParameterError

_log = logging.getLogger("agl_fast.evaluate")

PARSERS = ("stored", "agl-fast", "upstream")
DEFAULT_PARSER = "stored"
#: The fields a parser fills, as (prediction column, parsed field).
FIELDS = (
    ("predicted_city", "city"),
    ("predicted_country", "country"),
    ("predicted_continent", "continent"),
    ("predicted_latitude", "latitude"),
    ("predicted_longitude", "longitude"),
)


@dataclass
class ParserReport:
    """What :func:`apply_parser` did: rows read again from their raw answer,
    rows kept as stored (no raw answer), and re-read rows whose fields now
    differ from the stored ones."""

    parser: str
    n_rows: int = 0
    n_reparsed: int = 0
    n_kept_no_raw_answer: int = 0
    n_changed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _raw(v: Any) -> str | None:
    """The raw answer text, or None where the row has none."""
    if not isinstance(v, str) or not v.strip():
        return None
    return v


def _same(a: Any, b: Any) -> bool:
    """Whether a stored and a re-parsed value are the same value (``"1.5"`` and 1.5 are)."""
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    if str(a) == str(b):
        return True
    try:
        return float(str(a)) == float(str(b))
    except ValueError:
        return False


def _fields(parser: str, text: str, finish_reason: Any) -> dict[str, Any]:
    if parser == "upstream":
        return parse_upstream(text)
    fin = finish_reason if isinstance(finish_reason, str) else None
    a = parse_answer(text, fin)
    return {f: getattr(a, f) for _, f in FIELDS}


def apply_parser(pred: pd.DataFrame, parser: str) -> tuple[pd.DataFrame, ParserReport]:
    """The predictions with their ``predicted_*`` fields read by ``parser``.

    Parameters
    ----------
    pred : pandas.DataFrame
        From :func:`~agl_fast.evaluate.read_predictions`.
    parser : {"stored", "agl-fast", "upstream"}
        See the module docs.

    Returns
    -------
    pred : pandas.DataFrame
        A copy (the input when ``parser`` is ``stored``).
    report : ParserReport
    """
    if parser not in PARSERS:
        raise ParameterError(f"parser must be one of {PARSERS}, got {parser!r}")
    report = ParserReport(parser=parser, n_rows=len(pred))
    if parser == "stored" or pred.empty:
        return pred, report
    out = pred.copy()
    for col, _ in FIELDS:
        out[col] = out[col].astype(object)
    finish = out["finish_reason"] if "finish_reason" in out else [None] * len(out)
    for i, (text, fin) in enumerate(zip(out["model_output"], finish, strict=True)):
        raw = _raw(text)
        if raw is None:
            report.n_kept_no_raw_answer += 1
            continue
        report.n_reparsed += 1
        got = _fields(parser, raw, fin)
        changed = False
        for col, f in FIELDS:
            changed |= not _same(out.at[out.index[i], col], got[f])
            out.at[out.index[i], col] = got[f]
        report.n_changed += changed
    return out, report


def log_parser_report(path: str, report: ParserReport) -> None:
    """One log line for a parser that read answers again (nothing for ``stored``)."""
    if report.parser == "stored":
        return
    if report.n_kept_no_raw_answer:
        _log.warning(
            "%s: %d of %d rows have no raw answer (model_output) and keep their stored "
            "fields under --parser %s",
            path, report.n_kept_no_raw_answer, report.n_rows, report.parser,
        )  # fmt: skip
    _log.info(
        "%s: --parser %s read %d answers again; %d differ from the stored fields",
        path, report.parser, report.n_reparsed, report.n_changed,
    )  # fmt: skip
