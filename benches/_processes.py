"""Whole processes timed from outside: wall clock, CPU seconds and peak
resident memory of one child, start-up included, and two commands taking
turns.

Each child's CPU time and peak RSS are the operating system's accounting of
that child alone (``os.wait4``); the wall clock is read just before it
starts and just after it is reaped. The children are forked by a small
launcher process (a bare interpreter, no site packages): a child's peak
cannot read below the memory of the process that forked it, and the
benchmark's own interpreter (numpy loaded) would hide the figures.
Linux (``ru_maxrss`` in KiB). Commands that take turns (A B A B ...)
see the same spells of a machine whose speed drifts, so their paired
differences and ratios hold where absolute times do not. The figures are
medians over the pairs (one slow or lucky run does not move them).
"""

from __future__ import annotations

import atexit
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: One thread for every pool of the child processes.
THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
           "AGL_FAST_NUM_THREADS")  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One finished child: wall and CPU (user + system) seconds, peak RSS
    in bytes."""

    wall: float
    cpu: float
    peak: int


def child_env(pythonpath: str | None = None) -> dict[str, str]:
    """This process's environment with every thread pool at one thread, a
    non-interactive matplotlib and ``pythonpath`` first on ``PYTHONPATH``."""
    env = dict(os.environ)
    for v in THREADS:
        env[v] = "1"
    env["MPLBACKEND"] = "Agg"
    if pythonpath:
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = pythonpath + (os.pathsep + rest if rest else "")
    return env


#: The launcher: reads (argv, env, cwd, stderr path) records, forks and
#: execs each, and answers (exit code, wall s, CPU s, peak KiB).
_LAUNCHER = """
import json, os, sys, time
inp, out = sys.stdin.buffer, sys.stdout.buffer
while len(head := inp.read(4)) == 4:
    cmd, env, cwd, err = json.loads(inp.read(int.from_bytes(head, "little")))
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.dup2(os.open(os.devnull, os.O_RDWR), 0)
            os.dup2(0, 1)
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
            os.execvpe(cmd[0], cmd, env)
        finally:
            os._exit(127)
    _, status, use = os.wait4(pid, 0)
    wall = time.perf_counter() - t
    answer = json.dumps((os.waitstatus_to_exitcode(status), wall,
                         use.ru_utime + use.ru_stime, use.ru_maxrss)).encode()
    out.write(len(answer).to_bytes(4, "little") + answer)
    out.flush()
"""
_launcher: list[subprocess.Popen[bytes]] = []


def _launch() -> subprocess.Popen[bytes]:
    if not _launcher:
        proc = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
        _launcher.append(proc)
        atexit.register(proc.stdin.close)  # type: ignore[union-attr]
    return _launcher[0]


def run(cmd: list[str], env: dict[str, str], cwd: str | None = None) -> Run:
    """Run ``cmd`` to its end; raise ``RuntimeError`` with its error output
    when it fails."""
    proc = _launch()
    assert proc.stdin is not None and proc.stdout is not None
    with tempfile.NamedTemporaryFile(suffix=".err") as err:
        record = json.dumps((list(cmd), dict(env), cwd or os.getcwd(), err.name)).encode()
        proc.stdin.write(len(record).to_bytes(4, "little") + record)
        proc.stdin.flush()
        size = int.from_bytes(proc.stdout.read(4), "little")
        code, wall, cpu, peak_kib = json.loads(proc.stdout.read(size))
        if code != 0:
            tail = Path(err.name).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{tail}")
    return Run(wall, cpu, peak_kib * 1024)


@dataclass(frozen=True)
class Paired:
    """Medians of two commands that took turns, and of their pairs."""

    a: Run
    b: Run
    wall_ratio: float  # median over pairs of b.wall / a.wall
    cpu_ratio: float  # median over pairs of b.cpu / a.cpu
    wall_over: float  # median over pairs of b.wall - a.wall, seconds
    cpu_over: float  # median over pairs of b.cpu - a.cpu, seconds
    peak_over: int  # median over pairs of b.peak - a.peak, bytes
    pairs: int


def paired(a: list[str], b: list[str], env: dict[str, str], pairs: int, warmup: int = 1) -> Paired:
    """``a`` and ``b`` in turn (``warmup`` uncounted pairs first: the file
    cache, bytecode and numba's on-disk cache)."""
    for _ in range(warmup):
        run(a, env)
        run(b, env)
    ra: list[Run] = []
    rb: list[Run] = []
    for _ in range(pairs):
        ra.append(run(a, env))
        rb.append(run(b, env))

    def med(values: list[float]) -> float:
        return float(statistics.median(values))

    def median_run(runs: list[Run]) -> Run:
        return Run(med([r.wall for r in runs]), med([r.cpu for r in runs]),
                   int(med([r.peak for r in runs])))  # fmt: skip

    return Paired(
        median_run(ra),
        median_run(rb),
        med([y.wall / x.wall for x, y in zip(ra, rb, strict=True)]),
        med([y.cpu / x.cpu for x, y in zip(ra, rb, strict=True)]),
        med([y.wall - x.wall for x, y in zip(ra, rb, strict=True)]),
        med([y.cpu - x.cpu for x, y in zip(ra, rb, strict=True)]),
        int(med([y.peak - x.peak for x, y in zip(ra, rb, strict=True)])),
        pairs,
    )
