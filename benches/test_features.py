"""STFT power, log-mel, BAT and EfficientAT: agl-fast against the best peers
of ``benches/bench_features.py`` (scipy.fft over strided frames + sgemm,
torch.stft, librosa), one thread, same clips, outputs checked first.

Figures: ratio to the best peer, seconds of audio per CPU second (a stereo
second counts once), and the peak memory of agl-fast's call (and, outside
quick mode, the best peer's) in a fresh process, also per second of audio.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import _memory
import bench_features as bf
from _gates import Gate
from _suite import pair_figures, quiet, report, run_pair
from _timing import steady_heap

# workload of bench_features -> gate names (speed, memory)
WORKLOADS = {
    "stft power (stereo)": "stft_power",
    "logmel (mono)": "logmel",
    "bat (stereo)": "bat",
    "efficientat (mono)": "efficientat",
}

pytestmark = pytest.mark.benchmark(group="features", timer=time.process_time)


@pytest.fixture(scope="module")
def data(quick: bool) -> dict[str, Any]:
    """The clips, agl-fast's calls and the peers' (same clips)."""
    steady_heap()  # as bench_features: a row's page faults do not depend on the one before
    clips, minutes = bf.QUICK if quick else bf.FULL
    stereo, mono = bf.make_clips(clips, minutes)
    return {
        "clips": clips,
        "minutes": minutes,
        "seconds": clips * stereo.shape[-1] / bf.SR,
        "ours": bf.build_ours(stereo, mono),
        "peers": bf.build_peers(stereo, mono),
    }


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_features(
    benchmark: Any, workload: str, data: dict[str, Any], quick: bool, gates: dict[str, Gate]
) -> None:
    name = WORKLOADS[workload]
    ours = data["ours"][workload]
    ref = ours(1)
    for p in data["peers"][workload]:
        why = bf.check(workload, p.layout(quiet(p.run)()), ref)
        assert why is None, f"{workload} / {p.name} disagrees with agl-fast: {why}"
    del ref
    peers = {p.name: quiet(p.run) for p in data["peers"][workload]}
    pair = run_pair(benchmark, lambda: ours(1), peers, rounds=5)

    seconds = data["seconds"]
    size = (data["clips"], data["minutes"])
    mine = _memory.in_fresh_process("features", workload, "agl-fast", *map(str, size))
    # The peer's peak too, outside quick mode (its imports cost seconds).
    peer = (
        None
        if quick
        else _memory.in_fresh_process("features", workload, pair.best_peer, *map(str, size))
    )
    figures = pair_figures(pair, seconds)
    figures["audio_s"] = seconds
    figures["memory_method"] = "peak RSS growth of the call in a fresh process (VmHWM)"
    figures["peak_rss_bytes"] = None if mine is None else mine["peak_bytes"]
    figures["peer_peak_rss_bytes"] = None if peer is None else peer["peak_bytes"]
    per_s = None if mine is None else mine["peak_bytes"] / seconds
    figures["peak_bytes_per_audio_s"] = per_s
    checks: list[tuple[str, Gate, float | None]] = []
    if name in gates:
        checks.append((name, gates[name], pair.ratio))
    mem = f"{name}_peak_bytes_per_audio_s"
    checks.append((mem, gates[mem], per_s))
    report(benchmark, f"features: {workload}", figures, checks)
    assert np.isfinite(pair.ratio)
