"""The lock of binary pairs and the extras users install agree.

``requirements/constraints.txt`` holds the exact versions the test suite is
installed with (scripts/test.sh); the ``torch``, ``hf``, ``cpu`` and ``gpu``
extras must pin the very same versions, so ``pip install 'agl-fast[hf]'``
gives a user what the tests ran on.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "constraints.txt"
PAIRS = ("torch", "torchaudio", "torchvision", "onnxruntime", "onnxruntime-gpu")


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.+]*)", line)
            assert m, f"not an exact pin in {LOCK.name}: {line!r}"
            pins[m.group(1).lower()] = m.group(2)
    return pins


def extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]


def test_every_binary_pair_is_locked_exactly() -> None:
    pins = lock_pins()
    for name in PAIRS:
        assert name in pins, name
    # torchvision 0.N goes with torch 2.(N - 15); torchaudio shares torch's version
    torch_minor = int(pins["torch"].split(".")[1])
    assert pins["torchaudio"].split(".")[:2] == pins["torch"].split(".")[:2]
    assert int(pins["torchvision"].split(".")[1]) == torch_minor + 15
    # the CPU and GPU builds of ONNX Runtime are one tested version
    assert pins["onnxruntime"] == pins["onnxruntime-gpu"]


def test_extras_pin_the_locked_versions() -> None:
    pins = lock_pins()
    seen = set()
    for extra, reqs in extras().items():
        for req in reqs:
            name = re.split(r"[<>=\[;!~ ]", req, maxsplit=1)[0].lower()
            if name in pins:
                assert req == f"{name}=={pins[name]}", (extra, req)
                seen.add(name)
    assert set(PAIRS) <= seen
    # each extra that brings torch brings the pair it is tested with
    for extra in ("torch", "hf"):
        names = {re.split(r"[<>=\[;!~ ]", r, maxsplit=1)[0] for r in extras()[extra]}
        assert {"torch", "torchaudio"} <= names, extra


def test_test_requirements_go_through_the_lock() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "-c requirements/constraints.txt" in script
    for name in ("test.txt", "torch.txt"):
        for line in (ROOT / "requirements" / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            req = re.split(r"[<>=\[;!~ ]", line, maxsplit=1)[0].lower()
            if req in lock_pins():
                # a range here would fight the lock; the version lives there only
                assert line.lower() == req, f"{name}: {line!r} repeats a locked pin"


def test_check_env_names_a_pin_that_disagrees(tmp_path: Path) -> None:
    # an environment whose numpy disagrees with a lock that pins it must stop
    # with one line: run the checker against a copy whose lock names numpy
    import numpy

    script = (ROOT / "scripts" / "check_env.py").read_text()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "requirements").mkdir()
    (tmp_path / "scripts" / "check_env.py").write_text(script)
    (tmp_path / "requirements" / "constraints.txt").write_text("numpy==0.0.1\n")
    out = subprocess.run(
        [sys.executable, str(tmp_path / "scripts" / "check_env.py"), "--no-torch"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    assert f"numpy {numpy.__version__} is installed" in lines[0]
    assert "numpy==0.0.1" in lines[0]
