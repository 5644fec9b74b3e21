"""Start-up of the drop-in: ``import agl_fast``, ``import
agl_fast.compat.librosa``, ``install()`` and ``python -m
agl_fast.compat.librosa`` import nothing a script does not import, and
patching librosa module by module, as the script imports them, ends in the
same state as patching them all at once, whatever the order.

Each case runs in a fresh interpreter: what a process has imported is the
point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("librosa")

ROOT = Path(__file__).resolve().parents[1]
#: Modules that only a script's own computation may bring in.
HEAVY = ("numpy", "scipy", "numba", "pyarrow", "agl_fast._native", "agl_fast.features",
         "agl_fast.compat.librosa._toplevel", "librosa.core")  # fmt: skip


def _python(code: str, *args: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_importing_the_package_and_install_load_nothing_heavy() -> None:
    out = _python(
        """
        import sys
        import agl_fast
        import agl_fast.compat.librosa as librosa
        librosa.install()
        assert librosa.installed()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "scipy", "numba",
              "pyarrow", "librosa") or m.startswith("agl_fast")))
        """
    )
    loaded = eval(out)
    assert not [m for m in loaded if m.startswith(("numpy", "scipy", "numba", "pyarrow", "lib"))]
    assert not [m for m in HEAVY if m in loaded]


def test_the_runner_imports_only_what_the_script_imports(tmp_path: Path) -> None:
    script = tmp_path / "empty.py"
    script.write_text("import sys, librosa\nprint(sorted(sys.modules))\n")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=300, check=True)  # fmt: skip
    ran = subprocess.run([sys.executable, "-m", "agl_fast.compat.librosa", str(script)],
                         capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    before, under = set(eval(plain.stdout)), set(eval(ran.stdout))
    extra = sorted(under - before)
    assert not [m for m in HEAVY if m in under], extra
    # besides the runner's own modules, only the standard library's (runpy's)
    others = [m for m in extra if m.split(".")[0] not in ("agl_fast", *sys.stdlib_module_names)]
    assert not others, others


#: Imports and lookups a script makes; the same in every order below.
_TOUCH = """
import librosa, librosa.feature, librosa.onset, librosa.effects, librosa.filters
import librosa.util
TOUCHED = [(librosa, n) for n in ("stft", "load", "power_to_db", "istft")]
TOUCHED += [(librosa.core, n) for n in ("stft", "load", "power_to_db", "istft")]
TOUCHED += [(librosa.feature, "mfcc"), (librosa.feature, "delta"), (librosa.util, "normalize"),
            (librosa.effects, "trim"), (librosa.onset, "onset_strength")]
for module, name in TOUCHED:
    getattr(module, name)
"""

_STATE = """
import json, sys
from agl_fast.compat.librosa._coverage import ACCELERATED
names = {q.rpartition(".")[2] for q in ACCELERATED}
def state():
    # what every librosa namespace holds under an accelerated name, and
    # what each name the script looked up resolves to now
    out = {}
    for key, mod in sorted(sys.modules.items()):
        if key == "librosa" or key.startswith("librosa."):
            for name in sorted(names & mod.__dict__.keys()):
                v = mod.__dict__[name]
                out[f"{key}.{name}"] = f"{v.__module__}.{v.__qualname__}"
    for module, name in TOUCHED:
        v = getattr(module, name)
        out[f"resolved {module.__name__}.{name}"] = f"{v.__module__}.{v.__qualname__}"
    return out
