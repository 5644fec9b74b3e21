"""``agl-fast serve``: the audio geo-localization game (people next to the models).

    agl-fast serve --demo
    agl-fast serve --truth geoLocalization_schema.csv --audio-dir DIR \\
        [--predictions DIR] [--db URL] [--host 127.0.0.1] [--port 8000]
        [--trusted-proxy ADDRESS_OR_NETWORK ...]
    agl-fast serve --db URL --export Human.parquet   # or Human.csv
    agl-fast serve --truth POOL.csv --audio-dir DIR --screening   # curator's page
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Any

from ..manifest import STRICT_AUDIO_HELP
from .limits import (
    GUESSES_PER_ADDRESS,
    GUESSES_PER_PLAYER,
    MIN_SCREENING_TOKEN,
    REQUESTS_PER_ADDRESS,
    ROUND_SIZE,
    ROUNDS_PER_ADDRESS,
    ROUNDS_PER_PLAYER,
    SCREENING_TOKEN_HEX,
)

DEFAULT_DB = "sqlite:///agl-fast-game.sqlite"
#: Environment variable that may hold the screening token.
SCREENING_TOKEN_ENV = "AGL_FAST_SCREENING_TOKEN"
#: Address and TCP port the server listens on by default.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``serve`` subcommand."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="run the listening game: people guess where clips were recorded"
    )
    p.add_argument("--truth", help="geoLocalization_schema.csv (default: the built-in demo set)")
    p.add_argument(
        "--audio-dir",
        help="directory of the clips: {key}.mp3 (the agl1k fetch layout) first, then mp3name",
    )
    p.add_argument("--strict", action="store_true", help=STRICT_AUDIO_HELP)
    p.add_argument("--predictions", help="directory of model prediction files to compare with")
    p.add_argument("--demo", action="store_true", help="serve the small built-in demo set")
    p.add_argument("--db", default=DEFAULT_DB, help=f"SQLAlchemy URL (default {DEFAULT_DB})")
    p.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port")
    p.add_argument("--round-size", type=int, default=ROUND_SIZE, help="clips per round")

    p.add_argument(
        "--rate",
        type=float,
        default=REQUESTS_PER_ADDRESS.per_second,
        help=f"requests/s allowed per client address (default {REQUESTS_PER_ADDRESS.per_second:g})",
    )
    p.add_argument(
        "--burst",
        type=int,
        default=REQUESTS_PER_ADDRESS.burst,
        help=f"request burst allowed per client address (default {REQUESTS_PER_ADDRESS.burst})",
    )
    for flag, default, what in (
        ("--round-limit-player", ROUNDS_PER_PLAYER, "new rounds per player"),
        ("--round-limit-address", ROUNDS_PER_ADDRESS, "new rounds per client address"),
        ("--guess-limit-player", GUESSES_PER_PLAYER, "guesses per player"),
        ("--guess-limit-address", GUESSES_PER_ADDRESS, "guesses per client address"),
    ):
        p.add_argument(
            flag,
            metavar="PER_MIN/BURST",
            default=str(default),
            help=f"{what}: a minute, after a burst (default {default})",
        )
    p.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a reverse proxy (address or network) whose X-Forwarded-For is believed; "
        "repeatable (default: none, the peer is the client)",
    )
    p.add_argument("--secure-cookie", action="store_true", help="mark the cookie Secure (HTTPS)")
    p.add_argument(
        "--export",
        metavar="FILE",
        help="write all guesses as a Human prediction file and exit (.parquet or .csv: the "
        "suffix says the format)",
    )
    p.add_argument(
        "--screening",
        action="store_true",
        help="also serve the curator's screening page (/screen) under a random token, "
        f"or the one in ${SCREENING_TOKEN_ENV}",
    )
    p.add_argument(
        "--screening-token",
        default=None,
        metavar="TOKEN",
        help=f"the screening token (at least {MIN_SCREENING_TOKEN} characters; implies "
        f"--screening; ${SCREENING_TOKEN_ENV} keeps it out of the process list)",
    )
    p.set_defaults(run=run)
    return p


def _export(args: argparse.Namespace) -> int:
    """Write every guess as a Human prediction file."""
    from .board import export_format, export_guesses
    from .db import make_engine, migrate

    export_format(args.export)  # an unknown suffix: refused before the database is opened
    engine = make_engine(args.db)
    migrate(engine)
    n = export_guesses(engine, args.export)
    print(f"{n} clips with human guesses -> {args.export}")
    return 0


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """The rate limits of the flags, checked (raises ParameterError)."""
    from .limits import ClientAddress, Limit

    names = (
        "round_limit_player",
        "round_limit_address",
        "guess_limit_player",
        "guess_limit_address",
    )
    out = {name: Limit.parse(getattr(args, name)) for name in names}
    ClientAddress(args.trusted_proxy)
    Limit(per_minute=args.rate * 60.0, burst=args.burst)
    return out


def _catalogue(args: argparse.Namespace, tmp: list[tempfile.TemporaryDirectory[str]]) -> Any:
    """The catalogue of the flags (the demo set, written to a temporary directory
    appended to ``tmp``), or an error message."""
    from ..exceptions import ParameterError
    from .clips import load_catalogue, write_demo

    if args.demo or args.truth is None:
        if args.truth is not None or args.audio_dir is not None:
            return "--demo takes no --truth/--audio-dir"
        tmp.append(tempfile.TemporaryDirectory(prefix="agl-fast-demo-"))
        truth, audio, preds = write_demo(tmp[-1].name)
        return load_catalogue(truth, audio, args.predictions or preds)
    if args.audio_dir is None:
        return "--audio-dir is required with --truth"
    try:
        return load_catalogue(args.truth, args.audio_dir, args.predictions, strict=args.strict)
    except ParameterError as e:
        return f"error: {e}"


def _screening_token(args: argparse.Namespace) -> str | None:
    """The screening token of the flags (None: screening off); raises ParameterError."""
    import os
    import secrets

    from ..exceptions import ParameterError

    from_env = os.environ.get(SCREENING_TOKEN_ENV) if args.screening else None
    token = args.screening_token or from_env or None
    if token is None:
        return secrets.token_hex(SCREENING_TOKEN_HEX // 2) if args.screening else None
    if len(token) < MIN_SCREENING_TOKEN or not token.isascii() or not token.isprintable():
        raise ParameterError(
            f"a screening token is at least {MIN_SCREENING_TOKEN} printable ASCII characters"
        )
    return token


def run(args: argparse.Namespace) -> int:
    """Serve the game (or export the guesses) until interrupted."""
    if args.export:
        return _export(args)

    import uvicorn

    from ..exceptions import ParameterError
    from .app import GameConfig, create_app

    try:
        limits = _limits(args)
        token = _screening_token(args)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tmp: list[tempfile.TemporaryDirectory[str]] = []
    cat = _catalogue(args, tmp)
    if isinstance(cat, str):
        print(cat, file=sys.stderr)
        return 2
    config = GameConfig(
        catalogue=cat,
        db_url=args.db,
        round_size=args.round_size,
        rate_per_s=args.rate,
        burst=args.burst,
        secure_cookie=args.secure_cookie,
        trusted_proxies=tuple(args.trusted_proxy),
        screening_token=token,
        **limits,
    )
    app = create_app(config)
    print(
        f"{len(cat.clips)} clips, {len(cat.model_names)} models; "
        f"open http://{args.host}:{args.port}/",
        flush=True,
    )
    if token is not None:
        # the token rides in the fragment, which browsers never send to a server
        print(f"screening: http://{args.host}:{args.port}/screen#token={token}", flush=True)
    try:
        # The app reads X-Forwarded-For itself, from --trusted-proxy peers only;
        # uvicorn's own handling would believe any client on 127.0.0.1.
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            proxy_headers=False,
            server_header=False,
        )
    finally:
        for t in tmp:
            t.cleanup()
    return 0
