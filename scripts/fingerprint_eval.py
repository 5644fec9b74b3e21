"""Recall and false groups of the landmark fingerprint, beside fpcalc.

Builds a test set from known sources, fingerprints and pairs it with
:mod:`agl_fast.fingerprint`, and prints one table:

* **distinct clips**: non-overlapping cuts of the two real recordings in
  ``../shared/agl1k`` (hard negatives of each other: same place, same
  ambience, no shared audio) and synthetic speech-like and noise textures
  (one seed each) for volume;
* **true duplicates**: for every real clip and for ``--dup-sources``
  synthetic clips, one copy per transformation: MP3 128k, Opus 64k, AAC
  (ffmpeg), a trim keeping ``TRIM_KEEP_S`` seconds, 44.1 -> 16 kHz, gain
  +6 dB and -6 dB, mono downmix of the stereo source, noise at 20 dB SNR,
  and a chain (trim + MP3 + noise).

*Recall* is the share of copies paired with their source. Clips are then
grouped (connected components of the matches); a *false group* is a group
holding two or more distinct sources, and the *false-group rate* is the
share of distinct sources that sit in one.

fpcalc (Chromaprint, Debian's ``libchromaprint-tools``) has no index: its
column compares raw fingerprints pair by pair (best alignment, bit error
rate below ``FPCALC_BER``) on every source-copy pair and on every pair of
real clips plus ``--fpcalc-negatives`` random pairs of distinct clips. When
``fpcalc`` is not installed its column reads 'not installed'.

    python scripts/fingerprint_eval.py                  # 10,000 distinct clips
    python scripts/fingerprint_eval.py --clips 500      # a quick run
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agl_fast import audio
from agl_fast import fingerprint as fpm

AGL1K = Path(__file__).resolve().parents[2] / "shared" / "agl1k"
CLIP_S = 12.0
TRIM_KEEP_S = 10.5
SYN_SR = 8000
FPCALC_BER = 0.35
log = logging.getLogger("fingerprint_eval")


# --- sources -------------------------------------------------------------------


def speech_like(seed: int, seconds: float = CLIP_S, sr: int = SYN_SR) -> np.ndarray:
    """Voiced syllables: a harmonic source on a wandering pitch through
    three wandering formants, in bursts of 80-300 ms, over faint noise."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sr)
    t = np.arange(n) / sr
    f0 = rng.uniform(90, 240) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(0.2, 2) * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    y = np.zeros(n)
    formants = rng.uniform([300, 900, 2200], [900, 2200, 3400], size=(int(seconds * 4) + 2, 3))
    fi = np.minimum((t * 4).astype(int), len(formants) - 1)
    for k in range(1, 13):
        fk = k * f0
        gain = sum(np.exp(-(((fk - formants[fi, j]) / 150.0) ** 2)) for j in range(3))
        y += gain * np.sin(k * phase) / k**0.5
    env = np.zeros(n)
    pos = int(rng.uniform(0, 0.2) * sr)
    while pos < n:
        length = int(rng.uniform(0.08, 0.3) * sr)
        env[pos : pos + length] = np.hanning(length)[: n - pos] * rng.uniform(0.3, 1)
        pos += length + int(rng.uniform(0.03, 0.25) * sr)
    y = y * env + 0.01 * rng.standard_normal(n)
    return (0.5 * y / (np.abs(y).max() + 1e-9)).astype(np.float32)


