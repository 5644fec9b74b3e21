"""Peak memory of the benchmarks, as the operating system counts it.

What is measured is resident memory (RSS), so native allocations (the Rust
core, OpenBLAS, FFT plans) count as much as NumPy arrays; ``tracemalloc``
would see only Python's own allocations. Linux only: elsewhere the figures
are absent (None) and no memory gate applies.

* :func:`peak_growth`: the process's peak RSS while a function runs, above
  its RSS just before. The peak is reset first (``/proc/self/clear_refs``,
  Linux >= 4.0) and read back from ``VmHWM``. The suite runs it in a fresh
  interpreter (``python benches/_memory.py ...``) that built its data and
  warmed the function up on one clip, so that memory freed earlier in the
  test session (and kept by the allocator) cannot hide an allocation.
* :class:`DescendantPeaks`: the largest ``VmHWM`` reached by processes
  started under this one while the block runs (``curate`` workers), sampled
  every few milliseconds; ``VmHWM`` is a high-water mark, so a sample taken
  after the peak still sees it.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

STATUS = Path("/proc/self/status")


def _status_bytes(path: Path, key: str) -> int | None:
    try:
        with path.open() as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_growth(fn: Callable[[], object]) -> tuple[int, int] | None:
    """``(peak RSS while fn runs - RSS before, RSS before)`` in bytes, or
    None where the peak cannot be reset (not Linux)."""
    gc.collect()
    before = _status_bytes(STATUS, "VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    out = fn()
    peak = _status_bytes(STATUS, "VmHWM")
    del out
    if before is None or peak is None:
        return None
    return max(0, peak - before), before


def in_fresh_process(*args: str, timeout: float = 600.0) -> dict[str, int] | None:
    """Run ``python benches/_memory.py ARGS`` and return the figures it
    prints (JSON), None where it could not measure."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    res = subprocess.run(
        [sys.executable, str(Path(__file__)), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if res.returncode != 0:
        raise RuntimeError(f"memory run {args} failed:\n{res.stderr[-4000:]}")
    result: dict[str, int] | None = json.loads(res.stdout.strip().splitlines()[-1])
    return result


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def descendants(pid: int | None = None) -> set[int]:
    """The process ids under ``pid`` (default: this process), Linux only."""
    kids = _children_map()
    out: set[int] = set()
    todo = [os.getpid() if pid is None else pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


class DescendantPeaks:
    """``with DescendantPeaks() as p: ...``: ``p.peaks`` maps each process
    started under this one during the block to the largest ``VmHWM`` seen
    (bytes); processes that existed before the block are left out."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.supported = Path("/proc/self/status").exists()
        self._stop = threading.Event()
        self._before: set[int] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for pid in descendants() - self._before:
            hwm = _status_bytes(Path(f"/proc/{pid}/status"), "VmHWM")
            if hwm:
                self.peaks[pid] = max(self.peaks.get(pid, 0), hwm)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> DescendantPeaks:
        if self.supported:
            self._before = descendants()
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.supported:
            self._stop.set()
            self._thread.join()


def _features(workload: str, impl: str, clips: int, minutes: float) -> dict[str, int] | None:
    """Peak growth of one feature workload (agl-fast, or a peer by name) on
    the suite's clips, after a warm-up on the first clip."""
    import bench_features as bf

    bf.limit_threads(1)

    def pick(stereo: object, mono: object) -> Callable[[], object]:
        if impl == "agl-fast":
            fn = bf.build_ours(stereo, mono)[workload]  # type: ignore[arg-type]
            return lambda: fn(1)
        peers = bf.build_peers(stereo, mono)  # type: ignore[arg-type]
        return next(p.run for p in peers[workload] if p.name == impl)

    stereo, mono = bf.make_clips(clips, minutes)
    return _measure(pick(stereo[:1], mono[:1]), pick(stereo, mono))


def _measure(warm: Callable[[], object], run: Callable[[], object]) -> dict[str, int] | None:
    warm()
    got = peak_growth(run)
    return None if got is None else {"peak_bytes": got[0], "baseline_bytes": got[1]}


def _quality(seconds: str) -> dict[str, int] | None:
    """Peak growth of agl-fast's clip quality metrics (bench_quality's clips)."""
    import bench_quality as bq
    from agl_fast import quality

    clips = bq.make_clips(float(seconds))
    return _measure(
        lambda: quality.quality_metrics(clips[:1], bq.SR, n_threads=1),
        lambda: quality.quality_metrics(clips, bq.SR, n_threads=1),
    )


def _room(n_rirs: str, method: str) -> dict[str, int] | None:
    """Peak growth of agl-fast's room parameters (bench_room's RIRs)."""
    import agl_fast
    import bench_room as br

    rirs = br.make_rirs(int(n_rirs))
    return _measure(
        lambda: agl_fast.room_parameters(rirs[:1], br.SR, method=method, n_threads=1),
        lambda: agl_fast.room_parameters(rirs, br.SR, method=method, n_threads=1),
    )


def _geo(kernel: str, n: str) -> dict[str, int] | None:
    """Peak growth of agl-fast's haversine or geodesic over ``n`` pairs."""
    import numpy as np

    from agl_fast import geo

    rng = np.random.default_rng(0)
    pts = [rng.uniform(-80, 80, int(n)) for _ in range(4)]
    fn = getattr(geo, kernel)
    return _measure(lambda: fn(*(p[:10] for p in pts), n_threads=1), lambda: fn(*pts, n_threads=1))


RUNS: dict[str, Callable[..., dict[str, int] | None]] = {
    "features": lambda w, impl, clips, minutes: _features(w, impl, int(clips), float(minutes)),
    "quality": _quality,
    "room": _room,
    "geo": _geo,
}

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    kind, *rest = sys.argv[1:]
    if kind not in RUNS:
        raise SystemExit(f"unknown memory run {kind!r}")
    print(json.dumps(RUNS[kind](*rest)))
