"""State shared by the game's request handlers: settings, catalogue, database.

:class:`GameConfig` holds the settings of one server and :class:`Game` what
the handlers share: the catalogue, the engine, model scores per clip, the rate
limiters and the record of which answers were shown to whom.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Insert, insert, or_, select

from ..geo import geoscore, haversine
from .clips import Catalogue, Clip
from .db import address_hasher, now, reveals
from .guard import too_many
from .limits import (
    GUESSES_PER_ADDRESS,
    GUESSES_PER_PLAYER,
    REQUESTS_PER_ADDRESS,
    ROUND_SIZE,
    ROUNDS_PER_ADDRESS,
    ROUNDS_PER_PLAYER,
    SCREENING_PER_ADDRESS,
    Limit,
    TokenBuckets,
)

#: Distance counted for a model that gave no coordinates (a refusal), in km.
REFUSAL_KM = 10000.0
#: Remembered (clip, player, address) showings before the memory starts over.
_KNOWN_REVEALS_MAX = 200_000


@dataclass
class GameConfig:
    """Settings of one game server.

    ``rate_per_s``/``burst`` limit every request per client address; the
    ``*_limit_*`` fields limit new rounds and guesses per player and per
    address. ``trusted_proxies`` (addresses or networks) are the only peers
    whose ``X-Forwarded-For`` is believed; empty, the peer is the client.
    ``screening_token``: the secret of the screening page and its API
    (``None``: screening is off and its routes answer 404).
    """

    catalogue: Catalogue
    db_url: str
    round_size: int = ROUND_SIZE
    rate_per_s: float = REQUESTS_PER_ADDRESS.per_second
    burst: int = REQUESTS_PER_ADDRESS.burst
    secure_cookie: bool = False
    seed: int | None = None
    trusted_proxies: tuple[str, ...] = ()
    round_limit_player: Limit = ROUNDS_PER_PLAYER
    round_limit_address: Limit = ROUNDS_PER_ADDRESS
    guess_limit_player: Limit = GUESSES_PER_PLAYER
    guess_limit_address: Limit = GUESSES_PER_ADDRESS
    screening_token: str | None = None
    screening_limit_address: Limit = SCREENING_PER_ADDRESS


def distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance between two points, in km."""
    return float(haversine([lat1], [lon1], [lat2], [lon2], n_threads=1)[0])


def score(d_km: float) -> float:
    """The GeoScore of a distance in km."""
    return float(geoscore([d_km])[0])


