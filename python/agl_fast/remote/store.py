"""The SQLite result store: one row per request identity, committed per answer.

The identity (``cache_key``) is the SHA-256 of provider, model, prompt hash,
input (audio content or text) hash and parameters; the API key never enters
it. ``answer_class`` is one of ``ok``, ``partial``, ``invalid``, ``refusal``,
``blocked``, ``unparseable`` (the model answered) or ``error`` (no answer). Errors are
stored with ``answer_class = 'error'`` and never count as done when
``--rerun-failed`` asks for them again; transient errors left after the last
retry are re-sent by the next run in any case.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..exceptions import ParameterError
from .redact import redact

_log = logging.getLogger("agl_fast.alm")

ANSWER_CLASSES = ("ok", "partial", "invalid", "refusal", "blocked", "unparseable", "error")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    cache_key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_id TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    params TEXT NOT NULL,
    answer_class TEXT NOT NULL,
    retryable INTEGER NOT NULL DEFAULT 0,
    raw_text TEXT,
    reasoning TEXT,
    finish_reason TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    audio_tokens INTEGER,
    audio_seconds_sent REAL,
    audio_seconds_original REAL,
    truncated INTEGER,
    cost_usd REAL,
    latency_s REAL,
    attempts INTEGER,
    http_status INTEGER,
    error TEXT,
    created_at REAL NOT NULL,
    error_type TEXT
);
"""

COLUMNS = (
    "cache_key", "provider", "model", "prompt_id", "prompt_hash", "input_hash", "params",
    "answer_class", "retryable", "raw_text", "reasoning", "finish_reason", "prompt_tokens",
    "completion_tokens", "audio_tokens", "audio_seconds_sent", "audio_seconds_original",
    "truncated", "cost_usd", "latency_s", "attempts", "http_status", "error", "created_at",
    "error_type",
)  # fmt: skip
INT_COLUMNS = frozenset({"retryable", "prompt_tokens", "completion_tokens", "audio_tokens",
                         "truncated", "attempts", "http_status"})  # fmt: skip
REAL_COLUMNS = frozenset({"audio_seconds_sent", "audio_seconds_original", "cost_usd",
                          "latency_s", "created_at"})  # fmt: skip
MAX_STORED_INT = 10**12
"""Integers outside ``[0, MAX_STORED_INT]`` are never stored (nor exported)."""


def clean_int(v: Any) -> int | None:
    """``v`` if it is an integer in ``[0, MAX_STORED_INT]`` (a bool counts as 0/1), else None."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int) and 0 <= v <= MAX_STORED_INT:
        return v
    return None


def clean_real(v: Any) -> float | None:
    """``v`` as a finite float, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def clean_text(v: Any) -> str | None:
    """``v`` if it is a string (or bytes, decoded), else None."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v if isinstance(v, str) else None


def canonical_params(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


def cache_key(
    provider: str, model: str, prompt_hash: str, input_hash: str, params: dict[str, Any]
) -> str:
    """The request identity; the same inputs always give the same key."""
    blob = "\x1f".join((provider, model, prompt_hash, input_hash, canonical_params(params)))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Store:
    """A SQLite file in WAL mode; every :meth:`put` is its own transaction."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=30.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        have = {r[1] for r in self.db.execute("PRAGMA table_info(results)")}
        if "error_type" not in have:  # a store written before the column existed
            with self.db:
                self.db.execute("ALTER TABLE results ADD COLUMN error_type TEXT")
        self.secrets: list[str] = []

    def add_secret(self, secret: str | None) -> None:
        """Mask ``secret`` (any case, stripped) in every text this store writes."""
        if secret and secret.strip():
            self.secrets.append(secret)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> dict[str, Any] | None:
        cur = self.db.execute(
            f"SELECT {', '.join(COLUMNS)} FROM results WHERE cache_key = ?", (key,)
        )
        row = cur.fetchone()
        return None if row is None else dict(zip(COLUMNS, row, strict=False))

    def put(self, row: dict[str, Any]) -> None:
        """Store one outcome. Values are checked first: an integer column takes
        integers in ``[0, MAX_STORED_INT]``, a real column finite numbers, a text
        column strings; anything else is stored as NULL (and logged). Every text
        has the secrets of :meth:`add_secret` masked."""
        rec = {c: row.get(c) for c in COLUMNS}
        rec["created_at"] = rec["created_at"] or time.time()
        if rec["answer_class"] not in ANSWER_CLASSES:
            raise ParameterError(f"answer_class must be one of {ANSWER_CLASSES}")
        for c in COLUMNS:
            v = rec[c]
            if v is None:
                continue
            if c in INT_COLUMNS:
                clean: Any = clean_int(v)
            elif c in REAL_COLUMNS:
                clean = clean_real(v)
            else:
                clean = redact(clean_text(v), *self.secrets)
            if clean is None:
                _log.warning("store: %s value of type %s dropped", c, type(v).__name__)
            rec[c] = clean
        with self.db:
            self.db.execute(
                f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in COLUMNS)})",
                [rec[c] for c in COLUMNS],
            )

    def is_done(self, key: str, rerun_failed: bool = False) -> bool:
        """True when ``key`` has an answer that the run should not send again."""
        row = self.db.execute(
            "SELECT answer_class, retryable FROM results WHERE cache_key = ?", (key,)
        ).fetchone()
        if row is None:
            return False
        cls, retryable = row
        if cls != "error":
            return True
        return not (rerun_failed or retryable)

    def spent(self, keys: list[str] | None = None) -> float:
        """Total recorded cost (of ``keys`` if given)."""
        if keys is None:
            v = self.db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM results").fetchone()[0]
            return float(v)
        total = 0.0
        for k in keys:
            r = self.get(k)
            total += float((r or {}).get("cost_usd") or 0.0)
        return total
