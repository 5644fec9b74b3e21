"""Provenance of an evaluation: what produced a figure, so that it can be cited.

Every output of ``agl-fast evaluate`` (``metrics.csv``/``.parquet``/``.json``,
``leaderboard.md``, ``report.json``) records the agl-fast version, the
SHA-256 of each input file (truth, alias table, prediction files), the
scoring settings, and the SHA-256 of the prompt each model was sent where
the prediction file says it: the ``prompt_hash`` column of agl-fast's
``query`` output, or the ``question`` text of the AGL1K reference files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ..alm.audio import file_hash
from ..alm.prompts import template_for_hash

__all__ = ["describe_file", "model_columns", "prompt_hashes", "provenance", "version"]


def version() -> str:
    """The installed agl-fast version."""
    import agl_fast

    return str(agl_fast.__version__)


def describe_file(path: str | Path) -> dict[str, Any]:
    """``{"name", "sha256", "bytes"}`` of a file (``sha256`` None when it does not exist)."""
    p = Path(path)
    if not p.is_file():
        return {"name": p.name, "sha256": None, "bytes": None}
    return {"name": p.name, "sha256": file_hash(p), "bytes": p.stat().st_size}


def prompt_hashes(pred: pd.DataFrame) -> list[dict[str, Any]]:
    """The prompts a prediction file says its answers were asked with.

    Returns
    -------
    list of dict
        One per distinct prompt, most rows first: ``sha256`` (of the exact
        prompt text), ``n_rows``, ``from`` (``prompt_hash`` column or
        ``question`` text) and ``template`` (the id of the packaged template
        with that text, or None). Empty when the file does not say.
    """
    if "prompt_hash" in pred.columns and pred["prompt_hash"].notna().any():
        counts = pred["prompt_hash"].dropna().astype(str).value_counts()
        source = "prompt_hash"
    elif "question" in pred.columns and pred["question"].notna().any():
        texts = pred["question"].dropna().astype(str)
        counts = texts.map(lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest()).value_counts()
        source = "question"
    else:
        return []
    out = []
    for h, n in counts.items():
        t = template_for_hash(str(h))
        out.append(
            {"sha256": str(h), "n_rows": int(n), "from": source, "template": t.id if t else None}
        )
    return out


def provenance(
    truth: str | Path,
    aliases: str | Path | None,
    predictions: Iterable[tuple[str, str | Path, pd.DataFrame]],
    settings: dict[str, Any],
) -> dict[str, Any]:
    """The provenance record of one evaluation.

    Parameters
    ----------
    truth, aliases : path
        The ground truth and the country alias table (None: not used).
    predictions : iterable of (model, path, frame)
        Each prediction file, its model name and its rows (for the prompt hashes).
    settings : dict
        The scoring settings (mode, parser, bootstrap resamples and seed, ...).
    """
    return {
        "agl_fast_version": version(),
        "truth": describe_file(truth),
        "aliases": describe_file(aliases) if aliases else None,
        "predictions": {
            model: {**describe_file(path), "prompts": prompt_hashes(frame)}
            for model, path, frame in predictions
        },
        "settings": dict(settings),
    }


def model_columns(record: dict[str, Any], model: str) -> dict[str, str]:
    """The provenance columns of one model's rows in the metrics table:
    ``agl_fast_version``, ``input_sha256`` and ``prompt_sha256`` (several
    prompts joined by ``;``; empty where unknown, as for the baselines)."""
    p = record["predictions"].get(model)
    return {
        "agl_fast_version": record["agl_fast_version"],
        "input_sha256": (p or {}).get("sha256") or "",
        "prompt_sha256": ";".join(x["sha256"] for x in (p or {}).get("prompts", [])),
    }
