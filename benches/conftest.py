"""The pytest-benchmark suite: agl-fast against its best peers, with gates.

    pytest benches/ --benchmark-only                 # full sizes
    pytest benches/ --benchmark-only --bench-quick   # the CI sizes (also AGL_FAST_BENCH_QUICK=1)
    pytest benches/ --benchmark-only --bench-gate bat=2.0   # override one gate

Gates are in ``benches/_gates.py``. Every test checks the outputs of
agl-fast and its peers first, then times them in alternating rounds on one
thread (process CPU time) and fails below its ratio gate or above its
memory gate. The figures are in each benchmark's ``extra_info`` (the JSON of
``--benchmark-json``) and in a table at the end of the run.
"""

from __future__ import annotations

import os

# One thread for every peer's pools (BLAS, OpenMP, numba), set before numpy loads.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _gates  # noqa: E402
import _suite  # noqa: E402

QUICK_ENV = "AGL_FAST_BENCH_QUICK"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agl-fast benchmarks")
    group.addoption(
        "--bench-quick",
        action="store_true",
        default=False,
        help=f"the CI sizes: shorter data and fewer rounds (also {QUICK_ENV}=1)",
    )
    group.addoption(
        "--bench-gate",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"override a gate of benches/_gates.py (repeatable; also {_gates.ENV})",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        config.stash[_GATES] = _gates.resolve(config.getoption("--bench-gate"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


_GATES = pytest.StashKey[dict[str, _gates.Gate]]()


@pytest.fixture(scope="session")
def quick(pytestconfig: pytest.Config) -> bool:
    """Whether the run takes the CI sizes."""
    env = os.environ.get(QUICK_ENV, "").strip().lower() in ("1", "true", "yes")
    return bool(pytestconfig.getoption("--bench-quick")) or env


@pytest.fixture(scope="session")
def gates(pytestconfig: pytest.Config) -> dict[str, _gates.Gate]:
    """The gate table with this run's overrides."""
    return pytestconfig.stash[_GATES]


@pytest.fixture(scope="session", autouse=True)
def one_thread() -> None:
    """Peers' thread pools at one thread (threadpoolctl, torch)."""
    import bench_features

    bench_features.limit_threads(1)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    if v is None:
        return ""
    return str(v)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = _suite.ROWS
    if not rows:
        return
    tr = terminalreporter
    tr.section("agl-fast against its peers (one thread, same run)")
    tr.write_line(
        "| benchmark | ratio | best peer | agl-fast /s/core | peer /s/core | unit "
        "| agl-fast peak MB | peak B per audio s | gates |"
    )
    tr.write_line("|---|---:|---|---:|---:|---|---:|---:|---|")
    for r in rows:
        peak = r.get("peak_rss_bytes")
        verdicts = ", ".join(
            f"{k.split(':', 1)[1]} {v}" for k, v in r.items() if k.startswith("verdict:")
        )
        tr.write_line(
            f"| {r['name']} | {_fmt(r.get('ratio'))} | {_fmt(r.get('best_peer'))} "
            f"| {_fmt(r.get('agl_fast_per_s'))} | {_fmt(r.get('peer_per_s'))} "
            f"| {_fmt(r.get('unit'))} | {_fmt(None if peak is None else peak / 2**20)} "
            f"| {_fmt(r.get('peak_bytes_per_audio_s'))} | {verdicts} |"
        )
