"""Checks of a provider's JSON reply, field by field: a reply of the wrong
shape is a :class:`~agl_fast.alm.protocol.ReplyShapeError` naming the
field, never a ``KeyError`` or ``TypeError`` deep in the parser."""

from __future__ import annotations

from typing import Any

from .protocol import MAX_TOKEN_COUNT, ReplyShapeError


def _count(v: Any) -> int | None:
    """A token count: None, or an integer in ``[0, MAX_TOKEN_COUNT]``; else ValueError."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKEN_COUNT:
        raise ReplyShapeError(f"token count {str(v)[:40]!r} is not an integer in [0, 1e9]")
    return v


def _opt_str(v: Any, what: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise ReplyShapeError(f"{what} is a {type(v).__name__}, not a string or null")


def _obj(v: Any, what: str) -> dict[str, Any]:
    """``v`` if it is a JSON object, ``{}`` if null/absent; else ValueError."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ReplyShapeError(f"{what} is a {type(v).__name__}, not an object")
    return v


def _entry(v: Any, what: str) -> dict[str, Any]:
    """A list entry that must be a JSON object (null included in what is refused)."""
    if not isinstance(v, dict):
        raise ReplyShapeError(f"{what} is a {type(v).__name__}, not an object")
    return v


def _content(v: Any) -> str | None:
    """A message content: a string, null, or a list of text parts (joined)."""
    if isinstance(v, list):
        out = []
        for p in v:
            p = _entry(p, "content part")
            out.append(_opt_str(p.get("text"), "content part text") or "")
        return "".join(out)
    return _opt_str(v, "content")


def _openai_usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    u = _obj(usage, "usage")
    details = _obj(u.get("prompt_tokens_details"), "usage.prompt_tokens_details")
    return (
        _count(u.get("prompt_tokens")),
        _count(u.get("completion_tokens")),
        _count(details.get("audio_tokens")),
    )
