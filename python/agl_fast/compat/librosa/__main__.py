"""``python -m agl_fast.compat.librosa SCRIPT [ARGS...]``: run an unmodified
script with agl-fast's functions patched into librosa (:func:`install`).

``python -m agl_fast.compat.librosa -m MODULE [ARGS...]`` runs a module the
same way. With ``--report`` the coverage counters are logged to stderr at
the end: which calls ran agl-fast and which were handed to librosa, why.
"""

from __future__ import annotations

import argparse
import runpy
import sys

from . import coverage, install


def _report() -> None:
    cov = coverage()
    lines = [f"agl-fast: {cov.accelerated_calls} accelerated librosa calls"]
    lines += [f"  {name}: {n}" for name, n in cov.calls.most_common()]
    for (name, reason), n in cov.fallbacks.most_common():
        lines.append(f"  handed to librosa: {name} x{n} ({reason})")
    for name, n in cov.librosa_names.most_common():
        lines.append(f"  librosa's own: {name} (looked up {n}x)")
    print("\n".join(lines), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the script or module named in ``argv`` under :func:`install`."""
    parser = argparse.ArgumentParser(
        prog="python -m agl_fast.compat.librosa",
        description="Run a script with librosa accelerated by agl-fast (install()).",
    )
    parser.add_argument("-m", dest="module", help="run a module (as python -m) instead")
    parser.add_argument("--report", action="store_true", help="print the coverage counters")
    parser.add_argument("target", nargs="?", help="the script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    ns = parser.parse_args(argv)
    if ns.module is None and ns.target is None:
        parser.error("give a SCRIPT, or -m MODULE")
    install()
    try:
        if ns.module is not None:
            rest = [ns.target, *ns.args] if ns.target is not None else ns.args
            sys.argv = [ns.module, *rest]
            runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [ns.target, *ns.args]
            runpy.run_path(ns.target, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        if ns.report:
            _report()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
