"""Feature benchmark: agl-fast against the best peers, same data, same run.

Data: ``--clips`` clips of ``--minutes`` of audio in all (default 16 clips of
60 s), 32 kHz float32 noise; ``--quick`` (the CI run) takes 16 clips of
15 s. Workloads, with their peers (see ``_peers.py``; all float32, window
and mel matrix built once, one thread):

* ``stft power (stereo)``: :func:`agl_fast.spectrogram` (n_fft 1024, hop 320,
  Hann, centred, reflect padding) against scipy.fft over ``as_strided``
  frames (``rfft`` with ``workers=1`` on blocks of 64 frames, ``|X|^2``
  squared in place) and ``torch.stft`` (one call per channel, which beats
  one batched call here).
* ``logmel (mono)``: :func:`agl_fast.logmel` (128 bands, librosa's defaults)
  against scipy.fft + one sgemm with the mel matrix + log10, the same with
  ``torch.stft``, and librosa's ``melspectrogram`` + ``power_to_db``.
* ``bat (stereo)``: :func:`agl_fast.bat` -> ``[4, t, 128]`` against scipy.fft
  + one sgemm over the four planes + the IPD's cos and sin from the
  normalised cross-spectrum (no arctan/cos/sin).
* ``efficientat (mono)``: :func:`agl_fast.efficientat` against the recipe in
  numpy/scipy (float64; reported, not gated).

Method: every peer's output is checked against agl-fast's first (same shape
after a layout change, values within a stated tolerance), so a wrong peer
can neither win nor lose. All one-thread rows (agl-fast with
``n_threads=1``; BLAS, scipy.fft and torch pinned to one thread) take turns
round by round and are timed in process CPU seconds (user + system);
each figure is the best of ``--repeat`` rounds. The process keeps freed
memory for reuse (``_timing.steady_heap``), so a row's page faults do not
depend on what ran before it. Throughput is "x real time per core": seconds
of (multichannel) audio per CPU second, a stereo second counting once. The
two-thread speed-up is wall clock, one and two threads taking turns, and
the two-thread output must be bit-identical to the one-thread output.

This script prints the tables; the gates on the ratio to the **best** peer
(and on peak memory) live in the pytest-benchmark suite
(``pytest benches/ --benchmark-only``, ``benches/test_features.py``), which
reuses the workloads and peers defined here. ``--json PATH`` writes the
measured rows.

    python benches/bench_features.py          # 16 clips x 60 s
    python benches/bench_features.py --quick  # 16 clips x 15 s
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import _peers
import agl_fast
import refimpl
from _timing import best_times_interleaved, steady_heap

SR = 32000
AMIN = 1e-10
TOP_DB = 80.0
#: Clips and minutes of audio in all: the default run and ``--quick`` (CI).
FULL = (16, 16.0)
QUICK = (16, 4.0)


def limit_threads(n: int) -> None:
    """Pin the peers' thread pools (BLAS, OpenMP, torch) to ``n`` threads."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:
        pass


@dataclass
class Peer:
    """One peer: ``run`` is timed; ``layout`` turns its result into
    agl-fast's layout (untimed) for the output check."""

    name: str
    run: Callable[[], object]
    layout: Callable[[object], np.ndarray]


def _stack(out: object) -> np.ndarray:
    return np.stack([np.asarray(o) for o in out])  # type: ignore[attr-defined]


def _stack_channels_t(out: object) -> np.ndarray:
    """``[clip][channel] -> [t, f]`` arrays to ``[clip, channel, f, t]``."""
    return np.stack([np.stack([c.T for c in clip]) for clip in out])  # type: ignore[attr-defined]


def _torch_np(out: object) -> np.ndarray:
    return np.stack([np.stack([c.numpy() for c in clip]) for clip in out])  # type: ignore[attr-defined]


def _torch_np_1(out: object) -> np.ndarray:
    return np.stack([c.numpy() for c in out])  # type: ignore[attr-defined]


def check(workload: str, peer: np.ndarray, ours: np.ndarray) -> str | None:
    """Why ``peer`` disagrees with agl-fast's ``ours``, or None. Tolerances:
    power within 1e-3 relative + 2e-5 of the peak; dB within 2e-3 dB; IPD
    projections within 1e-4; EfficientAT within 2e-4."""
    if peer.shape != ours.shape:
        return f"shape {peer.shape} != agl-fast's {ours.shape}"
    if workload.startswith("stft"):
        parts = [(peer, ours, 1e-3, 2e-5 * float(ours.max()))]
    elif workload.startswith("logmel"):
        parts = [(peer, ours, 0.0, 2e-3)]
    elif workload.startswith("bat"):
        parts = [(peer[:, :2], ours[:, :2], 0.0, 2e-3), (peer[:, 2:], ours[:, 2:], 0.0, 1e-4)]
    else:
        parts = [(peer, ours, 0.0, 2e-4)]
    for p, o, rtol, atol in parts:
        if not np.allclose(p, o, rtol=rtol, atol=atol):
            err = float(np.abs(p.astype(np.float64) - o).max())
            return f"max abs difference {err:.3g} (rtol {rtol}, atol {atol:.3g})"
    return None


