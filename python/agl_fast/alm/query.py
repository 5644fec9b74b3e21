"""Benchmark queries: manifest -> jobs -> engine -> one Parquet row per clip.

The output table (``<model>.parquet``, ``/`` in the model id written ``__``)
has the prediction columns that :func:`agl_fast.evaluate.readers.read_predictions`
reads (``question_id``, ``predicted_*`` as the model wrote them, as text,
``model_output``, ``finish_reason``) plus the run's bookkeeping: see
:data:`OUTPUT_SCHEMA`. An answer whose coordinates are numbers that are not
finite or out of range (``invalid``) has no ``predicted_latitude`` and
``predicted_longitude``; its ``error`` says why and its ``error_type`` is
``InvalidCoordinatesError``. Every stored reply is read again on export by
:func:`~agl_fast.alm.parse.parse_answer`, which never raises, so a store
holding any reply exports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .. import manifest
from ..exceptions import InvalidCoordinatesError, ParameterError
from ..remote.redact import redact
from ..remote.store import Store, cache_key, clean_int, clean_real, clean_text
from .audio import file_hash
from .cost import estimate_tokens
from .parse import parse_answer
from .protocol import Reply
from .runner import Engine, Job

OUTPUT_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("predicted_city", pa.string()),
        ("predicted_country", pa.string()),
        ("predicted_continent", pa.string()),
        ("predicted_latitude", pa.string()),
        ("predicted_longitude", pa.string()),
        ("model_output", pa.string()),
        ("finish_reason", pa.string()),
        ("answer_class", pa.string()),
        ("reason", pa.string()),
        ("provider", pa.string()),
        ("model", pa.string()),
        ("prompt_id", pa.string()),
        ("prompt_hash", pa.string()),
        ("params", pa.string()),
        ("audio_hash", pa.string()),
        ("audio_seconds_original", pa.float64()),
        ("audio_seconds_sent", pa.float64()),
        ("truncated", pa.bool_()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("audio_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("latency_s", pa.float64()),
        ("attempts", pa.int64()),
        ("error", pa.string()),
        ("error_type", pa.string()),
    ]
)


@dataclass
class Clip:
    key: str
    path: Path
    seconds: float | None = None


def read_manifest(
    path: str | Path, audio_dir: str | Path | None, *, strict: bool = False
) -> tuple[list[Clip], list[str]]:
    """Clips of a manifest (CSV or Parquet) whose audio file exists.

    The table is read by :func:`agl_fast.manifest.read_manifest` (a ``key``
    column or an alias, a path column of
    :data:`agl_fast.manifest.PATH_ALIASES`), each clip's file found by
    :func:`agl_fast.manifest.resolve_audio` (by key first, then by the path
    cell against ``audio_dir``; ``strict`` refuses two keys on one file).
    ``mp3seconds`` or ``duration`` feeds the cost estimate.
    AGL1K's ``geoLocalization_schema.csv`` and the ``curated.parquet`` of
    ``agl-fast curate`` both work as they are. Returns the clips and the keys
    whose file is missing.
    """
    table = manifest.read_manifest(path)
    if manifest.path_column(table) is None:
        raise ParameterError(
            f"{path}: manifest needs a key column {manifest.KEY_ALIASES} and a file column "
            f"{manifest.PATH_ALIASES}, got {table.column_names}"
        )
    files = manifest.audio_paths(table, audio_dir, strict=strict)
    keys = table.column(manifest.KEY).to_pylist()
    scol = next((c for c in ("mp3seconds", "duration") if c in table.column_names), None)
    secs = table.column(scol).to_pylist() if scol else [None] * table.num_rows
    clips, missing = [], []
    for key, f, s in zip(keys, files, secs, strict=True):
        if f is None or not f.is_file():
            missing.append(key)
            continue
        try:
            sv = None if s is None else float(s)
        except (TypeError, ValueError):
            sv = None
        clips.append(Clip(key, f, sv))
    return clips, missing


def _class_of(status: str) -> str:
    """The stored class of a parser status (an empty answer counts as blocked)."""
    return "blocked" if status == "empty" else status


def answer_class(reply: Reply) -> str:
    """``ok``/``partial``/``invalid``/``refusal``/``blocked``/``unparseable``
    from the parser's status (an empty answer counts as blocked)."""
    return _class_of(parse_answer(reply.text, reply.finish_reason).status)


