"""Fingerprinting speed (times real time per core, on decoded audio, against
the issue's 2,000x) and pairing at scale (50,000 synthetic fingerprints in a
fresh process: wall time and peak RSS against the issue's budgets). fpcalc's
speed on the same audio, decoding included, is reported beside ours when it
is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bench_fingerprint as bf
from _gates import Gate
from _suite import report
from agl_fast import audio
from agl_fast import fingerprint as fpm

pytestmark = pytest.mark.benchmark(group="fingerprint", timer=time.process_time)


@pytest.fixture(scope="module")
def recordings(quick: bool) -> list[tuple[np.ndarray, int]]:
    paths = sorted(bf.AGL1K.glob("*.mp3"))
    if not paths:
        pytest.skip("needs the real recordings in ../shared/agl1k")
    seconds = 60.0 if quick else None
    return [audio.load(p, sr=None, duration=seconds) for p in paths]


def test_fingerprint_real_time(
    benchmark: Any, recordings: list[tuple[np.ndarray, int]], gates: dict[str, Gate]
) -> None:
    ys = [y for y, _ in recordings]
    srs = [sr for _, sr in recordings]
    audio_s = sum(y.shape[-1] / sr for y, sr in recordings)
    fps = fpm.fingerprint_many(ys, srs, n_threads=1)
    assert all(f.fingerprintable for f in fps)
    times: list[float] = []

    def target() -> None:
        t = time.process_time()
        fpm.fingerprint_many(ys, srs, n_threads=1)
        times.append(time.process_time() - t)

    benchmark.pedantic(target, rounds=5, iterations=1, warmup_rounds=1)
    x_rt = audio_s / min(times)
    figures: dict[str, Any] = {
        "audio_s": audio_s,
        "agl_fast_cpu_s": min(times),
        "x_real_time_per_core": x_rt,
        "hashes_per_audio_s": sum(f.hashes.size for f in fps) / audio_s,
        "fpcalc_x_real_time_per_core": "not installed",
    }
    if bf.fpcalc_path():
        import soundfile as sf

        with tempfile.TemporaryDirectory() as d:
            cpu = 0.0
            for i, (y, sr) in enumerate(recordings):
                path = Path(d) / f"{i}.wav"
                sf.write(path, np.atleast_2d(y).T, sr, subtype="PCM_16")
                cpu += bf.fpcalc_raw(path, int(y.shape[-1] / sr) + 1)[1]
        figures["fpcalc_x_real_time_per_core"] = audio_s / cpu
    name = "fingerprint_x_real_time"
    report(benchmark, "fingerprint: times real time", figures, [(name, gates[name], x_rt)])


def test_pair_50k_clips(benchmark: Any, quick: bool, gates: dict[str, Gate]) -> None:
    seconds = "10" if quick else "30"
    # The pairing's own default threads (every CPU, as `agl-fast dedup` runs),
    # not the one thread this suite sets for the peers' pools.
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    res = subprocess.run(
        [sys.executable, str(Path(bf.__file__)), "pair", "--clips", "50000", "--seconds", seconds],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    fig = json.loads(res.stdout.strip().splitlines()[-1])
    assert fig["planted_found"] == fig["planted"], fig
    assert fig["other_pairs"] == 0, fig
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    checks = [
        ("pair_50k_wall_s", gates["pair_50k_wall_s"], fig["pair_wall_s"]),
        ("pair_50k_peak_rss", gates["pair_50k_peak_rss"], fig["peak_rss_bytes"]),
    ]
    report(benchmark, f"pair: 50,000 clips of {seconds} s", fig, checks)
