"""The source distribution carries the licence files and builds and
installs in a clean virtual environment (a full release build of the Rust
crates: minutes, hence ``slow``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LICENCES = ("LICENSE-MIT", "LICENSE-APACHE", "LICENSE-libopus")


def _maturin() -> str | None:
    here = Path(sys.executable).parent / "maturin"
    return str(here) if here.exists() else shutil.which("maturin")


@pytest.mark.slow
def test_sdist_has_licences_and_installs_in_a_clean_venv(tmp_path: Path) -> None:
    maturin, cargo = _maturin(), shutil.which("cargo")
    if maturin is None or cargo is None:
        pytest.skip("needs maturin and cargo")
    dist = tmp_path / "dist"
    subprocess.run([maturin, "sdist", "--out", str(dist)], cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    (sdist,) = dist.glob("agl_fast-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        top = tar.getnames()[0].split("/")[0]
        member = tar.extractfile(f"{top}/PKG-INFO")
        assert member is not None
        pkg_info = member.read().decode()
    assert set(LICENCES) <= names
    assert "License-Expression: MIT OR Apache-2.0" in pkg_info
    assert all(f"License-File: {f}" in pkg_info for f in LICENCES)

    # maturin writes the sdist with fixed old timestamps, so cargo would
    # take a target directory's earlier build of these crates as current:
    # the dependencies are reused, the project's own crates rebuilt.
    cache = Path(os.environ.get("AGL_FAST_CACHE", Path.home() / ".cache" / "agl-fast"))
    target = cache / "target-sdist"
    subprocess.run([cargo, "clean", "-q", "--release", "-p", "agl-core", "-p", "agl-py",
                    "--target-dir", str(target)], cwd=ROOT, check=False)  # fmt: skip
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    env = {**os.environ, "CARGO_TARGET_DIR": str(target), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(sdist)], env=env, check=True,
                   cwd=tmp_path)  # fmt: skip
    code = (
        "import agl_fast, numpy as np, importlib.metadata as m; "
        "assert agl_fast.bat(np.zeros((2, 3200), np.float32)).shape == (4, 11, 128); "
        "files = [str(f) for f in m.files('agl-fast')]; "
        f"assert all(any(f.endswith('licenses/' + n) for f in files) for n in {LICENCES!r}), files"
    )
    subprocess.run([str(py), "-c", code], env=env, check=True, cwd=tmp_path)
    out = subprocess.run([str(py), "-m", "agl_fast", "--version"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.startswith("agl-fast ")
