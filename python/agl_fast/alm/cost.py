"""Token and audio accounting from a price table (USD per million tokens).

:data:`DEFAULT_PRICES` holds list prices as published by the providers when
this table was written; check them before relying on an estimate, and
override or extend them with a JSON file (``--prices``)::

    {"my-model": {"input": 0.5, "output": 2.0, "audio_input": 3.0,
                  "audio_tokens_per_second": 25}}

Models are looked up by exact id, then without a ``vendor/`` prefix, then
by the longest table entry the id starts with. Local servers (``vllm``)
cost nothing unless the table names the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from ..exceptions import ParameterError


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens; ``audio_input`` None means audio costs as text input."""

    input: float
    output: float
    audio_input: float | None = None
    audio_tokens_per_second: float | None = None

    def cost(
        self, prompt_tokens: float, completion_tokens: float, audio_tokens: float = 0
    ) -> float:
        audio_tokens = min(audio_tokens, prompt_tokens)
        audio_rate = self.input if self.audio_input is None else self.audio_input
        text_tokens = prompt_tokens - audio_tokens
        return (
            text_tokens * self.input + audio_tokens * audio_rate + completion_tokens * self.output
        ) / 1e6


FREE = Price(0.0, 0.0)

DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o-audio-preview": Price(2.50, 10.00, 40.00, 10.0),
    "gpt-4o-mini-audio-preview": Price(0.15, 0.60, 10.00, 10.0),
    "gemini-2.5-pro": Price(1.25, 10.00, None, 32.0),
    "gemini-2.5-flash": Price(0.30, 2.50, 1.00, 32.0),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.30, 32.0),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.70, 32.0),
    "gemini-2.0-flash-lite": Price(0.075, 0.30, 0.075, 32.0),
}


def load_prices(path: str | Path | None) -> dict[str, Price]:
    """The default table updated with the entries of a JSON file (if given)."""
    table = dict(DEFAULT_PRICES)
    if path is None:
        return table
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParameterError(f"cannot read price table {path}: {exc}") from None
    names = {f.name for f in fields(Price)}
    for model, spec in raw.items():
        if not isinstance(spec, dict) or not {"input", "output"} <= set(spec):
            raise ParameterError(
                f"price of {model!r} must be an object with 'input' and 'output', got {spec!r}"
            )
        bad = set(spec) - names
        if bad:
            raise ParameterError(f"price of {model!r}: unknown fields {sorted(bad)}")
        vals = {k: (None if v is None else float(v)) for k, v in spec.items()}
        if any(v is not None and v < 0 for v in vals.values()):
            raise ParameterError(f"price of {model!r} must not be negative, got {spec!r}")
        table[model] = Price(**vals)  # type: ignore[arg-type]
    return table


def lookup(model: str, provider: str, table: dict[str, Price]) -> Price | None:
    """The price of ``model``; None when unknown (a local ``vllm`` model is free)."""
    for m in (model, model.split("/", 1)[-1], model.removeprefix("models/")):
        if m in table:
            return table[m]
    base = model.split("/", 1)[-1]
    hits = [k for k in table if base.startswith(k)]
    if hits:
        return table[max(hits, key=len)]
    return FREE if provider == "vllm" else None


def estimate_tokens(prompt: str, audio_seconds: float, audio_tps: float) -> tuple[int, int]:
    """(prompt tokens, audio tokens) before sending: ~4 characters a text token."""
    audio = round(audio_seconds * audio_tps)
    return len(prompt) // 4 + 8 + audio, audio
