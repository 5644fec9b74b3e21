"""The speech / non-speech mix of a selected benchmark.

The paper's benchmark holds 1,444 clips, 1,025 with speech and 419 without
(a speech share of 0.71). :func:`targets` turns a request (an equal split, a
speech share, or explicit counts) into the number of clips wanted on each
side; :func:`advice` says, when the pool cannot give them, what would: a
lower threshold, the mix the pool does allow, or more recordings.

A side the pool cannot fill is filled as far as it goes and the shortfall is
reported; an empty side never stops a selection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..exceptions import ParameterError

__all__ = ["BALANCE", "SIDES", "MixRequest", "advice", "parse_counts", "targets"]

#: The values of ``--balance``: an equal split, or no mix at all.
BALANCE: tuple[str, str] = ("equal", "none")
#: The two sides of the split, in the order of ``--counts SPEECH,NONSPEECH``.
SIDES: tuple[str, str] = ("speech", "nonspeech")
_WORDS = {"speech": "speech", "nonspeech": "non-speech"}


@dataclass(frozen=True)
class MixRequest:
    """What the selection aims at.

    ``balance``: ``'equal'`` (as many of each side) or ``'none'`` (no mix:
    the most localizable clips whatever their side); ``speech_share`` in
    [0, 1] or ``counts`` ``(speech, nonspeech)`` replace the equal split.
    ``n``: the benchmark's size (not with ``counts``).
    """

    balance: str = "equal"
    speech_share: float | None = None
    counts: tuple[int, int] | None = None
    n: int | None = None

    def __post_init__(self) -> None:
        if self.balance not in BALANCE:
            raise ParameterError(f"balance must be one of {BALANCE}, got balance={self.balance!r}")
        if self.n is not None and self.n < 1:
            raise ParameterError(f"n must be >= 1, got n={self.n}")
        if self.speech_share is not None and self.counts is not None:
            raise ParameterError("give a speech share or counts, not both")
        share = self.speech_share
        if share is not None and not (math.isfinite(share) and 0.0 <= share <= 1.0):
            raise ParameterError(f"the speech share must be in [0, 1], got {share}")
        if self.counts is not None:
            if self.n is not None:
                raise ParameterError("counts fix the size: leave n out")
            if len(self.counts) != 2 or min(self.counts) < 0 or sum(self.counts) < 1:
                raise ParameterError(
                    f"counts are two numbers >= 0, speech then non-speech, got {self.counts}"
                )

    @property
    def mixed(self) -> bool:
        """False for ``balance='none'`` without a share or counts."""
        return self.balance == "equal" or self.speech_share is not None or self.counts is not None

    def describe(self) -> str:
        """The request in words (for reports)."""
        if self.counts is not None:
            return f"counts {self.counts[0]},{self.counts[1]}"
        if self.speech_share is not None:
            return f"speech share {self.speech_share:g}"
        return f"balance {self.balance}"


def parse_counts(text: str) -> tuple[int, int]:
    """``"1025,419"`` -> ``(1025, 419)``: speech, then non-speech clips."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        vals = []
    if len(vals) != 2 or min(vals) < 0 or sum(vals) < 1:
        raise ParameterError(
            f"counts are SPEECH,NONSPEECH (two whole numbers >= 0, not both 0), got {text!r}"
        )
    return vals[0], vals[1]


def _largest(share: float, avail: tuple[int, int]) -> int:
    """The largest size whose split by ``share`` fits the available clips,
    ignoring a side the pool has none of (that side is then short)."""
    s_av, ns_av = avail
    bounds = []
    if share > 0 and s_av > 0:
        bounds.append(s_av / share)
    if share < 1 and ns_av > 0:
        bounds.append(ns_av / (1.0 - share))
    if not bounds:
        return 0
    size = math.floor(min(bounds) + 1e-9)

    def fits(m: int) -> bool:
        s = round(share * m)
        return (s <= s_av or s_av == 0) and (m - s <= ns_av or ns_av == 0)

    while fits(size + 1):  # rounding may leave room for one or two more
        size += 1
    while size > 0 and not fits(size):
        size -= 1
    return size


def targets(req: MixRequest, avail: tuple[int, int]) -> tuple[int, int]:
    """Clips wanted on each side, ``(speech, nonspeech)``.

    Parameters
    ----------
    req : MixRequest
        The request (a mixed one: ``req.mixed``).
    avail : (int, int)
        Localizable clips on each side.

    Returns
    -------
    (int, int)
        Explicit ``counts`` as given; with ``n``, the split of ``n`` (``n // 2``
        a side for the equal split); else the largest benchmark of that mix
        the pool allows, sized on the side(s) it has clips of.
    """
    if req.counts is not None:
        return req.counts
    if req.speech_share is None:  # the equal split
        if req.n is not None:
            return req.n // 2, req.n // 2
        if min(avail) > 0:
            return min(avail), min(avail)
        return max(avail), max(avail)
    share = req.speech_share
    size = req.n if req.n is not None else _largest(share, avail)
    s = round(share * size)
    return s, size - s


def advice(
    req: MixRequest,
    want: tuple[int, int],
    avail: tuple[int, int],
    side_scores: Sequence[np.ndarray],
    theta: float,
) -> list[str]:
    """What to change when a side falls short of its target (empty list if none does).

    ``side_scores``: the finite ``l_k`` of every pooled clip of each side
    (localizable or not), to name the threshold that would give the target.
    """
    out: list[str] = []
    for side, w, a, lk in zip(SIDES, want, avail, side_scores, strict=True):
        if a >= w:
            continue
        word = _WORDS[side]
        line = f"{word}: {a} of the {w} wanted clips have l_k > {theta:g}"
        if len(lk) >= w > 0:
            cut = float(np.sort(lk)[::-1][w - 1])
            line += f"; --theta below {cut:.6g} would give {w}"
        else:
            line += (
                f"; the pool holds only {len(lk)} {word} clips at any l_k: "
                f"add {word} recordings to the pool"
            )
        out.append(line)
    if out and sum(avail) > 0:
        s, ns = avail
        out.append(
            f"the pool allows --counts {s},{ns} (speech share {s / (s + ns):.2f})"
            + ("" if req.balance == "none" else ", or --balance none for every localizable clip")
        )
    return out
