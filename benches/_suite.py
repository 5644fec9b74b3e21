"""What every pair of the pytest-benchmark suite shares: alternating rounds,
the figures put into the benchmark's ``extra_info``, and the gate checks.

One pair is agl-fast and its peers over the same data. Their outputs are
compared before this module is reached; then, in every round, each peer
runs once (timed here) and agl-fast runs once (timed by pytest-benchmark,
whose statistics are agl-fast's, and here). Implementations taking turns
see the same spells of a machine whose speed drifts, so their ratio holds
even when absolute times do not. Each figure is the best round.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _gates import Gate

#: ``extra_info`` rows of the session, for the terminal summary.
ROWS: list[dict[str, Any]] = []


@dataclass
class Pair:
    """Best times of one pair, in seconds of ``clock``."""

    ours: float
    peers: dict[str, float]
    rounds: int
    failures: list[str] = field(default_factory=list)

    @property
    def best_peer(self) -> str:
        return min(self.peers, key=self.peers.__getitem__)

    @property
    def ratio(self) -> float:
        """Best peer's time over agl-fast's: how many times faster agl-fast is."""
        return self.peers[self.best_peer] / self.ours


def quiet(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` with the warnings of peer libraries silenced (the suite turns
    warnings into errors; a peer's deprecation notice is not a failure of
    agl-fast)."""

    def run() -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()

    return run


def run_pair(
    benchmark: Any,
    ours: Callable[[], object],
    peers: dict[str, Callable[[], object]],
    rounds: int,
    clock: Callable[[], float] = time.process_time,
) -> Pair:
    """Time ``ours`` against every peer in ``rounds`` alternating rounds
    (peers first in each round, untimed by pytest-benchmark)."""
    peer_times: dict[str, list[float]] = {k: [] for k in peers}
    our_times: list[float] = []

    def setup() -> None:
        for name, fn in peers.items():
            t = clock()
            fn()
            peer_times[name].append(clock() - t)

    def target() -> None:
        t = clock()
        ours()
        our_times.append(clock() - t)

    benchmark.pedantic(target, setup=setup, rounds=rounds, iterations=1, warmup_rounds=0)
    return Pair(min(our_times), {k: min(v) for k, v in peer_times.items()}, len(our_times))


def report(
    benchmark: Any,
    name: str,
    figures: dict[str, Any],
    checks: list[tuple[str, Gate, float | None]],
) -> None:
    """Put ``figures`` and the gates' verdicts into ``extra_info`` (and the
    session summary), then fail on every gate not passed. A check whose
    figure is None (not measurable here) is recorded, not applied."""
    info: dict[str, Any] = {"name": name, **figures}
    failed = []
    for key, gate, figure in checks:
        info[f"gate:{key}"] = gate.value
        if figure is None:
            info[f"verdict:{key}"] = "not measured"
            continue
        ok = gate.passes(figure)
        info[f"verdict:{key}"] = "pass" if ok else "FAIL"
        if not ok:
            failed.append(f"{key}: {gate.describe(figure)}")
    benchmark.extra_info.update(info)
    ROWS.append(info)
    assert not failed, f"{name}: below its gate: " + "; ".join(failed)


def pair_figures(pair: Pair, amount: float | None = None, unit: str = "audio s") -> dict[str, Any]:
    """The figures of a pair: best times, ratio, and ``amount`` per second
    per core (agl-fast and best peer) where the work has a size."""
    out: dict[str, Any] = {
        "ratio": pair.ratio,
        "best_peer": pair.best_peer,
        "rounds": pair.rounds,
        "agl_fast_s": pair.ours,
        "peer_s": dict(pair.peers),
    }
    if amount is not None:
        out["unit"] = unit
        out["agl_fast_per_s"] = amount / pair.ours
        out["peer_per_s"] = amount / pair.peers[pair.best_peer]
    return out
