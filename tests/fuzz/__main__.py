"""Long fuzzing runs: ``python scripts/fuzz_decode.py --minutes 60 --out DIR``.

Runs the targeted cases once, then random cases in rounds until the time is
up, printing a line per round and the totals (cases, ok, typed errors,
untyped errors, crashes, hangs). Crashing, hanging and untyped cases are
saved under ``DIR/<kind>/`` with a ``.json`` of their seed, mutations and
options; ``DIR/summary.json`` holds the totals. Exits 1 when any case
failed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from .mutate import random_case, seek_case, targeted_cases
from .runner import DEFAULT_MEMORY, DEFAULT_TIMEOUT, KINDS, Report, run_cases
from .seeds import SEEK_SEED_SECONDS, make_seeds, make_seek_seeds

FORMATS = ("wav", "flac", "ogg", "mp3", "m4a", "opus", "webm", "aiff")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="scripts/fuzz_decode.py",
        description="Mutation-fuzz the audio decoders in capped child processes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--minutes", type=float, default=5.0, help="how long to run")
    ap.add_argument("--long", action="store_true", help="run for an hour (--minutes 60)")
    ap.add_argument("--out", type=Path, required=True, help="where failing cases are saved")
    ap.add_argument("--seed", type=int, default=1, help="base seed of the random cases")
    ap.add_argument("--start", type=int, default=0, help="index of the first random case")
    ap.add_argument("--round", type=int, default=500, help="random cases per child batch")
    ap.add_argument("--workers", type=int, default=1, help="child processes at once")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    ap.add_argument(
        "--memory-gb",
        type=float,
        default=DEFAULT_MEMORY / 2**30,
        help="address-space cap per child",
    )
    ap.add_argument("--formats", default=",".join(FORMATS), help="comma-separated formats")
    ap.add_argument("--no-targeted", action="store_true", help="skip the targeted cases")
    args = ap.parse_args(argv)
    minutes = 60.0 if args.long else args.minutes
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = sorted(set(formats) - set(FORMATS))
    if bad:
        print(f"error: --formats: unknown {bad}, choose from {list(FORMATS)}", file=sys.stderr)
        return 2

    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60.0 * minutes
    totals: Counter[str] = Counter()
    saved: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agl-fuzz-") as tmp:
        seedset = make_seeds(Path(tmp) / "seeds")
        for fmt, why in seedset.missing.items():
            print(f"{fmt}: no seeds ({why}); these cases are skipped")
        seeds = [s for s in seedset.seeds if s.fmt in formats]
        if not seeds:
            print("error: no seed files for the chosen formats", file=sys.stderr)
            return 2
        good = next((s.path for s in seedset.seeds if s.fmt == "wav"), seeds[0].path)
        # Longer seeds, read at random offsets (one seeking case in ten).
        seek_seeds = [s for s in make_seek_seeds(Path(tmp) / "seek").seeds if s.fmt in formats]

        def run(cases: list, label: str) -> None:  # type: ignore[type-arg]
            t0 = time.monotonic()
            rep: Report = run_cases(
                cases,
                Path(tmp) / "work",
                good,
                out_dir=args.out,
                timeout=args.timeout,
                memory=int(args.memory_gb * 2**30),
                workers=args.workers,
            )
            totals.update(rep.counts)
            saved.extend(str(p) for p in rep.saved)
            rate = len(cases) / max(time.monotonic() - t0, 1e-9)
            print(f"{label}: {rep.summary()} ({rate:.0f} cases/s)", flush=True)
            for o in rep.failures:
                print(f"  {o.kind}: {o.case.case_id} {list(o.case.ops)} {o.case.opts}: {o.detail}")

        if not args.no_targeted:
            run([c for c in targeted_cases(seeds)], "targeted")
        i = args.start
        while time.monotonic() < deadline:
            run(
                [random_case(seeds, args.seed, k) for k in range(i, i + args.round)],
                f"r{args.seed} {i}+",
            )
            if seek_seeds:
                ks = range(i, i + max(1, args.round // 10))
                run(
                    [seek_case(seek_seeds, args.seed, k, SEEK_SEED_SECONDS) for k in ks],
                    f"s{args.seed} {i}+",
                )
            i += args.round

    n = sum(totals.values())
    summary = {"cases": n, **{k: totals[k] for k in KINDS}, "minutes": minutes, "seed": args.seed}
    summary["random_cases"] = f"{args.start}..{i}"
    summary["saved"] = saved
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(
        f"total: {n} cases, {totals['ok']} decoded, {totals['typed']} typed errors, "
        f"{totals['untyped']} untyped errors, {totals['crash']} crashes, {totals['hang']} hangs"
    )
    return 1 if totals["untyped"] + totals["crash"] + totals["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
