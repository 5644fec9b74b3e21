"""Whole programs (``benches/programs/``, written as librosa users write
them, and ``tests/librosa_script.py``): plain librosa against ``python -m
agl_fast.compat.librosa``, each a fresh process (start-up and imports
included), one thread, taking turns.

    python benches/bench_librosa_programs.py [--pairs 5] [--python PYTHON ...]

Each program runs on a corpus of WAV files written here (speech-like
clips, music-like tracks, utterances with silence around them). Its outputs
under the runner are checked against plain librosa's first (the largest
difference over the output's largest magnitude, per saved array, within
:data:`TOLERANCE`); then the two take turns, after one uncounted pair
(file cache, bytecode, numba's on-disk cache). The speed-up is the median
over pairs of plain wall clock over the runner's. ``--python`` names the
interpreter of the children (another environment with another librosa,
e.g. Python 3.12 with librosa 1.0); this tree's ``python/`` is first on
their ``PYTHONPATH``. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from _processes import Paired, child_env, paired, run
from bench_librosa_script import write_clip
from bench_startup import versions

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "programs"
#: Largest difference over an output's largest magnitude (decoder and
#: float32 rounding; the kernels' own parity is tested in tests/).
TOLERANCE = 1e-4


def _write_wav(path: Path, y: np.ndarray, sr: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes((np.clip(y, -1, 1) * 32767).astype("<i2").tobytes())


def _voice(rng: np.random.Generator, seconds: float, sr: int, pad: float = 0.0) -> np.ndarray:
    """Speech-like audio: voiced syllables (a gliding pitch with harmonics
    under a syllable envelope) and fricative noise, ``pad`` seconds of
    near-silence at each end."""
    n = int(seconds * sr)
    t = np.arange(n) / sr
    f0 = 120 + 60 * np.sin(2 * np.pi * rng.uniform(0.2, 0.6) * t) + rng.uniform(-20, 40)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    syllables = np.clip(np.sin(2 * np.pi * rng.uniform(3, 5) * t), 0, None) ** 2
    noise = rng.standard_normal(n) * (np.sin(2 * np.pi * 1.3 * t) > 0.8)
    y = 0.25 * voiced * syllables + 0.05 * noise + 0.002 * rng.standard_normal(n)
    quiet = int(pad * sr)
    return np.concatenate(
        [0.0005 * rng.standard_normal(quiet), y, 0.0005 * rng.standard_normal(quiet)]
    )


def _music(rng: np.random.Generator, seconds: float, sr: int) -> np.ndarray:
    """Music-like audio: chords of decaying harmonic notes on a beat, with
    percussive clicks and a little noise."""
    n = int(seconds * sr)
    y = 0.003 * rng.standard_normal(n)
    beat = 60 / rng.uniform(90, 140)
    t = np.arange(int(beat * sr)) / sr
    for k, start in enumerate(np.arange(0, seconds - beat, beat)):
        at = int(start * sr)
        for semis in (0, 4, 7):
            f = 110 * 2 ** ((k * 5 % 12 + semis) / 12)
            note = sum(np.sin(2 * np.pi * f * h * t) / h for h in (1, 2, 3)) * np.exp(-4 * t)
            y[at : at + t.size] += 0.12 * note[: n - at]
        y[at : at + 200] += 0.3 * rng.standard_normal(min(200, n - at))
    return y


@dataclass(frozen=True)
class Program:
    """One benchmarked program: its script, its corpus (``write(dir)``) and
    its command-line arguments (``argv(data dir, output stem)``)."""

    label: str
    script: Path
    write: Callable[[Path], None]
    argv: Callable[[Path, Path], list[str]]


def _corpus(
    make: Callable[[np.random.Generator], tuple[np.ndarray, int]], n: int
) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        rng = np.random.default_rng(7)
        for i in range(n):
            y, sr = make(rng)
            _write_wav(folder / f"{i:03d}.wav", y, sr)

    return write


def _dir_argv(folder: Path, out: Path) -> list[str]:
    return [str(folder), str(out) + ".npz"]


def _script_argv(folder: Path, out: Path) -> list[str]:
    return [str(folder / "clip.wav"), str(out) + ".npz", str(out) + ".png"]


PROGRAMS_RUN = (
    Program("speech features (40 clips of 3 s, 16 kHz)", PROGRAMS / "speech_features.py",
            _corpus(lambda r: (_voice(r, 3.0, 16000), 16000), 40), _dir_argv),
    Program("music features (12 tracks of 30 s)", PROGRAMS / "music_features.py",
            _corpus(lambda r: (_music(r, 30.0, 22050), 22050), 12), _dir_argv),
    Program("TTS front end (240 utterances of 4 s, 24 kHz)", PROGRAMS / "tts_frontend.py",
            _corpus(lambda r: (_voice(r, 4.0, 24000, pad=0.4), 24000), 240), _dir_argv),
    Program("spectrogram pipeline (16 files of 10 s)", PROGRAMS / "spectrogram_pipeline.py",
            _corpus(lambda r: (_music(r, 10.0, 22050), 22050), 16), _dir_argv),
    Program("`tests/librosa_script.py` (60 s clip)", ROOT / "tests" / "librosa_script.py",
            lambda folder: write_clip(folder / "clip.wav", 60.0), _script_argv),
)  # fmt: skip


def largest_difference(plain: Path, ours: Path) -> float:
    """The largest, over the saved arrays, of max |ours - plain| over
    max |plain|; ``inf`` when the arrays or their shapes differ."""
    with np.load(plain) as a, np.load(ours) as b:
        if set(a.files) != set(b.files):
            return float("inf")
        worst = 0.0
        for key in a.files:
            x, y = np.asarray(a[key], np.float64), np.asarray(b[key], np.float64)
            if x.shape != y.shape:
                return float("inf")
            scale = max(float(np.max(np.abs(x), initial=0.0)), 1e-12)
            worst = max(worst, float(np.max(np.abs(y - x), initial=0.0)) / scale)
    return worst


@dataclass(frozen=True)
class Row:
    """One program's figures."""

    label: str
    times: Paired
    difference: float


