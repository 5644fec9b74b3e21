"""A small synthetic corpus for ``agl-fast curate --demo``: stereo clips of
birdsong-like chirps over noise, plus the kinds of bad files a real crawl
holds (empty, truncated, not audio, silent, NaN-filled).

``curate --demo`` keeps what it writes: the corpus and the run's output go
to ``--out`` (the corpus in its ``demo-corpus`` folder) or, without
``--out``, to a new folder under the system's temporary directory, and the
command prints where (:func:`demo_directories`, :func:`output_note`).
"""

from __future__ import annotations

import struct
import tempfile
import wave
from pathlib import Path

import numpy as np

__all__ = ["DEMO_CORPUS_DIR", "demo_directories", "output_note", "write_demo_corpus"]

#: Folder of ``--out`` that ``curate --demo`` writes its corpus to.
DEMO_CORPUS_DIR = "demo-corpus"
#: Files of a curate output directory named by :func:`output_note`, with what they hold.
_OUTPUT_FILES = (
    ("curated.parquet", "one row per file"),
    ("summary.json", "counts, parameters and timings"),
    ("report.html", "the report page"),
)


def _write_wav16(path: Path, y: np.ndarray, sr: int) -> None:
    """Write ``y`` ``[channels, n]`` in [-1, 1] as 16-bit PCM."""
    pcm = np.clip(np.round(y.T * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(y.shape[0])
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())


def _write_float_wav(path: Path, y: np.ndarray, sr: int) -> None:
    """Write ``y`` ``[channels, n]`` as 32-bit float WAV (format tag 3)."""
    ch = y.shape[0]
    data = np.ascontiguousarray(y.T, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, ch, sr, sr * ch * 4, ch * 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)


def _scene(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    n = int(sr * seconds)
    t = np.arange(n) / sr
    out = 0.02 * rng.standard_normal((2, n))
    for _ in range(int(seconds * 2)):
        t0, f0 = rng.uniform(0, seconds - 0.3), rng.uniform(2000, 6000)
        m = (t >= t0) & (t < t0 + 0.25)
        tt = t[m] - t0
        call = 0.3 * np.sin(2 * np.pi * (f0 * tt + 4000 * tt**2)) * np.hanning(m.sum())
        pan = rng.uniform(0.2, 0.8)
        idx = np.flatnonzero(m)
        out[0, idx] += (1 - pan) * call
        out[1, np.minimum(idx + int(rng.integers(0, 20)), n - 1)] += pan * call
    return np.clip(out, -1, 1)


def write_demo_corpus(directory: Path, n_clips: int = 8, seed: int = 0) -> Path:
    """Write the demo corpus into ``directory`` and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n_clips):
        sr = (44100, 48000, 22050)[i % 3]
        site = directory / f"site{i // 3}"
        site.mkdir(exist_ok=True)
        _write_wav16(site / f"clip{i:02d}.wav", _scene(rng, sr, 4.0), sr)
    bad = directory / "bad"
    bad.mkdir(exist_ok=True)
    (bad / "empty.wav").write_bytes(b"")
    (bad / "not_audio.mp3").write_bytes(b"<html>404 Not Found</html>\n" * 20)
    full = bad / "full.wav"
    _write_wav16(full, _scene(rng, 32000, 2.0), 32000)
    (bad / "truncated.wav").write_bytes(full.read_bytes()[:30])
    full.unlink()
    _write_wav16(bad / "silent.wav", np.zeros((2, 32000)), 32000)
    _write_float_wav(bad / "nan.wav", np.full((2, 8000), np.nan), 16000)
    return directory


def demo_directories(out: str | Path | None) -> tuple[Path, Path]:
    """``(corpus, out)`` folders of a demo run.

    Parameters
    ----------
    out : str, Path or None
        The ``--out`` given, or None for a new folder ``agl-fast-demo-*``
        under the temporary directory (kept after the run: it is the
        output).

    Returns
    -------
    corpus, out : Path
        ``out/demo-corpus`` and ``out``.
    """
    base = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="agl-fast-demo-"))
    return base / DEMO_CORPUS_DIR, base


def output_note(out: str | Path, corpus: str | Path | None = None) -> str:
    """Lines saying where a run wrote its output: the folder, each file of
    it that exists, and the corpus folder when given."""
    out = Path(out).resolve()
    lines = [f"output: {out}"]
    lines += [f"  {name:16} {what}" for name, what in _OUTPUT_FILES if (out / name).exists()]
    if corpus is not None:
        lines.append(f"demo corpus: {Path(corpus).resolve()}")
    return "\n".join(lines)
