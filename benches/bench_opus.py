"""Opus decoding benchmark: ``agl_fast.load`` against soundfile and ffmpeg.

Both peers decode with libopus: soundfile through libsndfile (Ogg only:
libsndfile reads no WebM), ffmpeg as a subprocess (``-c:a libopus``, raw
float32 to a pipe), as a user without agl-fast would call them. Every row
is one 48 kHz file, mono or stereo, Ogg or WebM, encoded by ffmpeg's
libopus (96 kb/s stereo, 64 kb/s mono) from the real AGL1K recordings
(``../shared/agl1k``; pink noise and a tone where they are absent).

Outputs are compared first: agl-fast's samples against soundfile's and
ffmpeg's (same length, largest absolute difference). Then the three take
turns in every round (``--repeat`` rounds, the best of each counts), timed
in CPU seconds on one thread: this process's, plus the CPU time of the
ffmpeg child (its start-up included, which is what a call costs). Figures
are x real time per core and the ratio of each peer's time to agl-fast's.

``--curate N`` also cuts N clips of 10 s, writes each as Ogg Opus and as
MP3 (192 kb/s, 44.1 kHz), and runs ``agl_fast.pipeline.curate`` (what
``agl-fast curate`` runs; one worker process of one thread, 32 kHz) on each
folder: x real time per CPU second, Opus against MP3.

    python benches/bench_opus.py                  # 60 s files, 5 rounds
    python benches/bench_opus.py --seconds 20 --repeat 3 --curate 60

The pytest-benchmark suite (``benches/test_opus.py``) gates the ratio to
soundfile (Ogg, mono and stereo).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "AGL_FAST_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

import agl_fast  # noqa: E402
import agl_fast.audio  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "agl1k"
RATE = 48_000
#: (channels, container) of every row.
ROWS = [(c, k) for c in (1, 2) for k in ("ogg", "webm")]
_EXT = {"ogg": ".opus", "webm": ".webm"}


def ffmpeg() -> str | None:
    """The ffmpeg executable, when it has the libopus encoder and decoder."""
    exe = shutil.which("ffmpeg")
    if exe is None:
        return None
    for kind in ("-encoders", "-decoders"):
        out = subprocess.run([exe, "-hide_banner", kind], capture_output=True, text=True).stdout
        if " libopus " not in out:
            return None
    return exe


def _run(args: list[str]) -> bytes:
    done = subprocess.run(args, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} failed: {done.stderr.decode(errors='replace')[-400:]}")
    return done.stdout


def make_source(directory: Path, seconds: float) -> Path:
    """A 48 kHz stereo WAV of ``seconds``: the AGL1K recordings one after
    another (looped), or pink noise and a tone where they are absent."""
    exe = ffmpeg() or "ffmpeg"
    out = directory / "source.wav"
    mp3s = sorted(SHARED.glob("*.mp3"))
    if mp3s:
        lst = directory / "sources.txt"
        lst.write_text("".join(f"file '{p}'\n" for p in mp3s))
        inp = ["-stream_loop", "-1", "-f", "concat", "-safe", "0", "-i", str(lst)]
    else:
        inp = [
            "-f", "lavfi", "-i", f"anoisesrc=c=pink:r={RATE}:a=0.3:d={seconds}",
            "-f", "lavfi", "-i", f"sine=f=440:r={RATE}:d={seconds}",
            "-filter_complex", "amerge=inputs=2",
        ]  # fmt: skip
    out_args = ["-t", str(seconds), "-ar", str(RATE), "-ac", "2", str(out)]
    _run([exe, "-v", "error", "-y", *inp, *out_args])
    return out


def encode(src: Path, dst: Path, channels: int, codec: str = "libopus") -> Path:
    """``src`` encoded by ffmpeg: Opus in the container of ``dst``'s suffix
    (96 kb/s stereo, 64 kb/s mono), or MP3 (``codec='libmp3lame'``)."""
    rate = ["-b:a", "96k" if channels == 2 else "64k"]
    if codec == "libmp3lame":
        rate = ["-b:a", "192k", "-ar", "44100"]
    _run([ffmpeg() or "ffmpeg", "-v", "error", "-y", "-i", str(src), "-ac", str(channels),
          "-c:a", codec, *rate, str(dst)])  # fmt: skip
    return dst


def make_clips(directory: Path, seconds: float) -> dict[tuple[int, str], Path]:
    """The file of every row of :data:`ROWS`, ``seconds`` long."""
    src = make_source(directory, seconds)
    return {(c, k): encode(src, directory / f"{c}ch{_EXT[k]}", c) for c, k in ROWS}


def ffmpeg_decode(path: Path, channels: int) -> np.ndarray:
    """ffmpeg's libopus decode of ``path``, float32, shape (channels, n)."""
    raw = _run([ffmpeg() or "ffmpeg", "-v", "error", "-c:a", "libopus", "-i", str(path),
                "-f", "f32le", "-ac", str(channels), "-"])  # fmt: skip
    return np.frombuffer(raw, np.float32).reshape(-1, channels).T


def soundfile_decode(path: Path) -> np.ndarray:
    """libsndfile's decode of ``path``, float32, shape (channels, n)."""
    import soundfile as sf

    return sf.read(str(path), dtype="float32", always_2d=True)[0].T


