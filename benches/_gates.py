"""The gates of the pytest-benchmark suite, in one table.

A speed gate is a least ratio: a peer's best time over agl-fast's best time,
both measured in the same session on the same data, in alternating rounds
(never an absolute time, so the gate holds on any machine that is not far
from the one that set it). A memory gate is a largest figure: peak resident
memory in bytes (per second of audio where the workload is audio).

Each value can be overridden for one run, by name, with
``pytest benches/ --bench-gate NAME=VALUE`` (repeatable) or the environment
variable ``AGL_FAST_BENCH_GATES="NAME=VALUE,NAME=VALUE"`` (the option wins).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace

#: Environment variable of gate overrides (``NAME=VALUE`` pairs, comma-separated).
ENV = "AGL_FAST_BENCH_GATES"


@dataclass(frozen=True)
class Gate:
    """One gate: ``value`` is a least (``kind='min'``) or largest
    (``kind='max'``) figure in ``unit``; ``why`` records what was measured
    when it was set."""

    value: float
    kind: str
    unit: str
    why: str

    def passes(self, figure: float) -> bool:
        """Whether ``figure`` is on the right side of the gate."""
        return figure >= self.value if self.kind == "min" else figure <= self.value

    def describe(self, figure: float) -> str:
        """One line: the figure, the comparison and the gate."""
        op = ">=" if self.kind == "min" else "<="
        return f"{figure:,.4g} {self.unit} (gate {op} {self.value:,.4g})"


MB = 1024 * 1024

#: Every gate of the suite. Speed gates sit at about 70% of the lowest ratio
#: measured with the release wheel on the shared 2-core development machine
#: (its noise moves ratios by up to a quarter between runs); memory gates at
#: about 1.5x the highest peak measured, so that a copy of the input or an
#: extra full-size buffer fails them.
GATES: dict[str, Gate] = {
    # Features, one thread, against the best peer (benches/_peers.py):
    # --quick measured STFT power 1.8x, log-mel 2.8x, BAT 3.6x (release wheel).
    "stft_power": Gate(1.3, "min", "x best peer", "quick 1.8x"),
    "logmel": Gate(2.0, "min", "x best peer", "quick 2.8x"),
    "bat": Gate(2.5, "min", "x best peer", "quick 3.6x"),
    # Peak memory of the feature calls per second of audio (stereo seconds
    # count once). The outputs alone take 410 KB/s (STFT power, 2 x 513 bins
    # x 100 frames/s float32), 51 KB/s (log-mel, 128 bands), 205 KB/s (BAT,
    # 4 x 128) and 51 KB/s (EfficientAT, 128 bands); measured 411,819,
    # 52,378, 206,780 and 52,343 B/s: the output and nothing of the size
    # of the input (128 KB/s per channel) besides.
    "stft_power_peak_bytes_per_audio_s": Gate(640_000, "max", "B/s", "quick 412 KB/s"),
    "logmel_peak_bytes_per_audio_s": Gate(80_000, "max", "B/s", "quick 52 KB/s"),
    "bat_peak_bytes_per_audio_s": Gate(320_000, "max", "B/s", "quick 207 KB/s"),
    "efficientat_peak_bytes_per_audio_s": Gate(80_000, "max", "B/s", "quick 52 KB/s"),
    # ALM query harness (concurrency 8) against a sequential loop, wall clock
    # against a loopback server of 0.2 s latency: measured 3.89.
    "alm_query": Gate(1.5, "min", "x sequential loop", "quick 3.89x"),
    # compat.librosa against librosa: the lowest speed-up over the rows of
    # benches/bench_compat.py of each dtype but the soxr_hq resample (30 s
    # clip in quick mode, every row must pass); in the full run (60 s) the
    # lowest float32 rows are 1.50-1.55x (stft, power_to_db, rolloff) and
    # the lowest float64 rows 1.17-1.35x (rolloff, contrast, centroid);
    # quick mode is about 20 % noisier.
    "compat_float32": Gate(1.0, "min", "x librosa", "full lowest 1.50x"),
    "compat_float64": Gate(0.8, "min", "x librosa", "full lowest 1.17x"),
    # The soxr_hq resample row of each dtype: handed to librosa (soxr's own
    # filter, librosa's output to the bit), so the ratio is the cost of the
    # hand-over, level by construction (1.0x; quick mode's noise is about
    # 10 %).
    "compat_resample_soxr": Gate(0.8, "min", "x librosa (soxr)", "full 1.0x"),
    # python -m agl_fast.compat.librosa on an empty script (import librosa)
    # over the script run plain, medians over pairs of whole processes: the
    # runner imports only its own modules (install() patches librosa as it
    # is imported). Measured 16 ms CPU and 1.3 MB on librosa 0.11 (0.8 MB
    # on 1.0); the budget of the start-up is 50 ms and 30 MB.
    "startup_overhead_cpu_ms": Gate(50.0, "max", "ms", "16 ms"),
    "startup_overhead_mb": Gate(30.0, "max", "MB", "1.3 MB"),
    # Clip quality metrics against numpy + scipy + librosa + scikit-maad:
    # measured 15.4-16.5x.
    "quality_clip_metrics": Gate(10.0, "min", "x reference", "quick 15.4-16.5x"),
    # EDC + decay times against pyrato (plain and Lundeby + Chu): measured
    # 14.9-18.2x and 37x; against a numba loop (the lower of method 'none'
    # and 'lundeby_chu'): 4.3x.
    "room_pyrato": Gate(10.0, "min", "x pyrato", "quick 14.9x / 37x"),
    "room_numba": Gate(3.0, "min", "x numba", "quick 4.3x"),
    # Haversine against the best peer (numba loop, else numpy): 4.2x.
    # Geodesic against pyproj.Geod.inv: 2.1x; else geographiclib per pair: 154x.
    "haversine": Gate(2.9, "min", "x best peer", "quick 4.2x"),
    "geodesic_pyproj": Gate(1.5, "min", "x pyproj", "quick 2.1x"),
    "geodesic_geographiclib": Gate(105.0, "min", "x geographiclib", "quick 154x"),
    # Opus decoding (agl_fast.load, libopus inside) against soundfile
    # (libsndfile with libopus), 48 kHz Ogg Opus, mono and stereo: measured
    # 2.17-2.24x (quick, 20 s files) and 2.41-2.42x (60 s), dev-release
    # build. The floor is 1.0x.
    "opus_soundfile": Gate(1.5, "min", "x soundfile", "quick 2.17-2.24x"),
    # The batch function of curate (decode, resample, levels, quality
    # filters) against librosa.load + the same metrics, mono, half an hour:
    # measured 5.16x (4.3-5.7x over runs; librosa's speed moves most).
    "curate_batch": Gate(3.5, "min", "x librosa", "0.5 h 4.3-5.7x"),
    # Peak RSS of one curate worker process (one thread, batches of eight
    # of the two AGL1K MP3s, 2 minutes each): interpreter, numpy, pyarrow,
    # agl_fast and a batch. Measured 164 MB.
    "curate_worker_peak_rss": Gate(250 * MB, "max", "B", "quick 164 MB"),
    # The fixed cost of a public call on a 1 s clip above the native kernel
    # it wraps (benches/test_overhead.py: quality_filter (also 10 s), quality_metrics,
    # bat, efficientat, logmel, load), the kernel answering at once. Measured
    # 0.001-0.06 ms (quality_filter 0.06 ms on 1 s and on 10 s); a registry that
    # rescanned every installed distribution's entry points on each lookup
    # cost quality_filter 4-7 ms a call.
    "call_overhead_ms": Gate(0.2, "max", "ms per call", "quick 0.001-0.06 ms"),
    # curate's wall time per file, 20,000 files over 2,000 (not in quick
    # mode): a cost that grows with the run shows above 1.
    "curate_scale": Gate(1.05, "max", "x", "1.00-1.02"),
    # Landmark fingerprints of the two AGL1K recordings (44.1 kHz stereo,
    # decoded), one thread: seconds of audio per CPU second. The issue's
    # floor is 2,000x.
    "fingerprint_x_real_time": Gate(2000.0, "min", "x real time per core", "issue floor"),
    # Pairing 50,000 synthetic fingerprints (30 hashes/s; 30 s clips, 10 s
    # in quick mode) in a fresh process: the budgets on this 2-core
    # machine, wall time and peak RSS of the whole process.
    "pair_50k_wall_s": Gate(60.0, "max", "s", "issue budget"),
    "pair_50k_peak_rss": Gate(1024 * MB, "max", "B", "issue budget"),
}


def parse_overrides(items: Iterable[str]) -> dict[str, float]:
    """``NAME=VALUE`` items (each may hold several, comma-separated) as a
    dict; a name outside :data:`GATES` or a value that is not a number
    raises ``ValueError``."""
    out: dict[str, float] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep or name not in GATES:
                known = ", ".join(sorted(GATES))
                raise ValueError(
                    f"bad gate override {part!r}: expected NAME=VALUE, NAME in {known}"
                )
            try:
                out[name] = float(value)
            except ValueError:
                raise ValueError(f"bad gate override {part!r}: {value!r} is not a number") from None
    return out


def resolve(options: Iterable[str] = ()) -> dict[str, Gate]:
    """:data:`GATES` with the environment's overrides, then ``options``'."""
    over = parse_overrides([os.environ.get(ENV, "")])
    over.update(parse_overrides(options))
    return {k: replace(g, value=over[k]) if k in over else g for k, g in GATES.items()}
