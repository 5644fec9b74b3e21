"""The fixed cost of a call: each public entry point on a short clip, timed
with the native kernel it wraps answering at once (its answer to the same
call, recorded first; see :func:`overhead_ms`). What is timed is the Python
around the kernel: argument checks, registry lookups, input preparation,
output shaping. It must stay within a small budget per call (gate
``call_overhead_ms``): a registry that rescans the installed distributions
on every lookup, or an import inside a call, fails it, where the batch
benchmarks do not see it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

import agl_fast
from _gates import Gate
from _suite import report
from agl_fast import _native, quality

pytestmark = pytest.mark.benchmark(group="overhead", timer=time.process_time)

SR = 32_000


def _clip(seconds: float, channels: int = 1) -> np.ndarray:
    rng = np.random.default_rng(7)
    x = 0.1 * rng.standard_normal((channels, int(SR * seconds))).astype(np.float32)
    return x[0] if channels == 1 else x


def _wav(tmp: Path) -> str:
    path = tmp / "one_second.wav"
    sf.write(path, _clip(1.0), SR, subtype="PCM_16")
    return str(path)


def entry_points(tmp: Path) -> dict[str, tuple[str, Callable[[], object]]]:
    """Entry point -> (the ``_native`` kernel it wraps, a call on a 1 s clip;
    ``quality_filter`` also on a 10 s clip)."""
    mono, stereo, wav, ten = _clip(1.0), _clip(1.0, 2), _wav(tmp), _clip(10.0)
    return {
        "quality_filter": ("quality_metrics", lambda: quality.quality_filter(mono, SR)),
        "quality_filter_10s": ("quality_metrics", lambda: quality.quality_filter(ten, SR)),
        "quality_metrics": ("quality_metrics", lambda: quality.quality_metrics(mono, SR)),
        "bat": ("bat", lambda: agl_fast.bat(stereo)),
        "efficientat": ("efficientat", lambda: agl_fast.efficientat(mono)),
        "logmel": ("melspectrogram", lambda: agl_fast.logmel(mono, sr=SR)),
        "load": ("load", lambda: agl_fast.load(wav, sr=None)),
    }


def overhead_ms(kernel: str, call: Callable[[], object], rounds: int) -> float:
    """Process CPU time of ``call`` above its kernel, in ms.

    The kernel's answer to ``call`` is recorded once (the kernel must be
    called exactly once); then ``call`` is timed with the kernel answering
    that result at once, so what is timed is the Python around the kernel
    and nothing of the kernel's own time, whose noise on a busy machine is
    larger than the budget on a long clip. The figure is the median over
    ``rounds`` of the best of five calls, less the same for calling the
    stand-in directly.
    """
    real = getattr(_native, kernel)
    seen: list[object] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append(out := real(*args, **kwargs))
        return out

    def answer(*args: Any, **kwargs: Any) -> Any:
        return seen[0]

    def best(fn: Callable[[], object]) -> float:
        t = []
        for _ in range(5):
            a = time.process_time()
            fn()
            t.append(time.process_time() - a)
        return min(t)

    setattr(_native, kernel, record)
    try:
        call()
        assert len(seen) == 1, f"{kernel}: called {len(seen)} times by one call"
        setattr(_native, kernel, answer)
        diffs = [best(call) - best(answer) for _ in range(rounds)]
    finally:
        setattr(_native, kernel, real)
    return float(np.median(diffs)) * 1e3


def test_call_overhead(benchmark: Any, quick: bool, gates: dict[str, Gate], tmp_path: Path) -> None:
    rounds = 40 if quick else 200
    figures: dict[str, Any] = {"clip": "1 s mono (stereo for bat), one thread"}
    checks = []
    calls = entry_points(tmp_path)
    for name, (kernel, call) in calls.items():
        call()  # warm: plans, filter banks, plugin discovery
        figures[f"{name}_ms_above_{kernel}"] = ms = overhead_ms(kernel, call, rounds)
        checks.append((f"call_overhead_ms:{name}", gates["call_overhead_ms"], ms))
    benchmark.pedantic(calls["quality_filter"][1], rounds=rounds, iterations=1)
    report(benchmark, "call overhead above the kernel (1 s clip)", figures, checks)
