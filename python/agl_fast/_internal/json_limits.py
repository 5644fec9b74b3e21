"""JSON read within documented limits: every failure a ParameterError.

Python's :mod:`json` recurses once per nesting level (a ``RecursionError``
on deep input), turns a 5,000-digit integer into a ``ValueError`` (the
interpreter's digit limit) and reads ``NaN``, ``Infinity`` and ``1e400``
as non-finite floats. Here:

* nesting deeper than :data:`MAX_JSON_DEPTH` levels is refused;
* a number written with more than :data:`MAX_NUMBER_CHARS` characters is
  refused (before it is converted);
* ``NaN``, ``Infinity``, ``-Infinity`` and a float that overflows to an
  infinity are refused.

Each refusal is a :class:`~agl_fast.exceptions.ParameterError` naming the
source.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..exceptions import ParameterError

__all__ = ["MAX_JSON_DEPTH", "MAX_NUMBER_CHARS", "depth", "loads", "raw_decode"]

#: Deepest nesting of arrays and objects accepted.
MAX_JSON_DEPTH = 64
#: Longest number accepted, in characters (sign, digits, point, exponent).
MAX_NUMBER_CHARS = 100


class _NumberError(ParameterError):
    pass


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _NumberError(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _NumberError(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    value = float(text)
    if not math.isfinite(value):
        raise _NumberError(f"{text[:40]} is out of the float range")
    return value


def _constant(text: str) -> float:
    raise _NumberError(f"{text} is not a finite number")


_WS = " \t\n\r"  # JSON's whitespace
_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def depth(value: Any) -> int:
    """Nesting depth of a decoded value (a scalar is 0, ``[]`` is 1), without recursion."""
    best, todo = 0, [(value, 0)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            best = max(best, d + 1)
            todo.extend((x, d + 1) for x in v if isinstance(x, (list, dict)))
    return best


def raw_decode(text: str, pos: int, *, name: str) -> tuple[Any, int]:
    """The JSON value starting at ``pos`` of ``text`` and where it ends
    (:meth:`json.JSONDecoder.raw_decode` within the limits).

    Raises
    ------
    json.JSONDecodeError
        Malformed or incomplete text (the caller may read more).
    ParameterError
        A limit is passed (see the module notes).
    """
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except RecursionError as exc:
        raise ParameterError(f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from exc
    except _NumberError as exc:
        raise ParameterError(f"{name}: bad JSON number: {exc}") from exc
    if depth(value) > MAX_JSON_DEPTH:
        raise ParameterError(f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value, end


def loads(text: str, *, name: str) -> Any:
    """One JSON document within the limits (:func:`json.loads` otherwise).

    Raises
    ------
    ParameterError
        Malformed JSON, trailing data or a passed limit, naming ``name``.
    """
    try:
        value, end = raw_decode(text, len(text) - len(text.lstrip(_WS)), name=name)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"{name}: bad JSON ({exc})") from exc
    if text[end:].strip(_WS):
        raise ParameterError(f"{name}: bad JSON (extra data at character {end})")
    return value
