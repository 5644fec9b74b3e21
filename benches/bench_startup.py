"""Start-up cost of ``python -m agl_fast.compat.librosa``: an empty script
(``import librosa``) run plain and under the runner, each a fresh process,
taking turns; the overhead is the median over pairs of the difference in
wall-clock time and in peak resident memory.

    python benches/bench_startup.py [--pairs 20] [--python PYTHON]

``--python`` names the interpreter of the child processes (another
environment with another librosa, e.g. a Python 3.12 one with librosa
1.0); this tree's ``python/`` is put first on their ``PYTHONPATH``. Prints
a Markdown table. The budget (``benches/test_startup.py``, gates
``startup_overhead_ms`` and ``startup_overhead_mb`` in
``benches/_gates.py``) is 50 ms and 30 MB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _processes import Paired, child_env, paired

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024


def versions(python: str) -> str:
    """``Python x.y.z, librosa a.b.c`` of an interpreter."""
    code = (
        "import sys, importlib.metadata as m; print(sys.version.split()[0], m.version('librosa'))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    py, lr = out.stdout.split()
    return f"Python {py}, librosa {lr}"


def measure(python: str = sys.executable, pairs: int = 20) -> Paired:
    """``python empty.py`` (a) against ``python -m agl_fast.compat.librosa
    empty.py`` (b), where ``empty.py`` is ``import librosa``."""
    env = child_env(str(ROOT / "python"))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "empty.py"
        script.write_text("import librosa\n")
        plain = [python, str(script)]
        runner = [python, "-m", "agl_fast.compat.librosa", str(script)]
        return paired(plain, runner, env, pairs, warmup=2)


def table(rows: list[tuple[str, Paired]]) -> str:
    """The Markdown table of :func:`measure`'s figures, one row per interpreter."""
    lines = [
        "| empty script (`import librosa`) | plain ms | runner ms | overhead ms "
        "| plain MB | runner MB | overhead MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, p in rows:
        lines.append(
            f"| {label} | {p.a.wall * 1e3:.0f} | {p.b.wall * 1e3:.0f} | {p.wall_over * 1e3:.0f} "
            f"| {p.a.peak / MB:.1f} | {p.b.peak / MB:.1f} | {p.peak_over / MB:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--python", action="append", help="child interpreter (repeatable)")
    args = ap.parse_args(argv)
    rows = [(versions(py), measure(py, args.pairs)) for py in args.python or [sys.executable]]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
