"""librosa's own test suite, with its reference data, run twice in the same
environment: with plain librosa, and with agl-fast installed into it
(``-p agl_fast.compat.librosa.pytest_plugin --agl-librosa``). Every case
that passes with plain librosa must pass with agl-fast installed.

The suites and the librosa-test-data fixtures are read from
``../shared/librosa-suite`` beside the checkout (``$AGL_FAST_LIBROSA_SUITE``
elsewhere; see its README): the suite of the running librosa release,
``v0.11.0`` for librosa 0.11 (the default environment) and ``v1.0-dev``
(librosa's tests at its 1.0.0dev head) for librosa 1.0, which
``scripts/test.sh`` runs in its own Python 3.12 environment. Each run
prints the per-module table of outcomes.

    python tests/test_librosa_suite_installed.py [module ...]  # prints the table
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import librosa
import pytest

from agl_fast.compat.librosa import _version

ROOT = Path(__file__).resolve().parents[1]
SUITES = Path(
    os.environ.get("AGL_FAST_LIBROSA_SUITE", ROOT.parent / "shared" / "librosa-suite")
).resolve()
#: The suite of the running librosa release and the test modules run.
RELEASE = "v1.0-dev" if _version.at_least(1, 0) else "v0.11.0"
MODULES: dict[str, tuple[str, ...]] = {
    "v0.11.0": ("core", "features", "filters", "multichannel", "effects", "onset", "beat",
                "display", "convert", "decompose"),
    "v1.0-dev": ("core", "features", "filters", "multichannel", "effects", "onset"),
}  # fmt: skip
#: Worker processes per run (pytest-xdist, when installed).
WORKERS = int(os.environ.get("AGL_FAST_LIBROSA_SUITE_WORKERS", "2"))

#: Per release, the cases that end differently, each with the reason. Only
#: cases that fail with plain librosa belong here (the test checks it): a
#: case that passes with plain librosa must pass with agl-fast installed.
KNOWN: dict[str, dict[str, str]] = {"v0.11.0": {}, "v1.0-dev": {}}


def suite_dir() -> Path:
    return SUITES / RELEASE / "tests"


def prepare(dest: Path) -> Path:
    """A writable copy of the release's tests with the fixtures linked in as
    ``tests/data`` (the tests read them by that relative path)."""
    shutil.copytree(suite_dir(), dest / "tests", symlinks=True)
    (dest / "tests" / "data").symlink_to(SUITES / "data", target_is_directory=True)
    return dest


def outcomes(xml: Path) -> dict[str, str]:
    """Test id -> passed / failed / error / skipped, from a JUnit XML file."""
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[name] = {"failure": "failed"}.get(kinds[0], kinds[0]) if kinds else "passed"
    return out


def _xdist() -> list[str]:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return []
    return ["-n", str(WORKERS)] if WORKERS > 1 else []


def run(root: Path, accelerated: bool, modules: tuple[str, ...]) -> tuple[dict[str, str], str]:
    import agl_fast

    tag = "installed" if accelerated else "plain"
    pkg = str(Path(agl_fast.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=pkg, MPLBACKEND="Agg")
    xml = root / f"{tag}.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "--tb=no", "-rN", "-p", "no:cacheprovider",
           "-o", "addopts=", "-W", "ignore::DeprecationWarning", "-W",
           "ignore::pytest.PytestUnknownMarkWarning", "--librosa-isolation",
           f"--junitxml={xml}", *_xdist()]  # fmt: skip
    if accelerated:
        cmd += ["-p", "agl_fast.compat.librosa.pytest_plugin", "--agl-librosa"]
    cmd += [f"tests/test_{m}.py" for m in modules]
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=2400)
    if not xml.is_file():
        tail = r.stdout[-3000:] + r.stderr[-3000:]
        raise AssertionError(f"the {tag} run wrote no report:\n{tail}")
    return outcomes(xml), r.stdout


def compare(
    root: Path, modules: tuple[str, ...]
) -> tuple[dict[str, Counter[str]], dict[str, str], dict[str, str], str]:
    """Per-module counts of both runs, the outcomes of each, and the
    installed run's summary."""
    plain, _ = run(root, False, modules)
    fast, summary = run(root, True, modules)
    table: dict[str, Counter[str]] = {}
    for tag, results in (("plain", plain), ("installed", fast)):
        for name, result in results.items():
            module = name.split("::")[0].rsplit(".", 1)[-1]
            table.setdefault(module, Counter())[f"{tag} {result}"] += 1
    return table, plain, fast, summary