def measure(python: str = sys.executable, pairs: int = 5, only: str = "") -> list[Row]:
    """Every program (those whose label contains ``only``), plain (a)
    against the runner (b), outputs checked first."""
    env = child_env(str(ROOT / "python"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, prog in enumerate(p for p in PROGRAMS_RUN if only in p.label):
            data = Path(tmp) / f"data{i}"
            data.mkdir()
            prog.write(data)
            plain = [python, str(prog.script), *prog.argv(data, Path(tmp) / f"plain{i}")]
            runner = [python, "-m", "agl_fast.compat.librosa", str(prog.script),
                      *prog.argv(data, Path(tmp) / f"agl{i}")]  # fmt: skip
            run(plain, env)
            run(runner, env)
            diff = largest_difference(Path(tmp) / f"plain{i}.npz", Path(tmp) / f"agl{i}.npz")
            if not diff <= TOLERANCE:
                raise AssertionError(f"{prog.label}: outputs differ from librosa's by {diff:.3g}")
            rows.append(Row(prog.label, paired(plain, runner, env, pairs, warmup=0), diff))
    return rows


def table(results: list[tuple[str, list[Row]]]) -> str:
    """The Markdown table of :func:`measure`'s rows, one block per interpreter."""
    lines = [
        "| whole process, 1 thread | librosa s | agl-fast s | speed-up (wall) "
        "| speed-up (CPU) | max diff / scale |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, rows in results:
        for r in rows:
            lines.append(
                f"| {r.label}, {label} | {r.times.a.wall:.2f} | {r.times.b.wall:.2f} "
                f"| {1 / r.times.wall_ratio:.2f}x | {1 / r.times.cpu_ratio:.2f}x "
                f"| {r.difference:.1e} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--python", action="append", help="child interpreter (repeatable)")
    ap.add_argument("--only", default="", help="the programs whose label contains this")
    args = ap.parse_args(argv)
    results = [
        (versions(py), measure(py, args.pairs, args.only)) for py in args.python or [sys.executable]
    ]
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
