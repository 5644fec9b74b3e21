"""Peak memory of indexing a BiDepth copy, with and without one long id.

Writes a BiDepth copy of ``--rows`` one-source Type I questions, each over
its own clip (ids ``train/Y<11 digits>``, 1,000 RIRs with positions), and
the same copy with one clip id ``--long-id-chars`` characters long; indexes
each in a fresh interpreter (:class:`agl_fast.sage.bidepth.BidepthData`)
and reads its peak resident memory (``resource.getrusage``, ``ru_maxrss``).
Ids held in fixed-width NumPy strings made the long id cost its length times
every row; held as Python strings it costs its own length.

Usage::

    python benches/bench_bidepth_index_memory.py [--rows 200000] [--long-id-chars 1024]

Prints one JSON object: ``rows``, ``peak_kib`` (``plain``, ``long_id``),
``ratio`` (long id / plain; the acceptance bound is 1.10) and
``growth_kib``, the peak above the interpreter's own after its imports
(torch among them), which is what indexing adds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = (
    "import resource, sys\n"
    "from agl_fast.sage.bidepth import BidepthData\n"
    "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "d = BidepthData(sys.argv[1])\n"
    "n = len(d.index('train')['scenes'])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, before, n)\n"
)


def write_copy(root: Path, rows: int, long_id_chars: int | None) -> None:
    """A BiDepth copy of ``rows`` Type I questions under ``root`` (one clip
    id ``long_id_chars`` long when given)."""
    qa = root / "qa" / "s"
    qa.mkdir(parents=True, exist_ok=True)
    (root / "reverb").mkdir(exist_ok=True)
    with open(qa / "train.json", "w", encoding="utf-8") as fh:
        fh.write('{"data": [')
        for k in range(rows):
            a = f"train/Y{k:011d}"
            if long_id_chars is not None and k == rows // 2:
                a = "train/" + "x" * (long_id_chars - len("train/"))
            row = {"audio_id": a, "reverb_id": f"room{k % 100}/{k % 10}.npy",
                   "audio_id2": None, "reverb_id2": None,
                   "question": "What sound events can you hear?", "answer": "dog; bark",
                   "question_type": "detection", "question_id": k}  # fmt: skip
            fh.write(("," if k else "") + json.dumps(row))
        fh.write("]}")
    pos = [{"fname": f"room{r}/{j}.npy", "sensor_position": "0,0,0",
            "source_position": "1,0,-1"} for r in range(100) for j in range(10)]  # fmt: skip
    (root / "reverb" / "positions.json").write_text(json.dumps({"data": pos}))
    layout = {"qa_data_root": "qa", "stage": "s", "anechoic_data_root": "audio",
              "reverb_data_root": "reverb", "positions": "reverb/positions.json"}  # fmt: skip
    (root / "bidepth.json").write_text(json.dumps(layout))


def peak_kib(root: Path) -> tuple[int, int, int]:
    """(peak RSS, peak RSS before indexing (the imports), both in KiB; scenes
    indexed) of indexing ``root`` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(root)], check=True,
                         capture_output=True, text=True).stdout.split()  # fmt: skip
    return int(out[0]), int(out[1]), int(out[2])


def measure(rows: int, long_id_chars: int = 1024) -> dict[str, object]:
    """The figures the script prints (see the module notes)."""
    peaks, growth = {}, {}
    with tempfile.TemporaryDirectory(prefix="agl-fast-bidepth-") as tmp:
        for name, chars in (("plain", None), ("long_id", long_id_chars)):
            root = Path(tmp) / name
            write_copy(root, rows, chars)
            peaks[name], before, n = peak_kib(root)
            growth[name] = peaks[name] - before
            if n != rows:
                raise RuntimeError(f"{name}: {n} scenes indexed, {rows} expected")
    return {"rows": rows, "long_id_chars": long_id_chars, "peak_kib": peaks,
            "ratio": round(peaks["long_id"] / peaks["plain"], 4), "growth_kib": growth}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000, help="questions (one clip each)")
    ap.add_argument("--long-id-chars", type=int, default=1024, help="length of the long id")
    args = ap.parse_args()
    print(json.dumps(measure(args.rows, args.long_id_chars)))


if __name__ == "__main__":
    main()
