"""The ALM query harness (``agl-fast query --concurrency 8``: store, limits,
parsing, Parquet) against the paper script's way, a sequential loop of
blocking requests (``benches/bench_alm.py``), same clips, same loopback
server answering after a fixed latency. Wall clock: the work is waiting."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import _memory
import bench_alm as ba
from _gates import Gate
from _suite import pair_figures, report, run_pair

pytestmark = pytest.mark.benchmark(group="alm", timer=time.perf_counter)

LATENCY = 0.2
CONCURRENCY = 8


def test_alm_query(benchmark: Any, quick: bool, gates: dict[str, Gate]) -> None:
    from agl_fast.alm.prompts import DEFAULT_PROMPT, TEMPLATES
    from agl_fast.alm.query import output_name

    n = 24 if quick else 64
    prompt = TEMPLATES[DEFAULT_PROMPT].text
    httpd, url = ba.serve(LATENCY)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            ba.make_clips(d, n, 5.0)
            outs = iter(range(1_000))

            def ours() -> Path:
                out = d / f"out{next(outs)}"  # a fresh output: no resume
                ba.harness(d, url, CONCURRENCY, out)
                return out

            # Outputs first: one parsed answer per clip, the server's.
            rows = pd.read_parquet(ours() / output_name("m"))
            assert len(rows) == n, f"{len(rows)} rows for {n} clips"
            assert (rows["answer_class"] != "error").all()
            peak = _memory.peak_growth(ours)
            pair = run_pair(
                benchmark,
                ours,
                {"sequential loop": lambda: ba.sequential(d, n, url, prompt)},
                rounds=1 if quick else 3,
                clock=time.perf_counter,
            )
    finally:
        httpd.shutdown()
        httpd.server_close()
    figures = pair_figures(pair, n, unit="clips (wall)")
    figures["memory_method"] = "peak RSS growth of this process during one run (VmHWM)"
    figures["peak_rss_bytes"] = None if peak is None else peak[0]
    report(
        benchmark, "alm: query harness", figures, [("alm_query", gates["alm_query"], pair.ratio)]
    )
