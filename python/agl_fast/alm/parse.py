"""Parse a model's raw answer into a location.

The stable entry point is :func:`parse_answer`::

    >>> from agl_fast.alm.parse import parse_answer
    >>> a = parse_answer('Sure!\\n```json\\n{"City": "Paris", "lat": "48.85", "lng": 2.35,}\\n```')
    >>> (a.status, a.city, a.latitude, a.longitude)
    ('ok', 'Paris', 48.85, 2.35)

It takes the first complete JSON object of the text (inside code fences or
not, nested under another key or not), repairs near-JSON (trailing or
missing commas, single quotes, unquoted keys), maps key aliases in English
and Chinese, coerces numbers (``"48.85° N"``, ``"2,35"``, ``"-74.0 W"``) and
classifies the answer:

``ok``           a valid latitude (:mod:`agl_fast.coords`) and a longitude;
``partial``      a JSON object, but no usable coordinate pair;
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
from dataclasses import dataclass, field
from typing import Any

from ..coords import parse_coordinate
from ..exceptions import InvalidCoordinatesError

STATUSES = ("ok", "partial", "refusal", "blocked", "empty", "unparseable")

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
_NUM_RE = re.compile(r"[-+]?\d+(?:[.,]\d+)?")


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


def _load(fragment: str) -> Any:
    try:
        return json.loads(fragment)
    except json.JSONDecodeError:
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


def coerce_coordinate(v: Any, axis: str) -> float | None:
    """A number from ``v`` (``48.85``, ``"48.85"``, ``"48,85° N"``, ``"74 W"``).

    A trailing or leading S/W hemisphere letter makes the value negative.
    Returns None for missing or unknown values and for text with no number.
    The number is not range-checked here: :func:`from_fields` checks the
    latitude with :func:`agl_fast.coords.parse_coordinate`, the rule every
    reader of coordinates shares.
    """
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        x = float(v)
        return x if math.isfinite(x) else None
    s = str(v).strip()
    if s.lower() in UNKNOWN_VALUES:
        return None
    m = _NUM_RE.search(s)
    if not m:
        return None
    x = float(m.group(0).replace(",", "."))
    letters = re.sub(r"[^A-Za-z]", "", s[: m.start()] + s[m.end() :]).upper()
    if letters in ("S", "W", "SOUTH", "WEST"):
        x = -abs(x)
    if not math.isfinite(x):
        return None
    return x


def _valid_latitude(lat: float) -> bool:
    """Whether ``lat`` is a latitude by the rule of :mod:`agl_fast.coords`."""
    try:
        parse_coordinate(lat, "latitude")
    except InvalidCoordinatesError:
        return False
    return True


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v).strip()
    return None if s.lower() in UNKNOWN_VALUES else s


def from_fields(raw: dict[str, Any]) -> ParsedAnswer:
    """Classify already separated fields (keys as in :data:`KEY_ALIASES`).

    The answer is ``ok`` when it has both coordinates and its latitude is
    valid by :func:`agl_fast.coords.parse_coordinate`; a longitude is any
    finite number (scoring wraps it)."""
    f = _known(raw)
    lat = coerce_coordinate(f.get("latitude"), "lat")
    lon = coerce_coordinate(f.get("longitude"), "lon")
    names = [_text(f.get(k)) for k in ("city", "country", "continent")]
    if lat is not None and lon is not None and _valid_latitude(lat):
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
    )


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
    for a, b in _object_spans(s):
        obj = _load(s[a:b])
        found = _find_fields(obj)
        if found is not None:
            return from_fields(found)
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
_FLAT_OBJECT = re.compile(r"\{[^{}]*\}")
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
