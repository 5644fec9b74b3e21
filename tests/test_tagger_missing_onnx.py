"""``agl-fast tagger export`` without the ``onnx`` package: the one-line pip message.

``onnx`` is installed here; a child process hides it with a meta-path finder
that refuses to import it, as an environment without it would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import agl_fast

ROOT = Path(__file__).resolve().parents[1]
# the folder of the agl_fast under test (the installed wheel in CI, the
# source tree with a built module in development): what a child imports
PKG_ROOT = str(Path(agl_fast.__file__).resolve().parents[1])

_CHILD = """
import importlib.abc, sys

class NoOnnx(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "onnx" or name.startswith("onnx."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoOnnx())
from agl_fast.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_export_without_onnx_prints_the_pip_line(tmp_path: Path) -> None:
    out = tmp_path / "mn10.onnx"
    env = {**os.environ, "PYTHONPATH": PKG_ROOT}
    argv = ["tagger", "export", "--random", "mn10_as", "--out", str(out)]
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "agl-fast: 'tagger' needs the missing package onnx: pip install 'agl-fast[torch]'"
    ]
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert not out.exists()
