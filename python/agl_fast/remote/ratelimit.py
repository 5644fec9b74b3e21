"""Client-side flow control: token buckets, backoff, a circuit breaker.

All three are asyncio primitives shared by the requests of one provider.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import re
import time

DEFAULT_MAX_RETRY_WAIT = 120.0
"""Longest wait (s) before a retry, whatever a server asks (``--max-retry-wait``)."""
DEFAULT_MAX_RESPONSE_BYTES = 16 << 20
"""Largest response body read, in bytes (``--max-response-bytes``)."""


class TokenBucket:
    """Refills ``rate_per_minute / 60`` tokens a second up to ``capacity``.

    ``acquire(n)`` waits until ``n`` tokens are available (``n`` is clamped
    to the capacity so a large request never waits forever). ``None`` as the
    rate makes the bucket a no-op.
    """

    def __init__(self, rate_per_minute: float | None, capacity: float | None = None) -> None:
        self.rate = None if not rate_per_minute else float(rate_per_minute) / 60.0
        cap = capacity if capacity is not None else (self.rate or 0.0)
        self.capacity = max(1.0, float(cap))
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        if self.rate is not None:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    async def acquire(self, n: float = 1.0) -> None:
        if self.rate is None:
            return
        n = min(float(n), self.capacity)
        async with self._lock:
            while True:
                self._refill()
                if self.tokens >= n:
                    self.tokens -= n
                    return
                await asyncio.sleep((n - self.tokens) / self.rate)

    def adjust(self, delta: float) -> None:
        """Give back (``delta > 0``) or take (``< 0``) tokens once the true cost is known."""
        if self.rate is None:
            return
        self._refill()
        self.tokens = min(self.capacity, self.tokens + delta)


def backoff_delay(
    attempt: int, base: float = 1.0, cap: float = 60.0, rng: random.Random | None = None
) -> float:
    """Exponential backoff with full jitter: uniform in ``[0, min(cap, base * 2**attempt)]``."""
    r = rng or random
    return r.uniform(0.0, min(cap, base * (2.0**attempt)))


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*s\s*$")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date),
    or from a Google ``retryDelay`` such as ``"13s"``; None if absent or unreadable.

    A negative value or a past date is 0; ``inf`` (or a number too large for a
    float) is ``inf``, which every cap refuses; ``nan`` is unreadable (None).
    """
    if value is None:
        return None
    v = str(value).strip()[:200]
    if not v:
        return None
    try:
        f = float(v)
    except ValueError:
        pass
    else:
        return None if math.isnan(f) else max(0.0, f)
    m = _DURATION_RE.match(v)
    if m:
        return float(m.group(1))
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    if dt is None:
        return None
    return max(0.0, dt.timestamp() - (time.time() if now is None else now))


class CircuitBreaker:
    """Opens after ``threshold`` consecutive transient failures; while open,
    callers wait ``cooldown`` seconds, then one probe goes through (half-open):
    its success closes the breaker, its failure opens it again."""

    def __init__(self, threshold: int = 8, cooldown: float = 30.0) -> None:
        self.threshold = max(1, int(threshold))
        self.cooldown = float(cooldown)
        self.failures = 0
        self.opened_at: float | None = None
        self.n_opened = 0
        self._probe = asyncio.Lock()

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    async def wait(self) -> None:
        while self.opened_at is not None:
            left = self.opened_at + self.cooldown - time.monotonic()
            if left > 0:
                await asyncio.sleep(left)
                continue
            if not self._probe.locked():
                await self._probe.acquire()
                return
            await asyncio.sleep(min(1.0, self.cooldown))

    def _release_probe(self) -> None:
        if self._probe.locked():
            self._probe.release()

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self._release_probe()

    def failure(self) -> None:
        self.failures += 1
        if self.failures >= self.threshold or self.opened_at is not None:
            self.opened_at = time.monotonic()
            self.n_opened += 1
        self._release_probe()