def build_peers(stereo: np.ndarray, mono: np.ndarray) -> dict[str, list[Peer]]:
    """The peers of each workload over the given clips."""
    win = refimpl.padded_window("hann", 1024, 1024).astype(np.float32)
    mel_bat = refimpl.slaney_mel(SR, 1024, 128, 50.0, 14000.0)
    mel_bat_T = np.ascontiguousarray(mel_bat.T, dtype=np.float32)
    mel = np.ascontiguousarray(refimpl.slaney_mel(SR, 1024, 128, 0.0, SR / 2), dtype=np.float32)

    import librosa

    def librosa_logmel() -> list[np.ndarray]:
        return [
            librosa.power_to_db(
                librosa.feature.melspectrogram(y=y, sr=SR, n_fft=1024, hop_length=320)
            )
            for y in mono
        ]

    peers = {
        "stft power (stereo)": [
            Peer(
                "scipy.fft framed",
                lambda: [_peers.scipy_stft_power(y, win) for y in stereo],
                _stack_channels_t,
            )
        ],
        "logmel (mono)": [
            Peer(
                "scipy.fft + sgemm",
                lambda: [_peers.scipy_logmel(y, win, mel, AMIN, TOP_DB) for y in mono],
                _stack,
            ),
            Peer("librosa", librosa_logmel, _stack),
        ],
        "bat (stereo)": [
            Peer(
                "scipy.fft + sgemm + trig-free IPD",
                lambda: [_peers.scipy_bat(y, win, mel_bat_T, AMIN) for y in stereo],
                _stack,
            )
        ],
        "efficientat (mono)": [
            Peer(
                "numpy/scipy recipe (float64)",
                lambda: [refimpl.efficientat_numpy(y) for y in mono],
                _stack,
            )
        ],
    }
    try:
        import torch
    except ImportError:
        return peers
    ts = [[torch.from_numpy(c) for c in y] for y in stereo]
    tm = [torch.from_numpy(y) for y in mono]
    tw = torch.hann_window(1024)
    tmel = torch.from_numpy(mel)

    def torch_power() -> list[list[object]]:
        with torch.inference_mode():
            return [[_peers.torch_stft_power(torch, c, tw) for c in y] for y in ts]

    def torch_logmel() -> list[object]:
        with torch.inference_mode():
            return [_peers.torch_logmel(torch, y, tw, tmel, AMIN, TOP_DB) for y in tm]

    peers["stft power (stereo)"].append(Peer("torch.stft", torch_power, _torch_np))
    peers["logmel (mono)"].insert(1, Peer("torch.stft + sgemm", torch_logmel, _torch_np_1))
    return peers


def make_clips(clips: int, minutes: float) -> tuple[np.ndarray, np.ndarray]:
    """``clips`` stereo clips of 32 kHz float32 noise, ``minutes`` of audio in
    all (``[clips, 2, n]``), and their left channels as mono clips
    (``[clips, n]``); the same data on every call."""
    n = int(minutes * 60 * SR / clips)
    rng = np.random.default_rng(0)
    stereo = (0.1 * rng.standard_normal((clips, 2, n))).astype(np.float32)
    return stereo, np.ascontiguousarray(stereo[:, 0])


