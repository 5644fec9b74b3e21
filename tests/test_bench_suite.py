"""The performance gates: one table, one mechanism (the pytest-benchmark
suite in benches/), overrides that are checked, memory figures that see
native allocations, and a gate that fails the run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tomllib

import agl_fast

ROOT = Path(__file__).resolve().parents[1]
# the folder of the agl_fast under test (the installed wheel in CI, the
# source tree with a built module in development): what a child imports
PKG_ROOT = str(Path(agl_fast.__file__).resolve().parents[1])
BENCHES = ROOT / "benches"
sys.path.insert(0, str(BENCHES))

import _gates  # noqa: E402
import _memory  # noqa: E402

LINUX = Path("/proc/self/clear_refs").exists()


def test_gate_sides() -> None:
    low = _gates.Gate(2.0, "min", "x", "")
    high = _gates.Gate(100.0, "max", "B", "")
    assert low.passes(2.0) and low.passes(3.1) and not low.passes(1.99)
    assert high.passes(100.0) and high.passes(5.0) and not high.passes(100.5)
    assert ">= 2" in low.describe(1.5) and "<= 100" in high.describe(7.0)


def test_overrides_parsed_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _gates.parse_overrides(["bat=2.0, logmel = 1.75", "haversine=3"]) == {
        "bat": 2.0,
        "logmel": 1.75,
        "haversine": 3.0,
    }
    for bad in ("nope=1", "bat", "bat=fast"):
        with pytest.raises(ValueError, match="bad gate override"):
            _gates.parse_overrides([bad])
    monkeypatch.setenv(_gates.ENV, "bat=9,logmel=8")
    got = _gates.resolve(["bat=7"])
    assert got["bat"].value == 7.0  # the option wins over the environment
    assert got["logmel"].value == 8.0
    assert got["stft_power"].value == _gates.GATES["stft_power"].value
    assert got["bat"].kind == "min" and got["bat"].unit == _gates.GATES["bat"].unit


def test_every_gate_is_used_by_the_suite() -> None:
    suite = "".join(p.read_text() for p in BENCHES.glob("test_*.py"))
    names = set(re.findall(r'"([a-z0-9_]+)"', suite)) | {
        f"{w}_peak_bytes_per_audio_s" for w in ("stft_power", "logmel", "bat", "efficientat")
    }
    unused = sorted(set(_gates.GATES) - names)
    assert not unused, f"gates no benchmark applies: {unused}"


def test_one_mechanism() -> None:
    """No benchmark script has a gate option; CI runs the suite, not the scripts."""
    for script in BENCHES.glob("bench_*.py"):
        text = script.read_text()
        assert not re.search(r"add_argument\(\s*\"--[a-z-]*gate", text), script.name
    ci = (ROOT / "scripts" / "test.sh").read_text()
    assert re.search(r"pytest .*benches/", ci) and "--benchmark-json" in ci
    assert "--benchmark-only" in ci and "--bench-quick" in ci
    assert not re.search(r"benches/bench_\w+\.py", ci)
    # the plain test run does not collect the benchmarks
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert conf["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


@pytest.mark.skipif(not LINUX, reason="peak RSS reset needs Linux /proc")
def test_peak_growth_sees_the_allocation() -> None:
    n = 48 * 2**20

    def alloc() -> np.ndarray:
        return np.ones(n // 8)  # touched: resident

    got = _memory.peak_growth(alloc)
    assert got is not None
    growth, before = got
    assert before > 0
    assert 0.95 * n <= growth <= 1.5 * n
    small = _memory.peak_growth(lambda: np.ones(1024))
    assert small is not None and small[0] < 0.1 * n


@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_descendant_peaks_sees_a_child() -> None:
    code = "import time; b = bytearray(64 * 2**20); time.sleep(0.5)"
    with _memory.DescendantPeaks(interval=0.02) as peaks:
        subprocess.run([sys.executable, "-c", code], check=True)
        time.sleep(0.05)
    assert peaks.peaks, "the child was not seen"
    assert max(peaks.peaks.values()) >= 64 * 2**20


@pytest.mark.slow
def test_a_ratio_below_its_gate_fails_the_run(tmp_path: Path) -> None:
    """The haversine pair at a gate nothing reaches: the run fails, says
    why, and the JSON still holds the measured figures."""
    out = tmp_path / "bench.json"
    env = dict(os.environ, AGL_FAST_BENCH_QUICK="1", PYTHONPATH=PKG_ROOT)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd += ["benches/test_geo.py", "-k", "haversine", "--benchmark-only"]
    cmd += ["--bench-gate", "haversine=1e9", "--benchmark-json", str(out)]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    assert "below its gate" in res.stdout and "haversine" in res.stdout
    import json

    info = json.loads(out.read_text())["benchmarks"][0]["extra_info"]
    assert info["verdict:haversine"] == "FAIL" and info["gate:haversine"] == 1e9
    assert info["ratio"] > 1 and info["peak_rss_bytes"] > 0

    bad = subprocess.run(
        [*cmd[:-4], "--bench-gate", "nope=1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 4 and "bad gate override" in bad.stderr
