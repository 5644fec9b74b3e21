"""The clip quality metrics (the quality filter's workload): agl-fast's
:func:`agl_fast.quality.quality_metrics` against numpy, ``scipy.signal.welch``,
``librosa.stft`` and scikit-maad (``benches/bench_quality.py``), one thread,
same clips, outputs checked first."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import _memory
import bench_quality as bq
from _gates import Gate
from _suite import pair_figures, quiet, report, run_pair
from agl_fast import quality

pytestmark = pytest.mark.benchmark(group="quality", timer=time.process_time)

#: reference name -> agl-fast metric, relative tolerance. RMS and the
#: clipping shares are float64 sums on both sides; flatness is a Welch PSD
#: in float64 (agl-fast) and float64 (scipy); the complexity indices come
#: from float32 spectra on both sides, by different FFTs.
METRICS = {
    "rms": ("rms", 1e-6),
    "flat": ("flatness", 1e-5),
    "clip": ("clipping_ratio", 1e-12),
    "full": ("full_scale_ratio", 1e-12),
    "ac": ("complexity", 1e-3),
    "aci": ("aci", 1e-3),
}


def test_quality_clip_metrics(benchmark: Any, quick: bool, gates: dict[str, Gate]) -> None:
    seconds = 300.0 if quick else 3600.0
    clips = bq.make_clips(seconds)
    audio_s = clips.shape[0] * bq.CLIP_S

    def ref() -> list[dict[str, float]]:
        return [bq.reference_clip_metrics(x) for x in clips]

    def ours() -> dict[str, np.ndarray]:
        return quality.quality_metrics(clips, bq.SR, n_threads=1)

    got, want = ours(), quiet(ref)()
    for key, (metric, rtol) in METRICS.items():
        r = np.array([w[key] for w in want])  # type: ignore[index]
        np.testing.assert_allclose(got[metric], r, rtol=rtol, atol=1e-12, err_msg=metric)

    pair = run_pair(benchmark, ours, {"numpy+scipy+librosa+maad": quiet(ref)}, rounds=3)
    mem = _memory.in_fresh_process("quality", str(seconds))
    figures = pair_figures(pair, audio_s)
    figures["audio_s"] = audio_s
    figures["memory_method"] = "peak RSS growth of the call in a fresh process (VmHWM)"
    figures["peak_rss_bytes"] = None if mem is None else mem["peak_bytes"]
    figures["peak_bytes_per_audio_s"] = None if mem is None else mem["peak_bytes"] / audio_s
    name = "quality_clip_metrics"
    report(benchmark, "quality: clip metrics", figures, [(name, gates[name], pair.ratio)])
