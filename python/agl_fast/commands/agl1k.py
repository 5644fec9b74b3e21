"""``agl-fast agl1k fetch MANIFEST --out DIR``: download the AGL1K recordings
by key, resumably (see :mod:`agl_fast.dataset`).

Exit status: 0 every clip stored, 1 some clips failed (their reasons are in
``DIR/fetch.jsonl`` and the summary), 2 bad arguments or manifest.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..dataset.fetch import SUMMARY_NAME, FetchOptions, fetch
from ..fetch_ledger import DURATION_TOLERANCE_REL, DURATION_TOLERANCE_S, LEDGER_NAME

__all__ = ["add_parser", "run"]

_DESCRIPTION = (
    "Download every clip of the AGL1K manifest from {base-url}/{key}/{mp3name} and store it "
    "as OUT/{key}.mp3 (mp3name is not unique; the key is). Each file is size-checked, hashed "
    f"and decoded; OUT/{LEDGER_NAME} gets one line per clip (URL, bytes, SHA-256, decoded "
    "seconds, agreement with mp3seconds within "
    f"max({DURATION_TOLERANCE_S:g} s, {DURATION_TOLERANCE_REL:.0%}), status, failure reason), "
    "synced to disk. A rerun keeps the files the manifest vouches for and fetches the rest. "
    "OUT is then the --audio-dir of query, curate and serve."
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``agl1k`` and its action ``fetch``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "agl1k", help="the AGL1K data set: fetch its recordings by key"
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    f = actions.add_parser("fetch", help="download the recordings (resumable)",
                           description=_DESCRIPTION)  # fmt: skip
    d = FetchOptions()
    f.add_argument("manifest", help="geoLocalization_schema.csv (or a manifest with key, mp3name)")
    f.add_argument("--out", required=True, type=Path, help="folder of the clips and fetch.jsonl")
    f.add_argument(
        "--base-url", default=d.base_url, help="download root: {base-url}/{key}/{mp3name}"
    )
    f.add_argument("--workers", type=int, default=d.workers, help="files downloaded at once")
    f.add_argument("--rate", type=float, default=d.rate,
                   help="requests a second over all workers and retries (0: no limit)")  # fmt: skip
    f.add_argument("--retries", type=int, default=d.retries, help="retries of a file")
    f.add_argument("--backoff-base", type=float, default=d.backoff_base,
                   help="backoff before retry n: uniform in [0, base * 2**n] s")  # fmt: skip
    f.add_argument("--max-retry-wait", type=float, default=d.max_retry_wait,
                   help="a longer Retry-After fails the file (s)")  # fmt: skip
    f.add_argument("--connect-timeout", type=float, default=d.connect_timeout, help="seconds")
    f.add_argument("--read-timeout", type=float, default=d.read_timeout,
                   help="seconds to wait for each piece of an answer")  # fmt: skip
    f.add_argument("--deadline", type=float, default=d.deadline,
                   help="seconds one file may take, all attempts included")  # fmt: skip
    f.add_argument("--max-bytes", type=int, default=d.max_bytes, help="largest file accepted")
    f.add_argument("--max-redirects", type=int, default=d.max_redirects, help="per request")
    f.add_argument("--verify", choices=("hash", "size"), default=d.verify,
                   help="what a rerun checks before keeping a stored file")  # fmt: skip
    f.add_argument("--limit", type=int, default=None, help="the first N clips only")
    f.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Execute ``agl1k fetch``; prints the summary as JSON."""
    opts = FetchOptions(
        base_url=args.base_url,
        workers=args.workers,
        rate=args.rate or None,
        retries=args.retries,
        backoff_base=args.backoff_base,
        max_retry_wait=args.max_retry_wait,
        connect_timeout=args.connect_timeout,
        read_timeout=args.read_timeout,
        deadline=args.deadline,
        max_bytes=args.max_bytes,
        max_redirects=args.max_redirects,
        verify=args.verify,
        limit=args.limit,
    )
    summary = fetch(args.manifest, args.out, opts)
    print(
        json.dumps(
            {
                "clips": summary.clips,
                "kept": summary.kept,
                "fetched": summary.fetched,
                "failed": summary.failed,
                "errors": summary.errors,
                "duration_mismatch": summary.duration_mismatch,
                "summary": str(Path(args.out) / SUMMARY_NAME),
            }
        )
    )
    return 1 if summary.failed else 0
