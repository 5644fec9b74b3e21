"""Limits of the game server, declared once, and the pure parts that apply them.

Request bodies and JSON nesting, token buckets for requests, rounds and
guesses, and client addresses behind trusted proxies. Nothing here needs the
web stack, so that ``agl-fast serve --help`` reads its defaults from here;
:mod:`agl_fast.game.guard` applies them to requests.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import ParameterError

_log = logging.getLogger("agl_fast.game")

#: Largest request body accepted, in bytes (every JSON body of the API is far smaller).
MAX_BODY = 4096
#: Deepest nesting of arrays and objects accepted in a JSON body (the API uses 1).
MAX_JSON_DEPTH = 16
#: Distinct clients a rate limiter tracks before new ones share one overflow bucket.
MAX_TRACKED_CLIENTS = 100_000
#: Clips in a round when the client does not ask for a number.
ROUND_SIZE = 5
#: Most clips a client may ask for in one round.
MAX_ROUND_SIZE = 50


@dataclass(frozen=True)
class Limit:
    """A token bucket: ``burst`` requests at once, refilled at ``per_minute``.

    Written ``PER_MINUTE/BURST`` on the command line (``30/10``).
    """

    per_minute: float
    burst: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.per_minute) and self.per_minute > 0):
            raise ParameterError(
                f"a rate limit must be a positive number a minute, got {self.per_minute!r}"
            )
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ParameterError(f"a rate limit burst must be an integer >= 1, got {self.burst!r}")

    @property
    def per_second(self) -> float:
        return self.per_minute / 60.0

    @classmethod
    def parse(cls, text: str) -> Limit:
        """``"30/10"`` -> ``Limit(per_minute=30.0, burst=10)``."""
        rate, sep, burst = text.partition("/")
        bad = ParameterError(f"a rate limit is PER_MINUTE/BURST such as 30/10, got {text!r}")
        if not sep:
            raise bad
        try:
            per_minute, n = float(rate), int(burst)
        except ValueError:
            raise bad from None
        return cls(per_minute, n)

    def __str__(self) -> str:
        return f"{self.per_minute:g}/{self.burst}"


#: Any request, per client address (20 a second after a burst of 60).
REQUESTS_PER_ADDRESS = Limit(per_minute=1200.0, burst=60)
#: New rounds per player (a round of five clips takes a person minutes).
ROUNDS_PER_PLAYER = Limit(per_minute=10.0, burst=10)
#: New rounds per address: players behind one NAT share it, and so does a
#: client that drops its cookie to get a fresh player id.
ROUNDS_PER_ADDRESS = Limit(per_minute=60.0, burst=60)
#: Guesses per player.
GUESSES_PER_PLAYER = Limit(per_minute=30.0, burst=20)
#: Guesses per address.
GUESSES_PER_ADDRESS = Limit(per_minute=300.0, burst=200)
#: Screening decisions per address (a curator listens before deciding).
SCREENING_PER_ADDRESS = Limit(per_minute=120.0, burst=60)
#: Longest screening note kept, in characters (a longer one is refused).
MAX_NOTE_CHARS = 1000
#: Length of the random screening token ``serve --screening`` makes, in hex digits.
SCREENING_TOKEN_HEX = 32
#: Shortest screening token accepted from ``--screening-token``.
MIN_SCREENING_TOKEN = 16


class TokenBuckets:
    """Thread-safe token buckets by key, all with the same :class:`Limit`.

    A bucket idle long enough to be full again is forgotten; beyond
    ``max_keys`` live buckets, new keys share one overflow bucket (logged),
    so that memory stays bounded whatever the number of clients.
    """

    def __init__(self, limit: Limit, max_keys: int = MAX_TRACKED_CLIENTS) -> None:
        self.limit, self.max_keys = limit, max_keys
        self._rate, self._burst = limit.per_second, float(limit.burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()
        self._last_prune = 0.0

    def take(self, key: str) -> float:
        """Spend a token of ``key``'s bucket: 0.0 when allowed, else seconds until one is due."""
        t = time.monotonic()
        with self._lock:
            if key not in self._buckets and len(self._buckets) >= self.max_keys:
                self._prune(t)
                if len(self._buckets) >= self.max_keys:
                    key = "\x00overflow"
            tokens, last = self._buckets.get(key, (self._burst, t))
            tokens = min(self._burst, tokens + (t - last) * self._rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, t)
                return 0.0
            self._buckets[key] = (tokens, t)
            return (1.0 - tokens) / self._rate

    def _prune(self, t: float) -> None:
        if t - self._last_prune < 1.0:
            return
        self._last_prune = t
        full_after = self._burst / self._rate
        self._buckets = {k: v for k, v in self._buckets.items() if t - v[1] < full_after}
        if len(self._buckets) >= self.max_keys:
            _log.warning(
                "rate limiter tracks %d clients; new ones share one bucket", len(self._buckets)
            )


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    s = text.strip()
    if s.startswith("[") and "]" in s:  # "[2001:db8::1]:443"
        s = s[1 : s.index("]")]
    elif s.count(":") == 1:  # "192.0.2.1:5678"
        s = s.split(":", 1)[0]
    try:
        return ipaddress.ip_address(s)
    except ValueError:
        return None


class ClientAddress:
    """The client address of a request, honouring ``X-Forwarded-For`` from trusted proxies only.

    Parameters
    ----------
    trusted_proxies : iterable of str
        Addresses or networks (``10.0.0.0/8``) of reverse proxies. Empty (the
        default): the direct peer is the client, whatever headers it sends.

    When the peer is trusted, the header is read from the right: the first
    hop that is not a trusted proxy is the client (a client cannot forge the
    hops its proxies append, only those on their left).
    """

    def __init__(self, trusted_proxies: Iterable[str] = ()) -> None:
        nets = []
        for p in trusted_proxies:
            try:
                nets.append(ipaddress.ip_network(str(p).strip(), strict=False))
            except ValueError:
                raise ParameterError(
                    f"a trusted proxy is an IP address or network such as 10.0.0.0/8, got {p!r}"
                ) from None
        self.networks = tuple(nets)

    def _trusted(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        return ip is not None and any(ip in n for n in self.networks)

    def __call__(self, scope: Mapping[str, Any]) -> str:
        peer = str((scope.get("client") or ("unknown", 0))[0])
        if not self.networks or not self._trusted(_parse_ip(peer)):
            return peer
        hops = [
            h
            for name, value in scope.get("headers", [])
            if name == b"x-forwarded-for"
            for h in value.decode("latin-1").split(",")
        ]
        addr = peer
        for hop in reversed(hops):
            ip = _parse_ip(hop)
            if ip is None:  # garbage left of our proxies: the nearest known hop answers for it
                break
            addr = str(ip)
            if not self._trusted(ip):
                break
        return addr


def address_key(addr: str) -> str:
    """The key an address is limited and remembered by.

    IPv4: the address. IPv6: its /64 network (one household or host gets a
    whole /64, so single IPv6 addresses are free to rotate). Anything else
    (a test client's name) as is.
    """
    ip = _parse_ip(addr)
    if ip is None:
        return addr
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def json_depth(text: str, limit: int) -> int:
    """Nesting depth of the arrays and objects in ``text``, counting stops past ``limit``.

    A linear scan that skips string literals (with their escapes); it does
    not validate the JSON, which the parser does afterwards.
    """
    depth = peak = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "[" or ch == "{":
            depth += 1
            if depth > peak:
                peak = depth
                if peak > limit:
                    break
        elif ch == "]" or ch == "}":
            depth -= 1
    return peak
