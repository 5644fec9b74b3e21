"""The game's database: SQLAlchemy 2 tables and versioned schema migrations.

SQLite (a file) by default, PostgreSQL by URL (``postgresql+psycopg://...``).
The schema version lives in the table ``agl_schema_version``; :func:`migrate`
applies every migration above it in order, each in its own transaction, so
that an older database is brought up to date when the server starts.
Players are anonymous random ids. Client addresses are kept only as a
salted hash (table ``reveals``), to mark guesses made after the same address
was shown the answer; the salt is random per database (``agl_settings``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from datetime import datetime, timezone

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    false,
    inspect,
    select,
    text,
)

from ..exceptions import ParameterError

metadata = MetaData()

players = Table(
    "players",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

rounds = Table(
    "rounds",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("player_id", String(32), ForeignKey("players.id"), nullable=False),
    Column("clip_keys", Text, nullable=False),  # JSON list, in play order
    Column("created_at", DateTime(timezone=True), nullable=False),
)

guesses = Table(
    "guesses",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("player_id", String(32), ForeignKey("players.id"), nullable=False),
    Column("round_id", String(32), ForeignKey("rounds.id"), nullable=False),
    Column("clip_key", String(200), nullable=False),
    Column("latitude", Float, nullable=False),
    Column("longitude", Float, nullable=False),
    Column("distance_km", Float, nullable=False),
    Column("geoscore", Float, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # v3: the player, or the address, had been shown this clip's answer before
    Column("after_reveal", Boolean, nullable=False, server_default=false()),
    UniqueConstraint("player_id", "round_id", "clip_key", name="uq_guess_once"),
)

# v3: every showing of a clip's answer, by player and by (hashed) client address
reveals = Table(
    "reveals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("clip_key", String(200), nullable=False),
    Column("player_id", String(32), ForeignKey("players.id"), nullable=False),
    Column("address", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("clip_key", "player_id", "address", name="uq_reveal_once"),
)

# v4: a curator's decision on each clip of the pool (the latest one counts)
screening = Table(
    "screening",
    metadata,
    Column("clip_key", String(200), primary_key=True),
    Column("decision", String(8), nullable=False),  # "accept" or "reject"
    Column("note", Text, nullable=False, server_default=""),
    Column("curator", String(64), nullable=False, server_default=""),
    Column("decided_at", DateTime(timezone=True), nullable=False),
)

settings = Table(
    "agl_settings",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

version_table = Table(
    "agl_schema_version",
    MetaData(),
    Column("version", Integer, primary_key=True),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)


def _v1_tables(conn: Connection) -> None:
    # The tables as version 1 made them: later columns come from their migrations.
    md = MetaData()
    players.to_metadata(md).create(conn)
    rounds.to_metadata(md).create(conn)
    Table(
        "guesses",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("player_id", String(32), ForeignKey("players.id"), nullable=False),
        Column("round_id", String(32), ForeignKey("rounds.id"), nullable=False),
        Column("clip_key", String(200), nullable=False),
        Column("latitude", Float, nullable=False),
        Column("longitude", Float, nullable=False),
        Column("distance_km", Float, nullable=False),
        Column("geoscore", Float, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        UniqueConstraint("player_id", "round_id", "clip_key", name="uq_guess_once"),
    ).create(conn)


def _v2_clip_index(conn: Connection) -> None:
    # Plain DDL: an Index object would attach itself to the table definition.
    conn.execute(text("CREATE INDEX ix_guesses_clip_key ON guesses (clip_key)"))


def _v3_reveals(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE guesses ADD COLUMN after_reveal BOOLEAN NOT NULL DEFAULT FALSE"))
    reveals.create(conn)
    conn.execute(text("CREATE INDEX ix_reveals_clip_address ON reveals (clip_key, address)"))
    settings.create(conn)
    conn.execute(settings.insert().values(name="address_salt", value=secrets.token_hex(16)))


def _v4_screening(conn: Connection) -> None:
    screening.create(conn)


MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "players, rounds, guesses", _v1_tables),
    (2, "index of guesses by clip", _v2_clip_index),
    (3, "reveals, guesses.after_reveal, address salt", _v3_reveals),
    (4, "screening decisions", _v4_screening),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def now() -> datetime:
    return datetime.now(timezone.utc)


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and foreign keys."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")  # durable across crashes in WAL mode
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


def current_version(engine: Engine) -> int:
    """Applied schema version (0 for an empty database)."""
    if not inspect(engine).has_table(version_table.name):
        return 0
    with engine.connect() as conn:
        v = conn.execute(select(version_table.c.version).order_by(text("version DESC"))).first()
    return int(v[0]) if v else 0


def migrate(engine: Engine, target: int = SCHEMA_VERSION) -> int:
    """Apply the migrations above the current version up to ``target``; returns the version."""
    with engine.begin() as conn:
        version_table.create(conn, checkfirst=True)
    version = current_version(engine)
    for v, _, step in MIGRATIONS:
        if version < v <= target:
            with engine.begin() as conn:
                step(conn)
                conn.execute(version_table.insert().values(version=v, applied_at=now()))
            version = v
    return version


def address_hasher(engine: Engine) -> Callable[[str], str]:
    """The function that turns a client address key into what the database stores.

    HMAC-SHA256 under the database's random salt, 32 hex digits: equal
    addresses match across server restarts, and the table never holds an
    address in clear (though anyone with the database and its salt can test
    candidate addresses, as the IPv4 space is small).
    """
    with engine.connect() as conn:
        row = conn.execute(
            select(settings.c.value).where(settings.c.name == "address_salt")
        ).first()
    if row is None:
        raise ParameterError("the game database has no address salt: run migrate() first")
    salt = bytes.fromhex(row[0])

    def digest(addr: str) -> str:
        mac = hmac.new(salt, addr.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return mac.hexdigest()[:32]

    return digest