def markdown(table: dict[str, Counter[str]]) -> str:
    """The per-module table: passed/failed/error/skipped, plain | installed."""
    kinds = ("passed", "failed", "error", "skipped")
    lines = [
        f"librosa {librosa.__version__}, suite {RELEASE}: plain | with agl-fast installed",
        "| module | " + " | ".join(kinds) + " |",
        "|---|" + "---:|" * len(kinds),
    ]
    total: Counter[str] = Counter()
    for module, c in [*sorted(table.items()), ("total", total)]:
        if module != "total":
            total.update(c)
        cells = [f"{c[f'plain {k}']} \\| {c[f'installed {k}']}" for k in kinds]
        lines.append(f"| {module} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdict(plain: dict[str, str], fast: dict[str, str]) -> tuple[list[str], list[str]]:
    """Cases that pass plain but not installed, and every case ending
    differently that ``KNOWN`` does not explain (or explains wrongly)."""
    known = KNOWN[RELEASE]
    regressions = sorted(
        f"{n}: plain passed, installed {fast.get(n)}"
        for n in plain
        if plain[n] == "passed" and fast.get(n) != "passed"
    )
    differ = {n for n in set(plain) | set(fast) if plain.get(n) != fast.get(n)}
    unexplained = sorted(
        f"{n}: plain {plain.get(n)}, installed {fast.get(n)}" for n in differ - set(known)
    )
    stale = sorted(f"{n}: listed in KNOWN but ends the same" for n in set(known) - differ)
    return regressions, unexplained + stale


@pytest.mark.skipif(
    not (SUITES / RELEASE / "tests" / "test_core.py").is_file(),
    reason=f"librosa's suite {RELEASE} is not at {SUITES} (set AGL_FAST_LIBROSA_SUITE)",
)
def test_librosa_suite_passes_with_agl_fast_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, plain, fast, summary = compare(prepare(tmp_path), MODULES[RELEASE])
    with capsys.disabled():
        print("\n" + markdown(table))
        print(*[line for line in summary.splitlines() if line.startswith("agl-fast:")], sep="\n")
    for name in KNOWN[RELEASE]:
        assert plain.get(name) != "passed", f"{name} passes plain: it cannot be a known difference"
    regressions, unexplained = verdict(plain, fast)
    assert not regressions, "\n".join(regressions[:60])
    assert not unexplained, "\n".join(unexplained[:60])
    assert sum(r == "passed" for r in plain.values()) > 3000
    m = re.search(r"agl-fast: (\d+) test cases ran agl-fast code; per function: (.*)", summary)
    assert m and int(m.group(1)) > 1000, summary
    ran = dict(item.split("=") for item in m.group(2).split(", "))
    # each of these ran agl-fast code in some of librosa's cases
    for name in ("stft", "istft", "load", "power_to_db", "to_mono", "pcen", "feature.mfcc",
                 "feature.chroma_stft", "feature.spectral_contrast", "feature.delta",
                 "util.normalize", "filters.mel", "onset.onset_strength"):  # fmt: skip
        assert int(ran.get(name, 0)) > 0, (name, ran)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        table, plain, fast, summary = compare(
            prepare(Path(tmp)), tuple(sys.argv[1:]) or MODULES[RELEASE]
        )
    print(markdown(table))
    print(*[line for line in summary.splitlines() if line.startswith("agl-fast:")], sep="\n")
    regressions, unexplained = verdict(plain, fast)
    print(f"{len(regressions)} cases pass plain and not installed", *regressions[:60], sep="\n")
    print(f"{len(unexplained)} other differences", *unexplained[:60], sep="\n")