def ours(path: Path) -> np.ndarray:
    """agl-fast's decode of ``path`` at the file's rate, shape (channels, n)."""
    y, sr = agl_fast.load(path, sr=None, mono=False)
    assert sr == RATE
    return np.atleast_2d(y)


def peers(path: Path, container: str) -> dict[str, Callable[[], object]]:
    """The peers of one row: soundfile (Ogg only) and ffmpeg."""
    out: dict[str, Callable[[], object]] = {}
    if container == "ogg":
        out["soundfile"] = lambda: soundfile_decode(path)
    ch = int(path.stem[0])
    out["ffmpeg"] = lambda: ffmpeg_decode(path, ch)
    return out


def max_differences(path: Path, container: str) -> dict[str, float]:
    """Largest absolute difference of agl-fast's samples from each peer's;
    a length mismatch raises ``AssertionError``."""
    y = ours(path)
    diffs = {}
    for name, fn in peers(path, container).items():
        ref = np.asarray(fn())
        assert ref.shape == y.shape, f"{name}: shape {ref.shape}, agl-fast {y.shape} ({path.name})"
        diffs[name] = float(np.abs(ref - y).max())
    return diffs


def cpu_clock() -> float:
    """CPU seconds of this process and of its finished children."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def time_row(path: Path, container: str, repeat: int) -> dict[str, float]:
    """Best CPU seconds of agl-fast and each peer over ``repeat`` rounds in
    which they take turns (after one untimed run each)."""
    fns = {"agl-fast": lambda: ours(path), **peers(path, container)}
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t = cpu_clock()
            fn()
            best[name] = min(best[name], cpu_clock() - t)
    return best


def curate_clips(directory: Path, n: int, seconds: float = 10.0) -> dict[str, list[str]]:
    """``n`` clips of ``seconds`` cut one after another from the source
    (around again where it ends), each written as Ogg Opus and as MP3:
    the paths by format."""
    src = make_source(directory, n * seconds)
    span = agl_fast.audio.duration(src) - seconds
    exe = ffmpeg() or "ffmpeg"
    out: dict[str, list[str]] = {"opus": [], "mp3": []}
    for fmt in out:
        (directory / fmt).mkdir()
    for i in range(n):
        cut = directory / "cut.wav"
        start = (i * seconds) % span
        _run([exe, "-v", "error", "-y", "-ss", str(start), "-t", str(seconds),
              "-i", str(src), str(cut)])  # fmt: skip
        for fmt, codec in (("opus", "libopus"), ("mp3", "libmp3lame")):
            out[fmt].append(str(encode(cut, directory / fmt / f"{i:04d}.{fmt}", 2, codec)))
    return out


def curate_figures(paths: list[str], repeat: int) -> tuple[float, float]:
    """x real time per CPU second and per wall second of ``curate`` (one
    worker of one thread, stereo, 32 kHz) over ``paths``, best of ``repeat``."""
    from bench_curate import run_curate

    total = sum(agl_fast.audio.duration(p) for p in paths)
    run_curate(paths[:1], 1, False)  # the fork server starts outside the figures
    runs = [run_curate(paths, 1, False) for _ in range(repeat)]
    return total / min(r[1] for r in runs), total / min(r[0] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each file")
    ap.add_argument("--repeat", type=int, default=5, help="rounds; the fastest of each counts")
    ap.add_argument("--curate", type=int, default=0, metavar="N", help="also curate N 10 s clips")
    args = ap.parse_args()
    if ffmpeg() is None:
        sys.exit("ffmpeg with libopus is needed to encode the files")
    with tempfile.TemporaryDirectory() as d:
        clips = make_clips(Path(d), args.seconds)
        print(f"\n{args.seconds:g} s files at 48 kHz; one thread, CPU seconds, best of "
              f"{args.repeat} alternating rounds; x real time per core\n")  # fmt: skip
        print("| channels | container | agl-fast | soundfile | ffmpeg | vs soundfile "
              "| vs ffmpeg | max abs diff (sf / ffmpeg) |")  # fmt: skip
        print("|---:|---|---:|---:|---:|---:|---:|---|")
        for (ch, kind), path in clips.items():
            diff = max_differences(path, kind)
            t = time_row(path, kind, args.repeat)
            ag = t["agl-fast"]
            sf_t = t.get("soundfile")
            sf_rt = "-" if sf_t is None else f"{args.seconds / sf_t:,.0f}"
            sf_ratio = "-" if sf_t is None else f"{sf_t / ag:.2f}x"
            sf_diff = "-" if "soundfile" not in diff else f"{diff['soundfile']:.1e}"
            print(
                f"| {ch} | {kind} | {args.seconds / ag:,.0f} | {sf_rt} | "
                f"{args.seconds / t['ffmpeg']:,.0f} | {sf_ratio} | {t['ffmpeg'] / ag:.2f}x | "
                f"{sf_diff} / {diff['ffmpeg']:.1e} |"
            )
        if args.curate:
            (Path(d) / "curate").mkdir()
            paths = curate_clips(Path(d) / "curate", args.curate)
            print(f"\n`curate`, {args.curate} stereo clips of 10 s, one worker of one thread, "
                  f"32 kHz, best of {args.repeat}\n")  # fmt: skip
            print("| format | x real time / CPU s | x real time (wall) |")
            print("|---|---:|---:|")
            for fmt in ("opus", "mp3"):
                cpu, wall = curate_figures(paths[fmt], args.repeat)
                print(f"| {fmt} | {cpu:,.0f} | {wall:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
