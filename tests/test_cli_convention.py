"""One convention for every ``agl-fast`` command: defaults in ``--help``,
argument errors and missing inputs as one line with exit status 2, the
install hint for a missing extra, ``-q``/``-v`` and ``python -m agl_fast``."""

from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tomllib

from agl_fast import __version__
from agl_fast.cli import (
    COMMANDS,
    EXTRA_OF_PACKAGE,
    _all_parsers,
    build_parser,
    configure_logging,
    main,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _reset_cli_logging() -> Iterator[None]:
    log = logging.getLogger("agl_fast")
    before = (log.level, list(log.handlers))
    yield
    log.setLevel(before[0])
    log.handlers[:] = before[1]


def _leaves() -> list[tuple[str, ...]]:
    """The word paths of every runnable command (``("spatial", "infer")``...)."""
    out = []
    for name in COMMANDS:
        for p in _all_parsers(build_parser([name])):
            words = tuple(p.prog.split()[1:])
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if words[:1] == (name,) and not subs:
                out.append(words)
    return sorted(out)


LEAVES = _leaves()

#: for each command, an invocation whose input file does not exist
MISSING_INPUT: dict[tuple[str, ...], list[str]] = {
    ("curate",): ["nope_dir", "--out", "o"],
    ("features",): ["nope.wav"],
    ("report",): ["nope_dir"],
    ("evaluate",): ["nope.csv", "--truth", "nope.csv", "--out", "o"],
    ("spatial", "infer"): ["nope.wav", "--model", "nope.onnx", "--allow-cpu"],
    ("spatial", "simulate"): ["--scenes", "1", "--out", "o", "--sources", "nope.wav"],
    ("spatial", "train"): ["--data", "nope", "--out", "o"],
    ("spatial", "experiment"): ["--recordings", "nope.wav", "--out", "o"],
    ("spatial", "ask"): ["--data", "nope", "--provider", "vllm", "--model", "m", "--out", "o"],
    ("spatial", "owl", "train"): ["--data", "nope", "--out", "o", "--decoder", "d", "--sage", "s"],
    ("spatial", "owl", "infer"): ["--data", "nope", "--model", "m", "--out", "o"],
    ("spatial", "owl", "eval"): ["--data", "nope", "--model", "m", "--out", "o"],
    ("spatial", "owl", "import"): [
        "--checkpoint",
        "nope",
        "--decoder",
        "d",
        "--sage",
        "s",
        "--out",
        "o",
    ],
    ("query",): ["--provider", "vllm", "--model", "m", "--manifest", "nope.csv", "--out", "o"],
    ("judge",): ["nope.jsonl", "--judge", "vllm:m", "--out", "o"],
    ("models", "list"): ["--route", "nope"],
    ("models", "show"): ["nope"],
    ("localizability", "fit"): [
        "--manifest",
        "nope",
        "--reference",
        "nope",
        "--contributions",
        "nope",
        "--out",
        "o",
    ],
    ("localizability", "score"): ["--weights", "nope", "--manifest", "nope", "--out", "o"],
    ("localizability", "select"): ["--manifest", "nope", "--out", "o"],
    ("benchmark", "build"): ["nope.toml"],
    ("benchmark", "demo"): ["--pool", "nope.csv", "--out", "o"],
    ("analyze", "causes"): ["nope.csv", "--truth", "nope.csv", "--out", "o"],
    ("analyze", "cues"): ["nope.csv", "--out", "o"],
    ("serve",): ["--truth", "nope.csv", "--audio-dir", "nope"],
    ("tagger", "export"): ["--checkpoint", "nope.pt", "--out", "o.onnx"],
    ("agl1k", "fetch"): ["nope.csv", "--out", "o"],
    ("dedup",): ["nope"],
    ("split",): ["nope.parquet", "--out", "o.parquet"],
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own exits
        rc = int(exc.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_every_command_is_listed() -> None:
    # guards the tables below against a command added without its case
    assert set(LEAVES) == set(MISSING_INPUT)


@pytest.mark.parametrize("words", LEAVES, ids=" ".join)
def test_help_shows_defaults(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run([*words, "--help"], capsys)
    assert rc == 0
    assert "(default:" in out
    assert "-q, --quiet" in out and "-v, --verbose" in out


@pytest.mark.parametrize("words", LEAVES, ids=" ".join)
def test_bad_argument_exits_2(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run([*words, "--no-such-option"], capsys)
    assert rc == 2
    # argparse's usage, then one line naming the problem
    last = err.strip().splitlines()[-1]
    assert last.startswith("agl-fast") and "error:" in last


@pytest.mark.parametrize(
    "words",
    LEAVES,
    ids=" ".join,
)
def test_missing_input_is_one_line(
    words: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    rc, _, err = _run([*words, *MISSING_INPUT[words]], capsys)
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "nope" in lines[0] and "Traceback" not in err


def test_python_m_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agl_fast", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert out.stdout.strip() == f"agl-fast {__version__}"


def test_missing_extra_prints_the_install_line() -> None:
    # starlette made unimportable in a child, as when the game extra is absent
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "from agl_fast.cli import main; sys.exit(main(['serve', '--demo']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "agl-fast: 'serve' needs the missing package starlette: pip install 'agl-fast[game]'"
    ]


def test_extra_table_matches_pyproject() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    import_name = {"onnxruntime-gpu": "onnxruntime", "psycopg": "psycopg"}
    provided: dict[str, set[str]] = {}
    for extra, reqs in extras.items():
        for req in reqs:
            dist = re.split(r"[<>=\[;! ]", req, maxsplit=1)[0]
            name = import_name.get(dist, dist.replace("-", "_"))
            provided.setdefault(name, set()).add(extra)
    for package, names in EXTRA_OF_PACKAGE.items():
        assert set(names) <= provided[package], package
    for _, _, extra in COMMANDS.values():
        assert extra is None or extra in extras


def test_log_levels_from_quiet_and_verbose() -> None:
    log = logging.getLogger("agl_fast")
    for quiet, verbose, level in [
        (0, 0, "WARNING"),
        (1, 0, "ERROR"),
        (0, 1, "INFO"),
        (0, 2, "DEBUG"),
    ]:
        configure_logging(quiet, verbose)
        assert logging.getLevelName(log.level) == level
    configure_logging(0, 0)
    assert sum(getattr(h, "_agl_cli", False) for h in log.handlers) == 1


def test_verbose_on_the_command_or_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros(32000, np.float32))
    mono = ["features", str(npy), "--preset", "efficientat", "--out", str(tmp_path / "f.npy")]
    for argv in ([*mono, "-v"], ["--verbose", *mono]):
        rc, _, err = _run(argv, capsys)
        assert rc == 0 and f"agl-fast: INFO: wrote {tmp_path / 'f.npy'}" in err
    rc, _, err = _run(mono, capsys)
    assert rc == 0 and "INFO" not in err
    # the CLI's logging set-up ends with the call
    assert not any(getattr(h, "_agl_cli", False) for h in logging.getLogger("agl_fast").handlers)


def test_curate_of_an_empty_directory_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    rc, _, err = _run(["curate", str(tmp_path / "empty"), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2
    # the last line (a progress bar may have been drawn before it)
    assert err.strip().splitlines()[-1].endswith(f"no audio files to curate in '{tmp_path}/empty'")
    assert not (tmp_path / "o" / "curated.parquet").exists()
