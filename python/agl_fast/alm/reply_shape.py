"""Checks of a provider's JSON reply, field by field: a reply of the wrong
shape is a :class:`~agl_fast.alm.protocol.ReplyShapeError` naming the
field, never a ``KeyError`` or ``TypeError`` deep in the parser."""

from __future__ import annotations

from typing import Any

from .protocol import MAX_TOKEN_COUNT, ReplyShapeError

__all__ = ["content", "entry", "obj", "openai_usage", "opt_str", "token_count"]


def token_count(v: Any) -> int | None:
    """A token count: None, or an integer in ``[0, MAX_TOKEN_COUNT]``; else ValueError."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKEN_COUNT:
        raise ReplyShapeError(f"token count {str(v)[:40]!r} is not an integer in [0, 1e9]")
    return v


def opt_str(v: Any, what: str) -> str | None:
    """``v`` if it is a string or null; else a :class:`ReplyShapeError` naming ``what``."""
    if v is None or isinstance(v, str):
        return v
    raise ReplyShapeError(f"{what} is a {type(v).__name__}, not a string or null")


def obj(v: Any, what: str) -> dict[str, Any]:
    """``v`` if it is a JSON object, ``{}`` if null/absent; else ValueError."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ReplyShapeError(f"{what} is a {type(v).__name__}, not an object")
    return v


def entry(v: Any, what: str) -> dict[str, Any]:
    """A list entry that must be a JSON object (null included in what is refused)."""
    if not isinstance(v, dict):
        raise ReplyShapeError(f"{what} is a {type(v).__name__}, not an object")
    return v


def content(v: Any) -> str | None:
    """A message content: a string, null, or a list of text parts (joined)."""
    if isinstance(v, list):
        out = []
        for p in v:
            p = entry(p, "content part")
            out.append(opt_str(p.get("text"), "content part text") or "")
        return "".join(out)
    return opt_str(v, "content")


def openai_usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    """An OpenAI ``usage`` object as (prompt, completion, audio) token counts."""
    u = obj(usage, "usage")
    details = obj(u.get("prompt_tokens_details"), "usage.prompt_tokens_details")
    return (
        token_count(u.get("prompt_tokens")),
        token_count(u.get("completion_tokens")),
        token_count(details.get("audio_tokens")),
    )