class Game:
    """State shared by the handlers: catalogue, engine, model scores per clip."""

    def __init__(self, config: GameConfig, engine: Engine) -> None:
        self.config, self.engine, self.cat = config, engine, config.catalogue
        # SQLite has one writer at a time: queueing writers on a lock here is
        # much faster than letting them spin on the database's busy handler.
        self._write_lock = threading.Lock() if engine.dialect.name == "sqlite" else None
        self.rng: random.Random = (
            secrets.SystemRandom() if config.seed is None else random.Random(config.seed)
        )
        self.model_rows: dict[str, list[dict[str, Any]]] = {}
        for key, clip in self.cat.clips.items():
            rows = []
            for name, g in sorted(self.cat.models.get(key, {}).items()):
                if g.lat is None or g.lon is None:
                    d = REFUSAL_KM
                else:
                    d = distance_km(g.lat, g.lon, clip.lat, clip.lon)
                rows.append(
                    {
                        "model": name,
                        "lat": g.lat,
                        "lon": g.lon,
                        "city": g.city,
                        "country": g.country,
                        "reasoning": g.reasoning[:4000],
                        "distance_km": round(d, 1),
                        "geoscore": round(score(d), 1),
                    }
                )
            self.model_rows[key] = rows
        self.hash_address = address_hasher(engine)
        self.buckets = {
            ("rounds", "player"): TokenBuckets(config.round_limit_player),
            ("rounds", "address"): TokenBuckets(config.round_limit_address),
            ("guesses", "player"): TokenBuckets(config.guess_limit_player),
            ("guesses", "address"): TokenBuckets(config.guess_limit_address),
            ("screening decisions", "address"): TokenBuckets(config.screening_limit_address),
        }
        self._known_reveals: set[tuple[str, str, str]] = set()
        self._known_lock = threading.Lock()
        dialect = engine.dialect.name
        self._insert_reveals: Insert
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            self._insert_reveals = sqlite_insert(reveals).on_conflict_do_nothing()
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._insert_reveals = pg_insert(reveals).on_conflict_do_nothing()
        else:
            self._insert_reveals = insert(reveals)

    def limit(self, what: str, address: str, player: str | None) -> None:
        """Spend a token of ``what`` (rounds, guesses) for the address and the player, or 429."""
        for who, key in (("address", address), ("player", player)):
            if key is None:
                continue
            buckets = self.buckets[(what, who)]
            wait = buckets.take(key)
            if wait > 0.0:
                raise too_many(f"{what} from this {who}", buckets.limit, wait)

    def new_reveals(self, keys: Iterable[str], pid: str, address: str) -> list[dict[str, Any]]:
        """Rows of ``reveals`` for the showings of ``keys`` not recorded yet."""
        with self._known_lock:
            fresh = [k for k in keys if (k, pid, address) not in self._known_reveals]
        t = now()
        return [
            {"clip_key": k, "player_id": pid, "address": address, "created_at": t} for k in fresh
        ]

    def insert_reveals(self, conn: Any, rows: list[dict[str, Any]]) -> None:
        """Record showings of answers (an existing one is kept as it is)."""
        if not rows:
            return
        if self.engine.dialect.name in ("sqlite", "postgresql"):
            conn.execute(self._insert_reveals, rows)
            return
        for row in rows:  # other databases: look before inserting
            q = select(reveals.c.id).where(
                reveals.c.clip_key == row["clip_key"],
                reveals.c.player_id == row["player_id"],
                reveals.c.address == row["address"],
            )
            if conn.execute(q).first() is None:
                conn.execute(insert(reveals).values(**row))

    def remember_reveals(self, rows: list[dict[str, Any]]) -> None:
        """Note committed showings, so that showing them again writes nothing."""
        with self._known_lock:
            if len(self._known_reveals) > _KNOWN_REVEALS_MAX:
                self._known_reveals.clear()
            self._known_reveals.update((r["clip_key"], r["player_id"], r["address"]) for r in rows)

    def shown(self, keys: Iterable[str], pid: str, address: str) -> None:
        """Record that the answers of ``keys`` were shown to ``pid`` at ``address``."""
        rows = self.new_reveals(keys, pid, address)
        if not rows:
            return
        with self.writing(), self.engine.begin() as conn:
            self.insert_reveals(conn, rows)
        self.remember_reveals(rows)

    def seen_before(self, conn: Any, key: str, pid: str, address: str) -> bool:
        """Whether the answer of ``key`` was already shown to the player or the address."""
        by = [reveals.c.player_id == pid, reveals.c.address == address]
        q = select(
            or_(*(select(reveals.c.id).where(reveals.c.clip_key == key, w).exists() for w in by))
        )
        return bool(conn.execute(q).scalar())

    def writing(self) -> contextlib.AbstractContextManager[Any]:
        """Context of a write transaction (serialized on SQLite)."""
        return self._write_lock if self._write_lock is not None else contextlib.nullcontext()

    def sample(self, n: int, seen: set[str] | None = None) -> list[str]:
        """``n`` distinct clips, those the player has not guessed yet first."""
        seen = seen or set()
        fresh = sorted(k for k in self.cat.clips if k not in seen)
        old = sorted(k for k in self.cat.clips if k in seen)
        n = max(1, min(n, len(fresh) + len(old)))
        if len(fresh) >= n:
            return self.rng.sample(fresh, n)
        return self.rng.sample(fresh, len(fresh)) + self.rng.sample(old, n - len(fresh))

    def reveal(self, clip: Clip, lat: float, lon: float, d: float, s: float) -> dict[str, Any]:
        return {
            "key": clip.key,
            "guess": {"lat": lat, "lon": lon},
            "truth": {
                "lat": clip.lat,
                "lon": clip.lon,
                "city": clip.city,
                "country": clip.country,
                "continent": clip.continent,
                "title": clip.title,
            },
            "distance_km": round(d, 1),
            "geoscore": round(s, 1),
            "models": self.model_rows.get(clip.key, []),
        }
