"""Answer parsing, as :mod:`agl_fast.alm.parse` defines it (the query
harness owns it; scoring reads the same rules)."""

from __future__ import annotations

from ..alm.parse import (
    BLOCKED_FINISH_REASONS,
    KEY_ALIASES,
    STATUSES,
    UNKNOWN_VALUES,
    ParsedAnswer,
    coerce_coordinate,
    from_fields,
    parse_answer,
)

__all__ = [
    "BLOCKED_FINISH_REASONS",
    "KEY_ALIASES",
    "STATUSES",
    "UNKNOWN_VALUES",
    "ParsedAnswer",
    "coerce_coordinate",
    "from_fields",
    "parse_answer",
]
