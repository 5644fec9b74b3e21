"""``tests/librosa_script.py`` (34 librosa calls, a figure saved) end to end:
plain librosa against ``python -m agl_fast.compat.librosa``, each a fresh
process (imports included), one thread, taking turns.

    python benches/bench_librosa_script.py [--seconds 60] [--repeat 3]

The clip is a 22,050 Hz WAV of notes over noise (``--seconds`` long). Each
run is timed in wall-clock seconds and in the child's CPU seconds (user +
system: robust to other jobs on a shared machine); the figures are the best
of ``--repeat`` turns. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "librosa_script.py"
SR = 22050
#: One thread for every pool of the child processes.
THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
           "AGL_FAST_NUM_THREADS")  # fmt: skip


def write_clip(path: Path, seconds: float) -> None:
    """Notes with sharp onsets every half second over faint noise."""
    rng = np.random.default_rng(3)
    n = int(SR * seconds)
    y = 0.002 * rng.standard_normal(n)
    t = np.arange(int(0.4 * SR)) / SR
    for k, start in enumerate(np.arange(0.5, seconds - 0.5, 0.5)):
        note = np.sin(2 * np.pi * 220.0 * 2 ** (k % 7 / 12) * t) * np.exp(-6 * t)
        at = int(start * SR)
        y[at : at + t.size] += 0.5 * note[: n - at]
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((np.clip(y, -1, 1) * 32767).astype("<i2").tobytes())


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(seconds: float = 60.0, repeat: int = 3) -> dict[str, tuple[float, float]]:
    """Best wall-clock and CPU seconds of the script under plain librosa
    (``"librosa"``) and under the accelerator (``"agl-fast"``)."""
    env = dict(os.environ)
    for v in THREADS:
        env[v] = "1"
    env["MPLBACKEND"] = "Agg"
    best = {"librosa": (float("inf"), float("inf")), "agl-fast": (float("inf"), float("inf"))}
    with tempfile.TemporaryDirectory() as tmp:
        clip = Path(tmp) / "clip.wav"
        write_clip(clip, seconds)
        outs = [str(clip), str(Path(tmp) / "out.npz"), str(Path(tmp) / "out.png")]
        cmds = {
            "librosa": [sys.executable, str(SCRIPT), *outs],
            "agl-fast": [sys.executable, "-m", "agl_fast.compat.librosa", str(SCRIPT), *outs],
        }
        for cmd in cmds.values():  # warm the file cache and the imports
            _run(cmd, env)
        for _ in range(repeat):
            for name, cmd in cmds.items():
                wall, cpu = _run(cmd, env)
                best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def table(best: dict[str, tuple[float, float]], seconds: float) -> str:
    """The Markdown table of :func:`measure`'s figures."""
    (lw, lc), (aw, ac) = best["librosa"], best["agl-fast"]
    return "\n".join(
        [
            f"| `tests/librosa_script.py` ({seconds:g} s clip, whole process) | librosa s "
            "| agl-fast s | speed-up |",
            "|---|---:|---:|---:|",
            f"| wall clock | {lw:.2f} | {aw:.2f} | {lw / aw:.2f}x |",
            f"| CPU (user + system) | {lc:.2f} | {ac:.2f} | {lc / ac:.2f}x |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(table(measure(args.seconds, args.repeat), args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