def _duration(clip: Clip) -> float:
    if clip.seconds is not None:
        return clip.seconds
    import soundfile as sf

    try:
        return float(sf.info(str(clip.path)).duration)
    except Exception:
        return 0.0


def build_jobs(
    clips: list[Clip],
    provider: str,
    model: str,
    prompt: str,
    prompt_hash: str,
    params: dict[str, Any],
    audio_tps: float,
    max_seconds: float | None,
) -> list[Job]:
    """One job per clip, keyed on provider, model, prompt, audio content and parameters."""
    jobs = []
    for c in clips:
        h = file_hash(c.path)
        secs = _duration(c)
        if max_seconds is not None:
            secs = min(secs, max_seconds)
        pt, at = estimate_tokens(prompt, secs, audio_tps)
        jobs.append(
            Job(
                key=c.key,
                cache_key=cache_key(provider, model, prompt_hash, h, params),
                prompt=prompt,
                input_hash=h,
                audio_path=c.path,
                audio_seconds=secs,
                est_prompt_tokens=pt,
                est_audio_tokens=at,
            )
        )
    return jobs


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    return str(v)


def export(engine: Engine, jobs: list[Job], path: str | Path) -> pa.Table:
    """Write one row per job that has a stored outcome (answered or failed)."""
    cols: dict[str, list[Any]] = {f.name: [] for f in OUTPUT_SCHEMA}
    for j in jobs:
        r = engine.store.get(j.cache_key)
        if r is None:
            continue
        # Rows are validated when stored; stores written by older versions may
        # hold anything, so every value is checked again on its way out.
        raw_text = clean_text(r["raw_text"])
        finish = clean_text(r["finish_reason"])
        cls, error, error_type = clean_text(r["answer_class"]), r["error"], r["error_type"]
        fields: dict[str, Any] = {}
        reason = None
        if cls != "error":
            # The class is the current parser's, so a store written by an
            # older version gets today's reading of its replies.
            parsed = parse_answer(raw_text, finish)
            fields, reason, cls = parsed.fields, parsed.reason, _class_of(parsed.status)
            if parsed.status == "invalid":
                fields = {k: v for k, v in fields.items() if k not in ("latitude", "longitude")}
                error, error_type = parsed.error, InvalidCoordinatesError.__name__
        tr = clean_int(r["truncated"])
        vals = {
            "question_id": j.key,
            "predicted_city": _text(fields.get("city")),
            "predicted_country": _text(fields.get("country")),
            "predicted_continent": _text(fields.get("continent")),
            "predicted_latitude": _text(fields.get("latitude")),
            "predicted_longitude": _text(fields.get("longitude")),
            "model_output": raw_text,
            "finish_reason": finish,
            "answer_class": cls,
            "reason": reason,
            "provider": clean_text(r["provider"]),
            "model": clean_text(r["model"]),
            "prompt_id": clean_text(r["prompt_id"]),
            "prompt_hash": clean_text(r["prompt_hash"]),
            "params": clean_text(r["params"]),
            "audio_hash": clean_text(r["input_hash"]),
            "audio_seconds_original": clean_real(r["audio_seconds_original"]),
            "audio_seconds_sent": clean_real(r["audio_seconds_sent"]),
            "truncated": None if tr is None else bool(tr),
            "prompt_tokens": clean_int(r["prompt_tokens"]),
            "completion_tokens": clean_int(r["completion_tokens"]),
            "audio_tokens": clean_int(r["audio_tokens"]),
            "cost_usd": clean_real(r["cost_usd"]),
            "latency_s": clean_real(r["latency_s"]),
            "attempts": clean_int(r["attempts"]),
            "error": clean_text(error),
            "error_type": clean_text(error_type),
        }
        for k, v in vals.items():
            cols[k].append(v)
    table = pa.Table.from_pydict(cols, schema=OUTPUT_SCHEMA)
    pq.write_table(table, str(path))
    return table


def output_name(model: str) -> str:
    """``<model>.parquet`` with path separators made safe."""
    return model.replace("/", "__").replace(":", "_") + ".parquet"


def write_run_info(path: Path, info: dict[str, Any], secrets: tuple[str | None, ...] = ()) -> None:
    """``info`` as JSON, with every secret masked (see :func:`~agl_fast.remote.redact.redact`)."""
    text = redact(json.dumps(info, indent=2, default=str), *secrets) or ""
    path.write_text(text, encoding="utf-8")


def open_store(out: Path) -> Store:
    return Store(out / "results.sqlite")
