"""Opus decoding: ``agl_fast.load`` against soundfile (libsndfile with
libopus) and ffmpeg (libopus, a subprocess), mono and stereo, 48 kHz Ogg
Opus, one thread, outputs checked first (``benches/bench_opus.py``). The
gate is the ratio to soundfile; WebM rows (ffmpeg only) are in the
standalone benchmark."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bench_opus as bo
from _gates import Gate
from _suite import pair_figures, quiet, report, run_pair

pytestmark = pytest.mark.benchmark(group="opus", timer=time.process_time)

#: Largest sample difference from libopus's decode (the parity tolerance of
#: tests/test_formats.py).
TOL = 1e-4


@pytest.fixture(scope="module")
def clips(quick: bool) -> Iterator[tuple[dict[tuple[int, str], Path], float]]:
    """The benchmark's files (20 s quick, else 60 s) and their length."""
    pytest.importorskip("soundfile")
    if bo.ffmpeg() is None:
        pytest.skip("ffmpeg with libopus is needed to encode the files")
    seconds = 20.0 if quick else 60.0
    with tempfile.TemporaryDirectory() as d:
        yield bo.make_clips(Path(d), seconds), seconds


@pytest.mark.parametrize("channels", [1, 2], ids=["mono", "stereo"])
@pytest.mark.benchmark(timer=bo.cpu_clock)
def test_opus_vs_soundfile(
    benchmark: Any,
    clips: tuple[dict[tuple[int, str], Path], float],
    channels: int,
    quick: bool,
    gates: dict[str, Gate],
) -> None:
    files, seconds = clips
    path = files[(channels, "ogg")]
    diffs = bo.max_differences(path, "ogg")
    for name, diff in diffs.items():
        assert diff <= TOL, f"agl-fast differs from {name} by {diff:.2e}"
    peers = {k: quiet(fn) for k, fn in bo.peers(path, "ogg").items()}
    pair = run_pair(
        benchmark, lambda: bo.ours(path), peers, rounds=3 if quick else 5, clock=bo.cpu_clock
    )
    figures = pair_figures(pair, seconds)
    vs_sf = pair.peers["soundfile"] / pair.ours
    figures.update(vs_soundfile=vs_sf, vs_ffmpeg=pair.peers["ffmpeg"] / pair.ours, max_diff=diffs)
    name = "opus_soundfile"
    report(benchmark, f"opus: load, {channels} ch Ogg", figures, [(name, gates[name], vs_sf)])