def texture(seed: int, seconds: float = CLIP_S, sr: int = SYN_SR) -> np.ndarray:
    """Coloured noise with a few resonances, amplitude-modulated, plus
    sparse chirps (a field texture: wind, water, insects, birds)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sr)
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / sr)
    shape = 1 / (1 + f / rng.uniform(200, 2000)) + sum(
        rng.uniform(1, 6) * np.exp(-(((f - c) / rng.uniform(20, 200)) ** 2))
        for c in rng.uniform(150, 3500, rng.integers(2, 8))
    )
    y = np.fft.irfft(spec * shape, n)
    t = np.arange(n) / sr
    y *= 1 + 0.5 * np.sin(2 * np.pi * rng.uniform(0.1, 3) * t + rng.uniform(0, 6))
    for _ in range(rng.integers(5, 30)):
        at, length = int(rng.uniform(0, seconds - 0.3) * sr), int(rng.uniform(0.05, 0.25) * sr)
        f1, f2 = rng.uniform(800, 3500, 2)
        ph = 2 * np.pi * np.cumsum(np.linspace(f1, f2, length)) / sr
        y[at : at + length] += np.sin(ph) * np.hanning(length) * rng.uniform(1, 4) * y.std()
    return (0.5 * y / (np.abs(y).max() + 1e-9)).astype(np.float32)


def real_clips() -> list[tuple[str, np.ndarray, int]]:
    """Non-overlapping ``CLIP_S`` cuts of the real recordings (stereo)."""
    out = []
    for path in sorted(AGL1K.glob("*.mp3")):
        y, sr = audio.load(path, sr=None)
        y = np.atleast_2d(y)
        step = int(CLIP_S * sr)
        for k in range(y.shape[1] // step):
            out.append((f"{path.stem}@{k * CLIP_S:g}s", y[:, k * step : (k + 1) * step], sr))
    return out


# --- transformations -----------------------------------------------------------


def ffmpeg_roundtrip(y: np.ndarray, sr: int, codec: list[str], ext: str, tmp: Path) -> np.ndarray:
    """Encode ``y`` (``[channels, n]``) with ffmpeg and decode it back."""
    import soundfile as sf

    src, enc = tmp / "src.wav", tmp / f"enc.{ext}"
    sf.write(src, np.atleast_2d(y).T, sr, subtype="FLOAT")
    base = ["ffmpeg", "-nostdin", "-v", "error", "-y"]
    subprocess.run([*base, "-i", str(src), *codec, str(enc)], check=True)
    ch = np.atleast_2d(y).shape[0]
    raw = subprocess.run(
        [*base, "-i", str(enc), "-f", "f32le", "-ac", str(ch), "-ar", str(sr), "-"],
        check=True,
        capture_output=True,
    ).stdout
    return np.frombuffer(raw, np.float32).reshape(-1, ch).T.copy()


def add_noise(y: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    noise = rng.standard_normal(y.shape).astype(np.float32)
    noise *= np.sqrt(np.mean(y**2) / np.mean(noise**2)) * 10 ** (-snr_db / 20)
    return (y + noise).astype(np.float32)


Transform = Callable[[np.ndarray, int, Path, np.random.Generator], tuple[np.ndarray, int]]


def _trim(y: np.ndarray, sr: int, rng: np.random.Generator) -> np.ndarray:
    keep = int(TRIM_KEEP_S * sr)
    start = int(rng.integers(0, y.shape[-1] - keep))
    return y[..., start : start + keep]


TRANSFORMS: dict[str, Transform] = {
    "mp3 128k": lambda y, sr, tmp, rng: (
        ffmpeg_roundtrip(y, sr, ["-b:a", "128k"], "mp3", tmp),
        sr,
    ),
    "opus 64k": lambda y, sr, tmp, rng: (
        ffmpeg_roundtrip(y, sr, ["-c:a", "libopus", "-b:a", "64k"], "opus", tmp),
        sr,
    ),
    "aac 128k": lambda y, sr, tmp, rng: (
        ffmpeg_roundtrip(y, sr, ["-c:a", "aac", "-b:a", "128k"], "m4a", tmp),
        sr,
    ),
    f"trim to {TRIM_KEEP_S:g} s": lambda y, sr, tmp, rng: (_trim(y, sr, rng), sr),
    "resample to 16 kHz": lambda y, sr, tmp, rng: (
        audio.resample(y, orig_sr=sr, target_sr=16000),
        16000,
    ),
    "gain +6 dB": lambda y, sr, tmp, rng: (y * np.float32(10 ** (6 / 20)), sr),
    "gain -6 dB": lambda y, sr, tmp, rng: (y * np.float32(10 ** (-6 / 20)), sr),
    "mono downmix": lambda y, sr, tmp, rng: (np.atleast_2d(y).mean(axis=0), sr),
    "noise 20 dB SNR": lambda y, sr, tmp, rng: (add_noise(y, 20, rng), sr),
    "trim + mp3 + noise": lambda y, sr, tmp, rng: (
        add_noise(ffmpeg_roundtrip(_trim(y, sr, rng), sr, ["-b:a", "128k"], "mp3", tmp), 20, rng),
        sr,
    ),
}


# --- the set -------------------------------------------------------------------

Maker = Callable[[], tuple[np.ndarray, int]]


@dataclass
class TestSet:
    """How to make every clip (clips are made when needed, never all held),
    the source index of every clip and its transformation."""

    names: list[str] = field(default_factory=list)
    makers: list[Maker] = field(default_factory=list)
    source: list[int] = field(default_factory=list)
    transform: list[str] = field(default_factory=list)

    def add(self, name: str, make: Maker, source: int | None, how: str) -> int:
        self.names.append(name)
        self.makers.append(make)
        self.source.append(len(self.names) - 1 if source is None else source)
        self.transform.append(how)
        return len(self.names) - 1


def _synthetic(kind: str, seed: int) -> Maker:
    def make() -> tuple[np.ndarray, int]:
        y = (speech_like if kind == "speech" else texture)(seed)
        # A stereo version with a decorrelated side, so downmix means something.
        return np.stack([y, 0.8 * y + 0.2 * np.roll(y, 37)]), SYN_SR

    return make


def _copy(make: Maker, fn: Transform, tmp: Path, seed: int) -> Maker:
    def copy() -> tuple[np.ndarray, int]:
        y, sr = make()
        return fn(y, sr, tmp, np.random.default_rng(seed))

    return copy


def build(
    n_distinct: int, dup_sources: int, tmp: Path, seed: int = 0, real_sources: int | None = None
) -> TestSet:
    """The distinct clips and the transformed copies (see the module notes)."""
    ts = TestSet()
    dup_of: list[int] = []
    if AGL1K.is_dir():
        for name, y, sr in real_clips():
            i = ts.add(name, lambda y=y, sr=sr: (y, sr), None, "source (real)")
            if real_sources is None or len(dup_of) < real_sources:
                dup_of.append(i)
    else:
        log.warning("%s is absent: synthetic sources only", AGL1K)
    n_real = len(dup_of)
    k = 0
    while len(ts.names) < n_distinct:
        kind = "speech" if k % 2 == 0 else "texture"
        i = ts.add(f"{kind}#{k}", _synthetic(kind, seed * 1_000_003 + k), None, f"source ({kind})")
        if len(dup_of) < n_real + dup_sources:
            dup_of.append(i)
        k += 1
    for i in dup_of:
        for j, (how, fn) in enumerate(TRANSFORMS.items()):
            ts.add(f"{ts.names[i]} [{how}]", _copy(ts.makers[i], fn, tmp, i * 100 + j), i, how)
    return ts


# --- scoring -------------------------------------------------------------------


def components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Group label of every clip (connected components of the pairs)."""
    parent = np.arange(n)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    return np.array([find(i) for i in range(n)])


