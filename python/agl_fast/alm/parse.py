"""Parse a model's raw answer into a location.

The stable entry point is :func:`parse_answer`::

    >>> from agl_fast.alm.parse import parse_answer
    >>> a = parse_answer('Sure!\\n```json\\n{"City": "Paris", "lat": "48.85", "lng": 2.35,}\\n```')
    >>> (a.status, a.city, a.latitude, a.longitude)
    ('ok', 'Paris', 48.85, 2.35)

It reads the JSON objects of the text (inside code fences or not, nested
under another key or not), repairs near-JSON (trailing or missing commas,
single quotes, unquoted keys), maps key aliases in English and Chinese and
reads coordinates with :func:`coerce_coordinate` (``"48.85° N"``, ``"2,35"``,
``"-74.0 W"``, ``4.885e1``). The answer is the object the AGL1K reference
parser reads (:func:`parse_upstream`: the first brace-free object, strict
JSON) when it holds a valid coordinate pair; otherwise the first object, in
order, that holds one; otherwise the first object with location keys. A
block of impossible values placed before the real answer is therefore never
the answer. It classifies the answer:

``ok``           a valid latitude and longitude (:mod:`agl_fast.coords`);
``partial``      a JSON object, but no coordinate pair;
``invalid``      a coordinate that is a number but not finite or out of
                 range (``1e308``, ``NaN``, latitude 200): a typed failure,
                 :attr:`ParsedAnswer.error` says why and both coordinates
                 are None;
``refusal``      the model declined (refusal phrases, or only unknown values);
``blocked``      the provider stopped the answer (``finish_reason`` such as
                 ``content_filter`` or ``safety``);
``empty``        no text at all;
``unparseable``  text without any JSON object.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..coords import parse_coordinate
from ..exceptions import InvalidCoordinatesError
from ..remote.redact import normalize_text

STATUSES = ("ok", "partial", "invalid", "refusal", "blocked", "empty", "unparseable")

KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "city": ("city", "城市", "location", "place", "town", "city_name", "predicted_city", "地点"),
    "country": ("country", "国家", "nation", "country_name", "predicted_country"),
    "continent": ("continent", "大洲", "洲", "region", "predicted_continent"),
    "latitude": ("latitude", "lat", "纬度", "predicted_latitude"),
    "longitude": ("longitude", "lng", "lon", "long", "经度", "predicted_longitude"),
    "reason": ("reason", "reasoning", "explanation", "rationale", "理由", "原因", "analysis"),
}
_ALIAS_TO_FIELD = {a.lower(): f for f, names in KEY_ALIASES.items() for a in names}

BLOCKED_FINISH_REASONS = frozenset(
    {"content_filter", "safety", "blocked", "recitation", "prohibited_content", "spii", "blocklist"}
)
UNKNOWN_VALUES = frozenset(
    {"", "unknown", "none", "null", "n/a", "na", "unable", "cannot", "not specified", "未知", "无"}
)
_REFUSAL_RE = re.compile(
    r"\b(i\s*(?:am|'m)\s*(?:sorry|unable|not able)|i\s*(?:can(?:not|'t)|won't)|"
    r"unable to (?:determine|identify|provide|analy[sz]e|listen|process)|"
    r"cannot (?:determine|identify|provide|analy[sz]e|listen|process)|as an ai)"
    r"|无法|不能确定|抱歉",
    re.IGNORECASE,
)
#: A numeral: sign, digits with an optional ``.`` or ``,`` decimal mark (or
#: only a fraction), and an optional exponent; what Python's ``float`` reads.
_NUM_RE = re.compile(r"[-+]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][-+]?\d+)?")
#: Text that names a non-finite number (JSON's ``NaN``/``Infinity`` included).
_NONFINITE_RE = re.compile(r"[-+]?(?:inf(?:inity)?|nan)", re.IGNORECASE)
#: The reference parser's object: the first ``{...}`` holding no other brace.
_FLAT_OBJECT = re.compile(r"\{[^{}]*\}")
#: Nesting deeper than this makes a JSON block unreadable (not an answer).
MAX_JSON_DEPTH = 64


@dataclass
class ParsedAnswer:
    """What :func:`parse_answer` made of one answer."""

    status: str
    city: str | None = None
    country: str | None = None
    continent: str | None = None
    latitude: float | None = None
    longitude: float | None = None
    reason: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _strip_fences(text: str) -> str:
    return re.sub(r"```[a-zA-Z]*", "\n", text)


def _object_spans(text: str) -> list[tuple[int, int]]:
    """Spans of balanced top-level ``{...}`` (string-aware), in order; an
    unclosed last object runs to the end of the text."""
    spans = []
    depth, start, in_str, esc, quote = 0, -1, False, False, ""
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                in_str = False
            continue
        if ch == '"' or (ch == "'" and depth > 0 and text[i - 1 : i] in (" ", "{", ":", ",", "[")):
            in_str, quote = True, ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    if depth > 0 and start >= 0:
        spans.append((start, len(text)))
    return spans


def _depth(fragment: str) -> int:
    """Bracket nesting of ``fragment`` (strings not considered: an upper bound)."""
    depth = top = 0
    for ch in fragment:
        if ch in "{[":
            depth += 1
            top = max(top, depth)
        elif ch in "}]":
            depth -= 1
    return top


def _load(fragment: str) -> Any:
    """A JSON value from ``fragment``, or None. Numbers stay text (their
    numeral, ``NaN`` and ``Infinity`` included), so no integer-digit limit
    or float overflow applies; :func:`coerce_coordinate` reads them."""
    if _depth(fragment) > MAX_JSON_DEPTH:
        return None
    try:
        return json.loads(fragment, parse_int=str, parse_float=str, parse_constant=str)
    except (ValueError, RecursionError):
        pass
    try:
        import json_repair

        return json_repair.loads(fragment)
    except Exception:
        return None


def _known(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        f = _ALIAS_TO_FIELD.get(str(k).strip().lower())
        if f and f not in out:
            out[f] = v
    return out


def _find_fields(obj: Any, depth: int = 0) -> dict[str, Any] | None:
    """The first dict (depth-first, at most 4 levels) with location keys."""
    if depth > 4:
        return None
    if isinstance(obj, dict):
        known = _known(obj)
        if any(k in known for k in ("city", "country", "latitude", "longitude")):
            return known
        children: list[Any] = list(obj.values())
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    for c in children:
        r = _find_fields(c, depth + 1)
        if r is not None:
            return r
    return None


def _numeral(s: str) -> tuple[float, str] | None:
    """The value of the first numeral of ``s`` and the text around it, or None."""
    m = _NUM_RE.search(s)
    if m is not None:
        x = float(m.group(0).replace(",", "."))
        return x, s[: m.start()] + s[m.end() :]
    if _NONFINITE_RE.fullmatch(s):
        return float(s.lower().replace("infinity", "inf")), ""
    return None


def coerce_coordinate(v: Any, axis: str) -> float | None:
    """The latitude or longitude in ``v``, read exactly, in degrees.

    ``v`` is a number or text: ``48.85``, ``"48.85"``, ``"48,85° N"``,
    ``"74 W"``, ``"4.885e1"``, ``"1e-05"``, ``"\u221233.9"``. The text is
    normalised as :func:`agl_fast.remote.redact.normalize_text` does (NFKC, dash
    variants as ``-``, invisible characters dropped); its first numeral is
    read as Python's ``float`` reads it (exponents included, correctly
    rounded, no digit limit); a trailing or leading S/W hemisphere letter
    makes the value negative.

    Parameters
    ----------
    v : object
        The value as the answer gave it.
    axis : {"latitude", "longitude", "lat", "lon"}
        Which coordinate.

    Returns
    -------
    float or None
        Degrees; None for missing or unknown values (``None``, ``""``,
        ``"unknown"``, NaN from a reader's empty cell) and text with no number.

    Raises
    ------
    InvalidCoordinatesError
        When the value is a number that is not finite or is outside the
        range of :func:`agl_fast.coords.parse_coordinate` (``1e308``,
        ``"NaN"``, ``"inf"``, a 400-digit integer, latitude 200).
    """
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        if isinstance(v, float) and math.isnan(v):
            return None  # an empty cell of a reader
        try:
            x = float(v)
        except OverflowError:
            x = math.inf if v > 0 else -math.inf
        return parse_coordinate(x, axis)
    s = str(v).strip()
    if s.lower() in UNKNOWN_VALUES:
        return None
    # Full-width digits, the minus sign U+2212 and other dashes, invisible characters.
    read = _numeral(normalize_text(s)[0])
    if read is None:
        return None
    x, rest = read
    letters = re.sub(r"[^A-Za-z]", "", rest).upper()
    if letters in ("S", "W", "SOUTH", "WEST"):
        x = -abs(x)
    try:
        return parse_coordinate(x, axis)
    except InvalidCoordinatesError as exc:
        shown = s if len(s) <= 40 else s[:37] + "..."
        raise InvalidCoordinatesError(f"{exc} (read from {shown!r})") from None


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v).strip()
    return None if s.lower() in UNKNOWN_VALUES else s


def _coordinate(v: Any, axis: str, problems: list[str]) -> float | None:
    try:
        return coerce_coordinate(v, axis)
    except InvalidCoordinatesError as exc:
        problems.append(str(exc))
        return None


def from_fields(raw: dict[str, Any]) -> ParsedAnswer:
    """Classify already separated fields (keys as in :data:`KEY_ALIASES`).

    The answer is ``ok`` when both coordinates are valid by
    :func:`coerce_coordinate`; ``invalid`` (both coordinates None, the
    reason in ``error``) when either is a number that is not finite or out
    of range."""
    f = _known(raw)
    problems: list[str] = []
    lat = _coordinate(f.get("latitude"), "latitude", problems)
    lon = _coordinate(f.get("longitude"), "longitude", problems)
    names = [_text(f.get(k)) for k in ("city", "country", "continent")]
    error = None
    if problems:
        status, lat, lon, error = "invalid", None, None, "; ".join(problems)
    elif lat is not None and lon is not None:
        status = "ok"
    elif lat is None and lon is None and not any(names):
        status = "refusal"
    else:
        status = "partial"
    return ParsedAnswer(
        status=status,
        city=names[0],
        country=names[1],
        continent=names[2],
        latitude=lat,
        longitude=lon,
        reason=_text(f.get("reason")),
        fields=f,
        error=error,
    )


def _candidates(s: str) -> Iterator[Any]:
    """The JSON values an answer may be, read lazily: the object the
    reference parser reads (first brace-free ``{...}``, strict JSON), then
    every balanced object in order."""
    m = _FLAT_OBJECT.search(s)
    if m is not None:
        yield _load(m.group(0))
    for a, b in _object_spans(s):
        yield _load(s[a:b])


def parse_answer(text: str | None, finish_reason: str | None = None) -> ParsedAnswer:
    """Parse one raw model answer; see the module docs for the statuses.

    Parameters
    ----------
    text : str or None
        The model's full answer.
    finish_reason : str, optional
        The provider's stop reason; a blocking one (``content_filter``,
        ``safety``, ...) makes the status ``blocked`` whatever the text.
    """
    if finish_reason and str(finish_reason).strip().lower() in BLOCKED_FINISH_REASONS:
        return ParsedAnswer(status="blocked")
    if text is None or not str(text).strip():
        return ParsedAnswer(status="empty")
    s = _strip_fences(str(text))
    first: ParsedAnswer | None = None
    for obj in _candidates(s):
        found = _find_fields(obj)
        if found is None:
            continue
        answer = from_fields(found)
        if answer.status == "ok":
            return answer
        first = first or answer
    if first is not None:
        return first
    if _REFUSAL_RE.search(s):
        return ParsedAnswer(status="refusal")
    return ParsedAnswer(status="unparseable")


# --- The AGL1K reference code's reading of an answer ------------------------

#: What the AGL1K reference code records for an answer it cannot read: every
#: name ``Unknown`` and both coordinates ``0.0`` (which its scoring then
#: counts as a refusal, 10,000 km).
UPSTREAM_DEFAULTS: dict[str, Any] = {
    "city": "Unknown",
    "country": "Unknown",
    "continent": "Unknown",
    "longitude": 0.0,
    "latitude": 0.0,
    "reason": "No reasoning provided",
}
#: The keys the reference code looks up, exactly as spelled (case matters),
#: in its order of preference, field by field in its order.
UPSTREAM_KEYS: dict[str, tuple[str, ...]] = {
    "city": ("city", "City", "城市", "location", "place"),
    "country": ("country", "Country", "国家", "nation"),
    "continent": ("continent", "Continent", "大洲", "洲"),
    "longitude": ("longitude", "Longitude", "经度", "lng", "lon"),
    "latitude": ("latitude", "Latitude", "纬度", "lat"),
    "reason": ("reason", "Reason", "原因", "推理", "reasoning", "explanation", "analysis"),
}
_UPSTREAM_REASON_CHARS = 500


def parse_upstream(text: Any) -> dict[str, Any]:
    """Read an answer as the AGL1K reference pipeline did (``--parser upstream``).

    The rules, stated here because they differ from :func:`parse_answer`:

    * only the first ``{...}`` that contains no other brace is read, with a
      strict JSON parser: no repair, no code-fence handling, no nesting, so
      an object whose text holds a brace, a trailing comma, a single quote or
      a missing comma gives the defaults;
    * keys match exactly (:data:`UPSTREAM_KEYS`); the first key present
      wins even when its value is unusable;
    * names become ``str(value)`` (``None`` becomes ``"None"``); coordinates
      become ``float(value)`` or stay ``0.0`` when that fails (``"48.85 N"``
      stays ``0.0``); a number too large for a float ends the reading there,
      leaving the later fields at their defaults;
    * anything unreadable leaves :data:`UPSTREAM_DEFAULTS`; with no object at
      all, the reason is the text's first 500 characters (``...`` after).

    Parameters
    ----------
    text : str or None
        The model's full answer; anything that is not a string gives the defaults.

    Returns
    -------
    dict
        ``city``, ``country``, ``continent`` (str), ``longitude``,
        ``latitude`` (float, degrees, not range-checked) and ``reason``.
    """
    out = dict(UPSTREAM_DEFAULTS)
    if not isinstance(text, str):
        return out
    m = _FLAT_OBJECT.search(text)
    if m is None:
        long = len(text) > _UPSTREAM_REASON_CHARS
        out["reason"] = text[:_UPSTREAM_REASON_CHARS] + "..." if long else text
        return out
    try:
        obj = json.loads(m.group(0))
    except (ValueError, RecursionError):
        return out
    for name, keys in UPSTREAM_KEYS.items():
        key = next((k for k in keys if k in obj), None)
        if key is None:
            continue
        if name in ("longitude", "latitude"):
            try:
                out[name] = float(obj[key])
            except (ValueError, TypeError):
                pass
            except OverflowError:
                break
        else:
            out[name] = str(obj[key])
    return out
