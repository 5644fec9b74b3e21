"""Querying audio-language models: a resumable, rate-limited, cost-aware harness.

Modules: :mod:`.providers` (OpenAI-compatible and Gemini protocols, the
capability table), :mod:`.cost`, :mod:`.runner` (the async engine, on the
rate limits and result store of :mod:`agl_fast.remote`), :mod:`.query`
(manifest to Parquet), :mod:`.judges` (contribution judges),
:mod:`.embeddings` (text embeddings), :mod:`.prompts` and :mod:`.keys`. The
command line is ``agl-fast query`` / ``agl-fast judge``.
"""

from __future__ import annotations

from .prompts import DEFAULT_PROMPT, TEMPLATES, PromptTemplate, get_template

__all__ = ["DEFAULT_PROMPT", "TEMPLATES", "PromptTemplate", "get_template"]