def score_pairs(ts: TestSet, pairs: set[tuple[int, int]]) -> dict[str, object]:
    """Recall per transformation and the false-group rate of ``pairs``."""
    src = np.array(ts.source)
    copies = [i for i in range(len(src)) if src[i] != i]
    per: dict[str, list[bool]] = {}
    for i in copies:
        per.setdefault(ts.transform[i], []).append((int(src[i]), i) in pairs)
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    group = components(len(src), a, b)
    sources = np.flatnonzero(src == np.arange(len(src)))
    by_group: dict[int, int] = {}
    for s in sources:
        by_group[int(group[s])] = by_group.get(int(group[s]), 0) + 1
    in_false = sum(1 for s in sources if by_group[int(group[s])] > 1)
    found = [x for v in per.values() for x in v]
    return {
        "recall": float(np.mean(found)) if found else float("nan"),
        "recall_by_transform": {k: float(np.mean(v)) for k, v in per.items()},
        "copies": len(found),
        "distinct": len(sources),
        "false_group_sources": in_false,
        "false_group_rate": in_false / max(1, len(sources)),
        "false_pairs": sum(1 for x, y in pairs if src[x] != src[y]),
    }


def run_agl(ts: TestSet, batch: int = 256) -> dict[str, object]:
    fps: list[fpm.Fingerprint] = []
    audio_s, fp_cpu = 0.0, 0.0
    for lo in range(0, len(ts.makers), batch):
        made = [m() for m in ts.makers[lo : lo + batch]]
        audio_s += sum(y.shape[-1] / sr for y, sr in made)
        cpu = time.process_time()
        fps += fpm.fingerprint_many([y for y, _ in made], [sr for _, sr in made])
        fp_cpu += time.process_time() - cpu
        if lo // batch % 10 == 0:
            log.info("fingerprinted %d / %d clips", len(fps), len(ts.makers))
    wall = time.perf_counter()
    m = fpm.pair(fps)
    pair_wall = time.perf_counter() - wall
    out = score_pairs(ts, set(zip(m.a.tolist(), m.b.tolist(), strict=True)))
    out["x_real_time_per_core"] = audio_s / fp_cpu
    out["pair_wall_s"] = pair_wall
    out["not_fingerprintable"] = sum(not f.fingerprintable for f in fps)
    return out


