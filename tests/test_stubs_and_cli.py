"""The native stubs match the compiled module; the CLI runs the library."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_native_stubs_match_the_module() -> None:
    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "agl_fast._native", "--concise"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_features_demo_runs_the_real_pipeline() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agl_fast.cli", "features", "--demo"],
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["shape"] == [4, 1001, 128]
    sin = summary["ipd_sin_per_second"]
    # The demo source moves from one ear to the other: the interaural phase
    # changes sign between the first and the last second.
    assert sin[0] * sin[-1] < 0


def test_cli_without_command_prints_help() -> None:
    out = subprocess.run([sys.executable, "-m", "agl_fast.cli"], capture_output=True, text=True)
    assert out.returncode == 2 and "features" in out.stdout
