"""``agl-fast agl1k fetch`` throughput over loopback, and the cost of a resume.

A loopback server serves the two real AGL1K recordings shipped with the data
(``../shared/agl1k``, 4.1 and 3.4 MB) under ``--clips`` keys laid out like the
archive's download paths. Prints files and megabytes a second for the first
run (download, hash, decode, rename, synced manifest line) and the time of a
rerun that keeps everything (``--verify hash`` and ``size``).

    python benches/bench_fetch.py [--clips 40] [--workers 4]
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agl_fast import manifest
from agl_fast.dataset.fetch import FetchOptions, fetch

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "agl1k"
RECORDINGS = {
    "20020207EssaouiraRempartsMuezzin.mp3": 128.09496598639456,
    "AmselanDietersFensterJuni2003Edit.mp3": 140.387375,
}


def serve(files: dict[str, bytes]) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            data = files.get(self.path)
            self.send_response(200 if data is not None else 404)
            self.send_header("Content-Length", str(len(data or b"")))
            self.end_headers()
            if data:
                self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clips", type=int, default=40)
    ap.add_argument("--workers", type=int, default=4)
    a = ap.parse_args()
    blobs = {n: (SHARED / n).read_bytes() for n in RECORDINGS}
    names = list(RECORDINGS)
    files, rows = {}, []
    for i in range(a.clips):
        name = names[i % 2]
        key = f"aporee_{i}_{i + 1000}"
        files[f"/{key}/{name}"] = blobs[name]
        rows.append([key, f"s{i}", 1.0, 2.0, "", "", "", name, RECORDINGS[name], "", "", "",
                     *([0.0] * 8)])  # fmt: skip
    httpd, url = serve(files)
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "m.csv"
        with csv_path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(manifest.AGL1K_HEADER)
            w.writerows(rows)
        opts = FetchOptions(base_url=url, workers=a.workers, rate=None)
        out = Path(tmp) / "out"
        t0 = time.perf_counter()
        s = fetch(csv_path, out, opts)
        first = time.perf_counter() - t0
        assert s.fetched == a.clips and not s.duration_mismatch, s
        mb = s.bytes / 1e6
        print(f"first run: {a.clips} files, {mb:.1f} MB in {first:.2f} s: "
              f"{a.clips / first:.1f} files/s, {mb / first:.1f} MB/s "
              f"(workers {a.workers})")  # fmt: skip
        for verify in ("hash", "size"):
            opts.verify = verify
            t0 = time.perf_counter()
            s = fetch(csv_path, out, opts)
            took = time.perf_counter() - t0
            assert s.kept == a.clips and s.requests == 0, s
            print(f"rerun, --verify {verify}: {took:.3f} s, 0 requests")
    httpd.shutdown()


if __name__ == "__main__":
    main()
