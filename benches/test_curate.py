"""Curation: the batch function every ``agl-fast curate`` worker runs (Rust
decode, downmix, resampling to 32 kHz, levels and the four quality filters)
against ``librosa.load`` + the same metrics (``benches/bench_curate.py``),
mono, one thread, the same MP3s, outputs checked first; the peak RSS of a
``curate`` worker process; and, outside quick mode, curate's cost per file
against the size of the run (``benches/bench_curate_scale.py``)."""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import bench_curate as bc
from _gates import Gate
from _memory import DescendantPeaks
from _suite import pair_figures, quiet, report, run_pair
from agl_fast.pipeline import BatchProcessor, CurateConfig

pytestmark = pytest.mark.benchmark(group="curate", timer=time.process_time)


@pytest.fixture(scope="module")
def corpus(quick: bool) -> Iterator[tuple[list[str], float]]:
    """The AGL1K MP3s linked to half an hour of audio (quick) or two hours."""
    if not sorted(bc.SHARED.glob("*.mp3")):
        pytest.skip(f"no AGL1K MP3s in {bc.SHARED}")
    with tempfile.TemporaryDirectory() as d:
        yield bc.corpus(Path(d), 1800.0 if quick else 7200.0)


def test_curate_batch_vs_librosa(
    benchmark: Any, corpus: tuple[list[str], float], quick: bool, gates: dict[str, Gate]
) -> None:
    paths, total = corpus
    cfg = CurateConfig(sr=32000, mono=True, workers=1, threads=1)
    # Outputs first, on each distinct recording: the same levels and
    # filters within what two MP3 decoders and two resamplers leave.
    proc = BatchProcessor(cfg.batch_config())
    for path in paths[:2]:
        row = proc(pa.table({"key": ["k"], "path": [path]})).to_pylist()[0]
        peak, _, _, rms, flat, _, _, ac, aci = quiet(lambda p=path: bc._librosa_one(p, True))()  # type: ignore[misc]
        assert row["error_type"] is None, row["error_message"]
        assert abs(row["peak_dbfs"] - 20 * math.log10(peak)) < 0.1
        for key, want, rel in (
            ("rms", rms, 1e-4),
            ("flatness", flat, 1e-3),
            ("complexity", ac, 1e-3),
            ("aci", aci, 1e-3),
        ):
            assert row[key] == pytest.approx(float(want), rel=rel), key

    runs = bc.one_thread_runs(paths, cfg)
    pair = run_pair(
        benchmark, runs["batch"], {"librosa": quiet(runs["librosa"])}, rounds=2 if quick else 3
    )
    figures = pair_figures(pair, total)
    figures["audio_s"] = total
    name = "curate_batch"
    report(benchmark, "curate: batch vs librosa (mono)", figures, [(name, gates[name], pair.ratio)])


@pytest.mark.benchmark(timer=time.perf_counter)
def test_curate_worker_memory(
    benchmark: Any, corpus: tuple[list[str], float], gates: dict[str, Gate]
) -> None:
    """``curate`` end to end with one worker process of one thread: speed
    (x real time, wall and per CPU second) and the worker's peak RSS."""
    paths, total = corpus
    bc.run_curate(paths[:1], 1, True)  # the fork server starts outside the figures
    got: dict[str, float] = {}
    peaks = DescendantPeaks()

    def run() -> None:
        with peaks:
            got["wall"], got["cpu"] = bc.run_curate(paths, 1, True)

    benchmark.pedantic(run, rounds=1, iterations=1)
    worker = max(peaks.peaks.values()) if peaks.peaks else None
    figures = {
        "unit": "audio s (wall)",
        "agl_fast_per_s": total / got["wall"],
        "per_cpu_s": total / got["cpu"],
        "audio_s": total,
        "memory_method": "largest VmHWM of the worker processes, sampled every 20 ms",
        "peak_rss_bytes": worker,
        "workers_seen": len(peaks.peaks),
    }
    name = "curate_worker_peak_rss"
    report(benchmark, "curate: end to end, 1 worker", figures, [(name, gates[name], worker)])


@pytest.mark.benchmark(timer=time.perf_counter)
def test_curate_scale(benchmark: Any, quick: bool, gates: dict[str, Gate]) -> None:
    """Wall time per file of 20,000 files over 2,000 (two workers)."""
    if quick:
        pytest.skip("not in quick mode (about 20,000 files)")
    import bench_curate_scale as bs

    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg is needed to cut the clip")
    small, large = 2_000, 20_000
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        clip = tmp / "clip.mp3"
        bs.make_clip(clip, 3.0)
        bs.linked_corpus(clip, tmp / "small", small)
        bs.linked_corpus(clip, tmp / "large", large)
        bs.time_run(tmp / "small", tmp / "warm", 2)
        got: dict[str, float] = {}

        def run() -> None:
            got["small"] = bs.time_run(tmp / "small", tmp / "out-small", 2) / small
            got["large"] = bs.time_run(tmp / "large", tmp / "out-large", 2) / large

        benchmark.pedantic(run, rounds=1, iterations=1)
    ratio = got["large"] / got["small"]
    figures = {"ratio": ratio, "ms_per_file_small": got["small"] * 1e3}
    figures["ms_per_file_large"] = got["large"] * 1e3
    name = "curate_scale"
    report(
        benchmark, "curate: cost per file, 20k / 2k files", figures, [(name, gates[name], ratio)]
    )
