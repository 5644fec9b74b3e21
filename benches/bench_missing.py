"""How fast ``agl-fast curate`` reports inputs it cannot read.

A manifest of N rows whose files do not exist goes through the real
``curate`` command (its metadata pass finds them before any decoding);
the figure is rows per second of wall time, end to end, with the peak
resident memory of the run.

    python benches/bench_missing.py --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CURATE = [sys.executable, "-m", "agl_fast", "curate", "-q"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="manifest rows (all missing)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        with (d / "m.csv").open("w") as fh:
            fh.write("key,path\n")
            fh.writelines(f"k{i},missing/{i}.mp3\n" for i in range(args.rows))
        t0 = time.perf_counter()
        r = subprocess.run(
            [*CURATE, "--manifest", str(d / "m.csv"), "--out", str(d / "out")],
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        if r.returncode not in (0, 1):
            print(r.stderr, file=sys.stderr)
            return 1
        counts = json.loads((d / "out" / "summary.json").read_text())["counts"]
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    found = counts["errors_by_type"].get("FileNotFound", 0)
    print("| rows | reported missing | wall s | rows/s | peak RSS MB |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {args.rows:,} | {found:,} | {wall:.1f} | {args.rows / wall:,.0f} | {peak_mb:,.0f} |")
    return 0 if found == args.rows else 1


if __name__ == "__main__":
    sys.exit(main())
