"""pytest plugin: a test suite's librosa calls run on agl-fast.

Enable it with ``pytest -p agl_fast.compat.librosa.pytest_plugin``:

* ``--agl-librosa`` patches librosa for the whole session
  (:func:`agl_fast.compat.librosa.install`, undone at the end), and the
  terminal summary reports how many calls were accelerated;
* the ``librosa_accelerated`` fixture does it for one test, with the
  counters set to zero, and yields :func:`~agl_fast.compat.librosa.coverage`
  (call it for the counters so far).

Under pytest-xdist (``-n``) each worker patches its own librosa and sends
its counters to the controller, whose summary adds them up.
"""

from __future__ import annotations

from collections import Counter
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


#: Per accelerated name: the test cases in which it ran agl-fast code at
#: least once (``--agl-librosa`` sessions).
_CASES: Counter[str] = Counter()


def _accelerated_by_name(cov: Coverage) -> Counter[str]:
    ran = Counter(cov.calls)
    ran.subtract(Counter(name for (name, _reason) in cov.fallbacks.elements()))
    return +ran


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Iterator[None]:
    before = _accelerated_by_name(coverage()) if item.config.getoption("--agl-librosa") else None
    yield
    if before is not None:
        ran = _accelerated_by_name(coverage())
        ran.subtract(before)
        _CASES.update(name for name, n in ran.items() if n > 0)
        _CASES["(any)"] += any(n > 0 for n in ran.values())


#: Counters received from pytest-xdist workers: accelerated calls, calls
#: handed to librosa, lookups of librosa's own names.
_WORKERS: Counter[str] = Counter()


def _totals() -> Counter[str]:
    cov = coverage()
    return Counter(
        accelerated=cov.accelerated_calls,
        handed=sum(cov.fallbacks.values()),
        lookups=sum(cov.librosa_names.values()),
    )


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and session.config.getoption("--agl-librosa"):
        workeroutput["agl_fast_librosa"] = {"totals": dict(_totals()), "cases": dict(_CASES)}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    sent = getattr(node, "workeroutput", {}).get("agl_fast_librosa")
    if sent:
        _WORKERS.update(sent["totals"])
        _CASES.update(sent["cases"])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if config.getoption("--agl-librosa"):
        totals = _totals() + _WORKERS
        terminalreporter.write_line(
            f"agl-fast: {totals['accelerated']} librosa calls accelerated, {totals['handed']} "
            f"handed to librosa, {totals['lookups']} lookups of librosa's own names"
        )
        terminalreporter.write_line(
            f"agl-fast: {_CASES['(any)']} test cases ran agl-fast code; per function: "
            + ", ".join(f"{n}={c}" for n, c in sorted(_CASES.items()) if n != "(any)")
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