def build_ours(stereo: np.ndarray, mono: np.ndarray) -> dict[str, Callable[[int], np.ndarray]]:
    """agl-fast's call of each workload over the given clips, by thread count."""
    return {
        "stft power (stereo)": lambda t: agl_fast.spectrogram(
            stereo, n_fft=1024, hop_length=320, pad_mode="reflect", n_threads=t
        ),
        "logmel (mono)": lambda t: agl_fast.logmel(
            mono, sr=SR, n_fft=1024, hop_length=320, n_threads=t
        ),
        "bat (stereo)": lambda t: agl_fast.bat(stereo, n_threads=t),
        "efficientat (mono)": lambda t: agl_fast.efficientat(mono, n_threads=t),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--clips", type=int, default=FULL[0], help="number of clips")
    ap.add_argument("--minutes", type=float, default=FULL[1], help="minutes of audio in all")
    ap.add_argument("--quick", action="store_true", help="the CI run: 16 clips of 15 s")
    ap.add_argument("--repeat", type=int, default=5, help="alternating rounds; best of N")
    ap.add_argument("--json", type=Path, default=None, help="write the measured rows here")
    args = ap.parse_args(argv)
    heap = "freed memory kept for reuse" if steady_heap() else "default allocator"
    clips, minutes = QUICK if args.quick else (args.clips, args.minutes)
    stereo, mono = make_clips(clips, minutes)
    n = stereo.shape[-1]
    seconds = clips * n / SR

    limit_threads(1)
    ours = build_ours(stereo, mono)
    peers = build_peers(stereo, mono)

    # Outputs first: every peer against agl-fast on one thread, and agl-fast
    # on two threads against itself on one (bit for bit). These runs are
    # also the warm-up (plans, windows, pools) of the timed rounds.
    failed: list[str] = []
    identical: dict[str, bool] = {}
    for w, fn in ours.items():
        ref = fn(1)
        identical[w] = bool(np.array_equal(fn(2), ref))
        if not identical[w]:
            failed.append(f"{w}: two-thread output differs from one-thread output")
        for p in peers[w]:
            why = check(w, p.layout(p.run()), ref)
            if why:
                failed.append(f"{w} / {p.name}: {why}")
        del ref
    if failed:
        print("OUTPUT CHECK FAILED:\n  " + "\n  ".join(failed))
        return 1

    one: dict[str, Callable[[], object]] = {}
    for w, fn in ours.items():
        one[f"{w}|agl-fast"] = partial(fn, 1)
        one.update({f"{w}|{p.name}": p.run for p in peers[w]})
    t1 = best_times_interleaved(one, args.repeat, warmup=False)
    two: dict[str, Callable[[], object]] = {}
    for w, fn in ours.items():
        two[f"{w}|1"] = partial(fn, 1)
        two[f"{w}|2"] = partial(fn, 2)
    wall = best_times_interleaved(two, args.repeat, wall=True, warmup=False)

    rows: list[dict[str, object]] = []
    summary: list[dict[str, object]] = []
    for w in ours:
        mine = t1[f"{w}|agl-fast"]
        rows.append(
            {"workload": w, "implementation": "agl-fast", "cpu_s": mine, "x_rt": seconds / mine}
        )
        for p in peers[w]:
            tp = t1[f"{w}|{p.name}"]
            rows.append(
                {
                    "workload": w,
                    "implementation": p.name,
                    "cpu_s": tp,
                    "x_rt": seconds / tp,
                    "ratio": tp / mine,
                }
            )
        best = min(peers[w], key=lambda p: t1[f"{w}|{p.name}"])
        tb = t1[f"{w}|{best.name}"]
        summary.append(
            {
                "workload": w,
                "best_peer": best.name,
                "peer_x_rt": seconds / tb,
                "agl_x_rt": seconds / mine,
                "ratio": tb / mine,
                "wall_1_s": wall[f"{w}|1"],
                "wall_2_s": wall[f"{w}|2"],
                "speedup_2": wall[f"{w}|1"] / wall[f"{w}|2"],
                "identical": identical[w],
            }
        )

    print(
        f"\n{clips} clips x {n / SR:.0f} s of 32 kHz audio ({seconds / 60:.1f} min); "
        f"{os.cpu_count()} CPUs; {heap}; best of {args.repeat} alternating rounds. One thread, "
        "process CPU time; x real time per core = seconds of (stereo or mono) audio "
        "per CPU second.\n"
    )
    print("| workload | implementation | CPU s | x real time per core | agl-fast ratio |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else ""
        print(
            f"| {r['workload']} | {r['implementation']} | {r['cpu_s']:.3f} "
            f"| {r['x_rt']:,.0f} | {ratio} |"
        )
    print(
        "\n| workload | best peer | peer x RT | agl-fast x RT | ratio to best peer "
        "| 2 threads / 1 thread (wall) | 2-thread output identical |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for s in summary:
        print(
            f"| {s['workload']} | {s['best_peer']} | {s['peer_x_rt']:,.0f} "
            f"| {s['agl_x_rt']:,.0f} | {s['ratio']:.2f}x | {s['speedup_2']:.2f}x "
            f"| {'yes' if s['identical'] else 'NO'} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "clips": clips,
                    "clip_seconds": n / SR,
                    "sr": SR,
                    "repeat": args.repeat,
                    "cpus": os.cpu_count(),
                    "heap": heap,
                    "rows": rows,
                    "summary": summary,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
