"""pytest plugin: a test suite's librosa calls run on agl-fast.

Enable it with ``pytest -p agl_fast.compat.librosa.pytest_plugin``:

* ``--agl-librosa`` patches librosa for the whole session
  (:func:`agl_fast.compat.librosa.install`, undone at the end), and the
  terminal summary reports how many calls were accelerated;
* the ``librosa_accelerated`` fixture does it for one test, with the
  counters set to zero, and yields :func:`~agl_fast.compat.librosa.coverage`
  (call it for the counters so far).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import Coverage, coverage, install, installed, reset_counters, uninstall


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--agl-librosa",
        action="store_true",
        default=False,
        help="run librosa calls on agl-fast (agl_fast.compat.librosa.install())",
    )


def pytest_configure(config: Any) -> None:
    if config.getoption("--agl-librosa"):
        install()


def pytest_unconfigure(config: Any) -> None:
    if config.getoption("--agl-librosa"):
        uninstall()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if config.getoption("--agl-librosa"):
        cov = coverage()
        handed = sum(cov.fallbacks.values())
        terminalreporter.write_line(
            f"agl-fast: {cov.accelerated_calls} librosa calls accelerated, {handed} handed "
            f"to librosa, {sum(cov.librosa_names.values())} lookups of librosa's own names"
        )


@pytest.fixture
def librosa_accelerated() -> Iterator[Callable[[], Coverage]]:
    """librosa patched for one test; yields :func:`coverage`."""
    was = installed()
    reset_counters()
    install()
    try:
        yield coverage
    finally:
        if not was:
            uninstall()
