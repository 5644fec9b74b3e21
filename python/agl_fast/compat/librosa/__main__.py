"""``python -m agl_fast.compat.librosa SCRIPT [ARGS...]``: run an unmodified
script with agl-fast's functions patched into librosa (:func:`install`).

``python -m agl_fast.compat.librosa -m MODULE [ARGS...]`` runs a module the
same way. With ``--report`` the coverage counters are logged to stderr at
the end: which calls ran agl-fast and which were handed to librosa, why.
"""

from __future__ import annotations

import runpy
import sys

from . import install

_USAGE = "usage: python -m agl_fast.compat.librosa [-h] [--report] (SCRIPT | -m MODULE) [ARGS ...]"
_HELP = f"""{_USAGE}

Run a script with librosa accelerated by agl-fast (install()).

positional arguments:
  SCRIPT      the script to run
  ARGS        its arguments

options:
  -h, --help  show this help message and exit
  -m MODULE   run a module (as python -m) instead
  --report    print the coverage counters"""


def _report() -> None:
    from . import coverage

    cov = coverage()
    lines = [f"agl-fast: {cov.accelerated_calls} accelerated librosa calls"]
    lines += [f"  {name}: {n}" for name, n in cov.calls.most_common()]
    for (name, reason), n in cov.fallbacks.most_common():
        lines.append(f"  handed to librosa: {name} x{n} ({reason})")
    for name, n in cov.librosa_names.most_common():
        lines.append(f"  librosa's own: {name} (looked up {n}x)")
    print("\n".join(lines), file=sys.stderr)


def _parse(argv: list[str]) -> tuple[str | None, str | None, bool, list[str]]:
    """``(module, script, report, args)`` from the command line, read as
    ``python`` reads its own: options up to the script or ``-m MODULE``,
    everything after it is the script's. (argparse is not used: it would
    cost every run its import, see benches/bench_startup.py.)"""
    report = False
    for i, arg in enumerate(argv):
        if arg in ("-h", "--help"):
            print(_HELP)
            raise SystemExit(0)
        if arg == "--report":
            report = True
        elif arg == "-m" or (arg.startswith("-m") and len(arg) > 2):
            module = arg[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            if not module:
                break
            return module, None, report, argv[i + (1 if arg[2:] else 2) :]
        elif arg == "--":
            if i + 1 < len(argv):
                return None, argv[i + 1], report, argv[i + 2 :]
            break
        elif arg.startswith("-"):
            print(f"{_USAGE}\nerror: unrecognized option {arg!r}", file=sys.stderr)
            raise SystemExit(2)
        else:
            return None, arg, report, argv[i + 1 :]
    print(f"{_USAGE}\nerror: give a SCRIPT, or -m MODULE", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    """Run the script or module named in ``argv`` under :func:`install`."""
    module, script, report, args = _parse(sys.argv[1:] if argv is None else list(argv))
    install()
    try:
        if module is not None:
            sys.argv = [module, *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [str(script), *args]
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)  # as the interpreter reports sys.exit("message")
        return 1
    finally:
        if report:
            _report()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