"""


def _states(order: str) -> dict[str, dict[str, str]]:
    code = _STATE + {
        "plain": _TOUCH + "print(json.dumps({'patched': state()}))",
        "install first": "import agl_fast.compat.librosa as c\nc.install()\n" + _TOUCH
        + "p = state(); c.uninstall()\nprint(json.dumps({'patched': p, 'after': state()}))",
        "import first": _TOUCH + "import agl_fast.compat.librosa as c\nc.install()\n"
        + "p = state(); c.uninstall()\nprint(json.dumps({'patched': p, 'after': state()}))",
        "halfway": "import librosa.core\nimport agl_fast.compat.librosa as c\nc.install()\n"
        + _TOUCH
        + "p = state(); c.uninstall()\nprint(json.dumps({'patched': p, 'after': state()}))",
    }[order]  # fmt: skip
    return json.loads(_python(code).strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_patching_before_or_after_an_import_ends_the_same() -> None:
    """install() then imports, imports then install(), and install() between
    them patch the same places with the same functions; uninstall() leaves
    librosa as a process that never installed: librosa's own originals in
    every place a plain process holds them."""
    plain = _states("plain")["patched"]
    runs = {order: _states(order) for order in ("install first", "import first", "halfway")}
    first = runs["install first"]["patched"]
    for order, got in runs.items():
        # the same in every namespace both hold (installing first leaves
        # librosa's defining modules unimported where agl-fast serves the
        # name, e.g. librosa.feature.utils for feature.delta)
        common = got["patched"].keys() & first.keys()
        assert {k: got["patched"][k] for k in common} == {k: first[k] for k in common}, order
        assert all(v.startswith("agl_fast.compat.librosa") for v in got["patched"].values())
        # what the lookups give is librosa's own again, and every namespace
        # holds librosa's or nothing (a lazy package looks it up again)
        assert got["after"].items() <= plain.items(), order
        resolved = {k: v for k, v in plain.items() if k.startswith("resolved")}
        assert resolved.items() <= got["after"].items(), order
    # every place a plain process holds one of the originals now holds
    # agl-fast's, and so does every lookup
    assert plain.keys() <= runs["import first"]["patched"].keys()
    assert len(plain) >= 40  # 0.11: librosa, core, spectrum, constantq, onset, ...


def test_a_hand_over_before_librosa_is_imported_calls_librosa() -> None:
    """A call the layer hands to librosa, made before the librosa module
    defining it is imported, reaches librosa's own function (the lookup
    imports the module, which install() patches at once)."""
    out = _python(
        """
        import numpy as np
        import agl_fast.compat.librosa as c
        c.install()
        y = np.sin(np.arange(8000) / 7.0).astype(np.float32)
        ours = c.resample(y, orig_sr=8000, target_sr=6000)  # soxr_hq: handed over
        import librosa
        assert librosa.resample is c.resample
        c.uninstall()
        theirs = librosa.resample(y, orig_sr=8000, target_sr=6000)
        assert np.array_equal(ours, theirs)
        print(sum(c.coverage().fallbacks.values()))
        """
    )
    assert out.split() == ["1"]


def test_agl_fast_names_resolve_on_first_use() -> None:
    out = _python(
        """
        import sys
        import agl_fast
        assert "numpy" not in sys.modules
        missing = [n for n in agl_fast.__all__ if getattr(agl_fast, n, None) is None]
        assert agl_fast.features.stft is agl_fast.stft and "stft" in dir(agl_fast)
        try:
            agl_fast.no_such_name
        except AttributeError as exc:
            print(missing, exc)
        """
    )
    assert out.strip() == "[] module 'agl_fast' has no attribute 'no_such_name'"


def test_the_runner_reads_its_command_line_as_python_does(tmp_path: Path) -> None:
    (tmp_path / "mymod.py").write_text("import sys\nprint(sys.argv[1:])\nsys.exit('stopped')\n")
    runner = [sys.executable, "-m", "agl_fast.compat.librosa"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    r = subprocess.run([*runner, "-m", "mymod", "a", "--report"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    # options after the module are its own; sys.exit("...") prints and exits 1
    assert (r.returncode, r.stdout.strip(), r.stderr.strip()) == (1, "['a', '--report']", "stopped")
    r = subprocess.run([*runner, "--bogus", "x.py"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "unrecognized option '--bogus'" in r.stderr
    r = subprocess.run([*runner, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m agl_fast.compat.librosa")
