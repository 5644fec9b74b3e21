"""Secrets scrubbed from every text that leaves a run (messages, stored
errors, logs), and the text normalisation masking compares with.
"""

from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Sequence

__all__ = ["REDACTED", "normalize_text", "redact", "secret_patterns"]

REDACTED = "***"
#: Characters that do not show: dropped before matching (zero-width space,
#: non-joiner, joiner, word joiner, BOM, soft hyphen, Mongolian vowel separator).
_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e")
#: Dash variants read as ``-`` (hyphen, non-breaking hyphen, figure dash, en
#: and em dashes, horizontal bar, minus sign, small and full-width hyphen-minus).
_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d\u2043")
#: A JSON escape of one UTF-16 unit.
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
#: The tail of a long secret that is masked on its own (a key quoted in part).
_TAIL = 12


def normalize_text(text: str) -> tuple[str, Sequence[int], Sequence[int]]:
    """``text`` as masking compares it, and where each character came from.

    JSON ``\\uXXXX`` escapes are read as the character they stand for;
    each character is NFKC-normalised (full-width and other compatibility
    forms become ASCII), invisible characters (:data:`_INVISIBLE`) are
    dropped and dash variants (:data:`_DASHES`) become ``-``.

    Returns
    -------
    normal : str
        The normalised text.
    start, end : sequence of int [length len(normal)]
        For each character of ``normal``, the span ``text[start:end]`` it
        comes from.
    """
    if text.isascii() and "\\u" not in text:
        return text, range(len(text)), range(1, len(text) + 1)
    out: list[str] = []
    start: list[int] = []
    end: list[int] = []
    i = 0
    while i < len(text):
        m = _ESCAPE.match(text, i)
        ch, j = (chr(int(m.group(1), 16)), m.end()) if m else (text[i], i + 1)
        if ch in _DASHES:
            ch = "-"
        elif ch in _INVISIBLE:
            ch = ""
        elif not ch.isascii():
            ch = unicodedata.normalize("NFKC", ch)
        out.append(ch)
        start.extend([i] * len(ch))
        end.extend([j] * len(ch))
        i = j
    return "".join(out), start, end


def _b64_forms(secret: str) -> list[str]:
    """The base64 text of ``secret`` at each of the three byte alignments it
    can have inside a longer encoded text (only the characters it alone
    decides), in the standard and the URL-safe alphabets."""
    raw = secret.encode("utf-8")
    forms = []
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw).decode("ascii")
        core = enc[-(-8 * k // 6) : (8 * (k + len(raw))) // 6]
        forms += [core, core.translate(str.maketrans("+/", "-_"))]
    return [f for f in dict.fromkeys(forms) if len(f) >= 4]


def secret_patterns(secret: str) -> tuple[list[str], list[str]]:
    """What masks one secret: the texts matched in any case (the secret and
    its last 12 characters when it is longer than 16, forwards and
    reversed) and those matched exactly (its base64 forms)."""
    s = normalize_text(secret.strip())[0]
    if len(s) < 4:
        return [], []
    texts = [s, s[::-1]]
    if len(s) > 16:
        texts += [s[-_TAIL:], s[-_TAIL:][::-1]]
    return texts, _b64_forms(s)


def redact(text: str | None, *secrets: str | None) -> str | None:
    """``text`` with every secret masked, in any spelling.

    The text and each secret are compared after :func:`normalize_text`
    (JSON escapes read, NFKC, invisible characters dropped, dash variants as
    ``-``), so a key split by zero-width spaces, written in full-width
    letters or with U+2010 hyphens is found; the masked span covers the original characters.
    Each secret (stripped) is matched in any case, forwards and reversed, and
    so is its last 12 characters when it is longer than 16 (a key quoted in
    part); its base64 forms (:func:`_b64_forms`) are matched exactly.
    Secrets shorter than 4 characters are ignored. This is the one redaction
    function: the store, the logs, error messages and ``run.json`` all use it.
    """
    if text is None:
        return None
    folded: list[str] = []
    exact: list[str] = []
    for secret in secrets:
        f, e = secret_patterns(secret or "")
        folded += f
        exact += e
    if not folded:
        return text
    normal, start, end = normalize_text(text)
    spans: list[tuple[int, int]] = []
    for pats, flags in ((folded, re.IGNORECASE), (exact, 0)):
        if not pats:
            continue
        rx = re.compile("|".join(re.escape(p) for p in sorted(pats, key=len, reverse=True)), flags)
        spans += [(start[m.start()], end[m.end() - 1]) for m in rx.finditer(normal)]
    if not spans:
        return text
    spans.sort()
    merged = [spans[0]]
    for a, b in spans[1:]:
        if a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    parts, pos = [], 0
    for a, b in merged:
        parts += [text[pos:a], REDACTED]
        pos = b
    parts.append(text[pos:])
    return "".join(parts)