# --- fpcalc --------------------------------------------------------------------


def fpcalc_raw(y: np.ndarray, sr: int, tmp: Path) -> tuple[np.ndarray, float]:
    """Chromaprint's raw fingerprint of a clip written as 16-bit WAV, and
    fpcalc's CPU seconds (reading the WAV included)."""
    import resource

    import soundfile as sf

    path = tmp / "fp.wav"
    sf.write(path, np.atleast_2d(y).T, sr, subtype="PCM_16")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # fpcalc 1.5 exits with 3 on the decoder's end-of-file notice after
    # printing a complete fingerprint: the JSON decides, not the status.
    res = subprocess.run(["fpcalc", "-raw", "-json", str(path)], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    try:
        raw = json.loads(res.stdout)["fingerprint"]
    except (ValueError, KeyError):
        log.warning("fpcalc gave no fingerprint (status %d): %s", res.returncode, res.stderr[-200:])
        raw = []
    return np.asarray(raw, dtype=np.int64).astype(np.uint32), cpu


def fpcalc_ber(x: np.ndarray, y: np.ndarray, min_overlap: int = 40) -> float:
    """Least bit error rate of two raw fingerprints over their alignments
    sharing at least ``min_overlap`` frames (about 5 s); 1 when none."""
    best = 1.0
    min_overlap = min(min_overlap, len(x), len(y))
    if min_overlap == 0:
        return best
    for off in range(-(len(y) - min_overlap), len(x) - min_overlap + 1):
        xs = x[max(0, off) : min(len(x), off + len(y))]
        ys = y[max(0, -off) : max(0, -off) + len(xs)]
        if len(xs) < min_overlap:
            continue
        bits = np.unpackbits((xs ^ ys).view(np.uint8)).sum()
        best = min(best, bits / (32 * len(xs)))
    return best


def run_fpcalc(ts: TestSet, negatives: int, tmp: Path) -> dict[str, object] | None:
    if shutil.which("fpcalc") is None:
        return None
    src = np.array(ts.source)
    sources = np.flatnonzero(src == np.arange(len(src)))
    need = sorted(set(range(len(src))) - set(sources.tolist()))
    real = [i for i in sources if ts.transform[i] == "source (real)"]
    rng = np.random.default_rng(1)
    neg = {(int(a), int(b)) for a in real for b in real if a < b}
    while len(neg) < len(real) * (len(real) - 1) // 2 + negatives:
        a, b = sorted(rng.choice(sources, 2, replace=False).tolist())
        neg.add((a, b))
    wanted = set(need) | {int(src[i]) for i in need} | {x for p in neg for x in p}
    raw, cpu, audio_s = {}, 0.0, 0.0
    for i in sorted(wanted):
        y, sr = ts.makers[i]()
        raw[i], c = fpcalc_raw(y, sr, tmp)
        cpu += c
        audio_s += y.shape[-1] / sr
    found = {(int(src[i]), i) for i in need if fpcalc_ber(raw[int(src[i])], raw[i]) < FPCALC_BER}
    false = sum(1 for a, b in neg if fpcalc_ber(raw[a], raw[b]) < FPCALC_BER)
    out = score_pairs(ts, found)
    out["false_pairs"] = false
    out["negative_pairs"] = len(neg)
    out["x_real_time_per_core"] = audio_s / cpu
    return out


# --- report --------------------------------------------------------------------


def table(ours: dict[str, object], fpc: dict[str, object] | None) -> str:
    na = "not installed"

    def col(d: dict[str, object] | None, key: str, fmt: str) -> str:
        return na if d is None else fmt.format(d[key])

    rows = [("recall (all copies)", "recall", "{:.2%}")]
    by = ours["recall_by_transform"]
    assert isinstance(by, dict)
    lines = [f"{'metric':<34} {'agl-fast':>14} {'fpcalc':>14}"]
    for label, key, fmt in rows:
        lines.append(f"{label:<34} {col(ours, key, fmt):>14} {col(fpc, key, fmt):>14}")
    for how in by:
        theirs = na if fpc is None else "{:.2%}".format(fpc["recall_by_transform"][how])  # type: ignore[index]
        lines.append(f"{'  ' + how:<34} {by[how]:>14.2%} {theirs:>14}")
    lines.append(
        f"{'false groups (of distinct)':<34} "
        f"{ours['false_group_sources']!s:>7} / {ours['distinct']!s:<6}"
        f"{'(pairwise, see false pairs)' if fpc else na:>14}"
    )
    lines.append(
        f"{'false-group rate':<34} {ours['false_group_rate']:>14.3%} {'-' if fpc else na:>14}"
    )
    fp_false = na if fpc is None else f"{fpc['false_pairs']} / {fpc['negative_pairs']}"
    lines.append(
        f"{'false pairs (fpcalc: of sampled)':<34} {ours['false_pairs']!s:>14} {fp_false:>14}"
    )
    lines.append(
        f"{'x real time per core':<34} {ours['x_real_time_per_core']:>14,.0f} "
        f"{col(fpc, 'x_real_time_per_core', '{:,.0f}'):>14}"
    )
    lines.append(f"{'copies / distinct clips':<34} {ours['copies']!s:>7} / {ours['distinct']!s:<6}")
    lines.append(f"{'not fingerprintable':<34} {ours['not_fingerprintable']!s:>14}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clips", type=int, default=10_000, help="distinct clips (default 10,000)")
    ap.add_argument("--dup-sources", type=int, default=80, help="synthetic clips copied")
    ap.add_argument("--fpcalc-negatives", type=int, default=2_000)
    ap.add_argument(
        "--real-sources", type=int, default=None, help="real clips copied (default: all)"
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        t = time.perf_counter()
        ts = build(args.clips, args.dup_sources, tmp, real_sources=args.real_sources)
        log.info("built %d clips in %.0f s", len(ts.names), time.perf_counter() - t)
        ours = run_agl(ts)
        fpc = run_fpcalc(ts, args.fpcalc_negatives, tmp)
    print(table(ours, fpc))
    if args.json:
        args.json.write_text(json.dumps({"agl_fast": ours, "fpcalc": fpc}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
