"""``agl-fast agl1k fetch`` against a loopback server laid out like the
archive's download paths, the key-first audio resolution, and ``query``
sending each key its own audio."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytest.importorskip("httpx")

from agl_fast import manifest
from agl_fast.cli import main
from agl_fast.dataset import duration_agrees, read_ledger
from agl_fast.exceptions import ParameterError

LONDON, AUSTRIA = "aporee_32619_37498", "aporee_30745_35358"
FAST = ["--rate", "0", "--backoff-base", "0.01", "--read-timeout", "2", "--connect-timeout", "2"]


def _encoder() -> list[str] | None:
    if shutil.which("ffmpeg"):
        return ["ffmpeg"]
    if shutil.which("lame"):
        return ["lame"]
    return None


def make_mp3(path: Path, seconds: float, freq: float) -> bytes:
    """A mono MP3 tone of ``seconds`` (ffmpeg, else lame from a WAV)."""
    enc = _encoder()
    if enc is None:
        pytest.skip("no MP3 encoder (ffmpeg or lame)")
    if enc == ["ffmpeg"]:
        src = f"sine=frequency={freq}:duration={seconds}:sample_rate=22050"
        cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", src, "-ac", "1",
               "-b:a", "32k", str(path)]  # fmt: skip
    else:
        import numpy as np
        import soundfile as sf

        wav = path.with_suffix(".wav")
        t = np.arange(int(seconds * 22050)) / 22050
        sf.write(wav, 0.3 * np.sin(2 * np.pi * freq * t), 22050)
        cmd = ["lame", "--quiet", "-b", "32", str(wav), str(path)]
    subprocess.run(cmd, check=True, timeout=60)
    return path.read_bytes()


class Archive:
    """Loopback ``/{key}/{name}`` server with scripted faults and a request log.

    ``files`` maps a path to its bytes; ``faults`` maps a path to faults used in
    order (``503``, ``truncate``, ``drip``, ``redirect:LOCATION``, ``slow``);
    ``always`` maps a path to a fault of every request.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.faults: dict[str, list[str]] = {}
        self.always: dict[str, str] = {}
        self.log: list[tuple[str, int]] = []
        self.times: dict[str, list[float]] = {}
        self.lock = threading.Lock()
        self.slow = 0.0
        self.inflight = 0
        self.max_inflight = 0

    def requests(self, path: str) -> int:
        with self.lock:
            return sum(1 for p, _ in self.log if p == path)

    def start(self) -> str:
        archive = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                archive.serve(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _status(self, h: BaseHTTPRequestHandler, code: int, headers: dict[str, str]) -> None:
        h.send_response(code)
        for k, v in {"Content-Length": "0", **headers}.items():
            h.send_header(k, v)
        h.end_headers()

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path
        with self.lock:
            queue = self.faults.get(path)
            fault = queue.pop(0) if queue else self.always.get(path)
        data = self.files.get(path)
        code = 200 if data is not None else 404
        if fault and fault.startswith("503"):
            code = 503
        elif fault and fault.startswith("redirect:"):
            code = 302
        with self.lock:
            self.log.append((path, code))
            self.times.setdefault(path, []).append(time.monotonic())
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if code == 404:
                self._status(h, 404, {})
            elif code == 503:
                wait = str(fault).split(":", 1)[1] if ":" in str(fault) else "0.3"
                self._status(h, 503, {"Retry-After": wait})
            elif code == 302:
                self._status(h, 302, {"Location": str(fault).split(":", 1)[1]})
            else:
                assert data is not None
                self._body(h, data, fault)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self.lock:
                self.inflight -= 1

    def _body(self, h: BaseHTTPRequestHandler, data: bytes, fault: str | None) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "audio/mpeg")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if fault == "truncate":
            h.wfile.write(data[: len(data) // 2])
            h.wfile.flush()
            h.close_connection = True
            return
        if fault == "drip":
            end = time.monotonic() + 30
            for b in data:
                if time.monotonic() > end:
                    break
                h.wfile.write(bytes([b]))
                h.wfile.flush()
                time.sleep(0.1)
            return
        half = len(data) // 2
        h.wfile.write(data[:half])
        h.wfile.flush()
        if self.slow:
            time.sleep(self.slow)
        h.wfile.write(data[half:])


@pytest.fixture
def archive() -> Iterator[Archive]:
    a = Archive()
    a.start()
    yield a
    a.stop()


def write_csv(path: Path, rows: list[tuple[str, str, float]]) -> Path:
    """An AGL1K CSV (the released 19-name header, 20 fields a row)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(manifest.AGL1K_HEADER)
        for i, (key, name, secs) in enumerate(rows):
            w.writerow([key, f"s{i}", 10.0 + i, 40.0 + i, "", "d", "t", name, secs, "City",
                        "Country", "Europe", *(["0.1"] * 8)])  # fmt: skip
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def corpus(archive: Archive, tmp_path: Path) -> dict[str, Any]:
    """The fault matrix: key -> (mp3name, true seconds, mp3seconds in the CSV)."""
    src = tmp_path / "src"
    src.mkdir()
    spec = {
        LONDON: ("STE001.mp3", 3.0, 3.0, 440.0),
        AUSTRIA: ("STE001.mp3", 2.0, 2.0, 660.0),
        "aporee_redirect": ("moved.mp3", 1.5, 1.5, 550.0),
        "aporee_flaky": ("flaky.mp3", 1.2, 1.2, 330.0),
        "aporee_cut": ("cut.mp3", 1.4, 1.4, 880.0),
        "aporee_mismatch": ("wrong.mp3", 1.0, 9.0, 220.0),
        "aporee_missing": ("gone.mp3", 1.0, 1.0, 0.0),
        "aporee_drip": ("slow.mp3", 1.0, 1.0, 770.0),
        "aporee_loop": ("loop.mp3", 1.0, 1.0, 0.0),
    }
    data = {}
    for i, (key, (name, secs, _csv_secs, freq)) in enumerate(spec.items()):
        if freq:
            data[key] = make_mp3(src / f"{i}.mp3", secs, freq)
            archive.files[f"/{key}/{name}"] = data[key]
    # moved: two hops of redirects to a different path
    archive.files["/files/moved.mp3"] = archive.files.pop("/aporee_redirect/moved.mp3")
    archive.always["/aporee_redirect/moved.mp3"] = "redirect:/hop/moved.mp3"
    archive.always["/hop/moved.mp3"] = "redirect:/files/moved.mp3"
    archive.always["/aporee_loop/loop.mp3"] = "redirect:/aporee_loop/loop.mp3"
    archive.faults["/aporee_flaky/flaky.mp3"] = ["503"]
    archive.faults["/aporee_cut/cut.mp3"] = ["truncate"]
    archive.always["/aporee_drip/slow.mp3"] = "drip"
    rows = [(k, v[0], v[2]) for k, v in spec.items()]
    return {"csv": write_csv(tmp_path / "agl1k.csv", rows), "data": data, "spec": spec}


def fetch(url: str, csv_path: Path, out: Path, *extra: str) -> int:
    return main(["agl1k", "fetch", str(csv_path), "--out", str(out), "--base-url", url,
                 *FAST, *extra])  # fmt: skip


def test_fetch_stores_by_key_verifies_and_records_failures(
    archive: Archive, corpus: dict[str, Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{archive.httpd.server_address[1]}"
    out = tmp_path / "audio"
    t0 = time.monotonic()
    rc = fetch(url, corpus["csv"], out, "--deadline", "2", "--workers", "4")
    elapsed = time.monotonic() - t0
    assert rc == 1  # some clips failed
    assert elapsed < 20, elapsed  # the drip did not hold the run
    led = read_ledger(out)
    data, spec = corpus["data"], corpus["spec"]
    # the collision: both recordings, each under its key, different bytes
    for key in (LONDON, AUSTRIA, "aporee_redirect", "aporee_flaky", "aporee_cut"):
        rec = led[key]
        assert rec.status == "ok", rec
        stored = (out / f"{key}.mp3").read_bytes()
        assert stored == data[key]
        assert rec.bytes == len(data[key]) and rec.sha256 == sha(data[key])
        assert rec.seconds == pytest.approx(spec[key][1], abs=0.1)
        assert rec.duration_ok is True
    assert led[LONDON].sha256 != led[AUSTRIA].sha256
    assert led[LONDON].url.endswith(f"/{LONDON}/STE001.mp3")
    assert not (out / "STE001.mp3").exists()
    assert led["aporee_redirect"].final_url == f"{url}/files/moved.mp3"
    assert led["aporee_flaky"].attempts == 2 and led["aporee_cut"].attempts == 2
    assert archive.requests("/aporee_flaky/flaky.mp3") == 2
    first, second = archive.times["/aporee_flaky/flaky.mp3"]
    assert second - first >= 0.3  # the server's Retry-After, not the 0.01 s backoff
    # the duration check
    mis = led["aporee_mismatch"]
    assert mis.status == "ok" and mis.duration_ok is False and mis.mp3seconds == 9.0
    # typed failures with readable reasons, no file left behind
    assert led["aporee_missing"].status == "failed"
    assert led["aporee_missing"].error_type == "http_404"
    assert "HTTP 404 Not Found" in str(led["aporee_missing"].reason)
    assert archive.requests("/aporee_missing/gone.mp3") == 1  # a 404 is not retried
    assert led["aporee_drip"].error_type == "deadline"
    assert "2 s deadline" in str(led["aporee_drip"].reason)
    assert led["aporee_loop"].error_type == "redirects"
    for key in ("aporee_missing", "aporee_drip", "aporee_loop"):
        assert not (out / f"{key}.mp3").exists()
    assert not list(out.glob(".*.part"))
    summary = json.loads((out / "fetch_summary.json").read_text())
    assert summary["fetched"] == 6 and summary["failed"] == 3
    assert summary["duration_mismatch"] == ["aporee_mismatch"]
    assert summary["errors"] == {"http_404": 1, "deadline": 1, "redirects": 1}

    # a rerun keeps what is stored, asks again only for the failures
    before = {p: archive.requests(p) for p in archive.files}
    archive.always.pop("/aporee_drip/slow.mp3")
    assert fetch(url, corpus["csv"], out, "--deadline", "5") == 1
    for p, n in before.items():
        expected = n + 1 if p in ("/aporee_drip/slow.mp3",) else n
        assert archive.requests(p) == expected, p
    assert read_ledger(out)["aporee_drip"].status == "ok"
    # a stored file changed on disk is fetched again
    (out / f"{LONDON}.mp3").write_bytes(b"not the recording")
    fetch(url, corpus["csv"], out)
    assert (out / f"{LONDON}.mp3").read_bytes() == data[LONDON]


def test_too_large_and_not_audio_fail_typed(
    archive: Archive, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{archive.httpd.server_address[1]}"
    archive.files["/k_html/a.mp3"] = b"<html>503 Service Unavailable</html>" * 20
    archive.files["/k_big/b.mp3"] = b"\0" * 5000
    csv_path = write_csv(tmp_path / "m.csv", [("k_html", "a.mp3", 1.0), ("k_big", "b.mp3", 1.0),
                                             ("../evil", "c.mp3", 1.0),
                                             ("k_path", "../../c.mp3", 1.0),
                                             ("k_busy", "d.mp3", 1.0)])  # fmt: skip
    archive.files["/k_busy/d.mp3"] = b"x"
    archive.always["/k_busy/d.mp3"] = "503:3600"
    out = tmp_path / "o"
    assert fetch(url, csv_path, out, "--max-bytes", "4000") == 1
    led = read_ledger(out)
    assert led["k_html"].error_type == "not_audio"
    assert led["k_big"].error_type == "too_large" and "4000" in str(led["k_big"].reason)
    assert led["../evil"].error_type == "bad_name" and led["../evil"].attempts == 0
    assert led["k_path"].error_type == "bad_name"
    assert led["k_busy"].error_type == "retry_after" and "3600" in str(led["k_busy"].reason)
    assert archive.requests("/k_busy/d.mp3") == 1
    assert sorted(p.name for p in out.iterdir()) == ["fetch.jsonl", "fetch_summary.json"]
    # one writer per folder
    from agl_fast.dataset import Ledger

    with Ledger(out):
        assert fetch(url, csv_path, out) == 2
    assert "another fetch is writing" in capsys.readouterr().err
    with archive.lock:
        assert not any("evil" in p or ".." in p for p, _ in archive.log)


def test_kill_9_then_rerun_fetches_nothing_twice(archive: Archive, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{archive.httpd.server_address[1]}"
    src = tmp_path / "src"
    src.mkdir()
    rows, data = [], {}
    for i in range(10):
        key = f"aporee_{i}_{i + 100}"
        data[key] = make_mp3(src / f"{i}.mp3", 1.0 + 0.1 * i, 300.0 + 40 * i)
        archive.files[f"/{key}/clip{i % 3}.mp3"] = data[key]
        rows.append((key, f"clip{i % 3}.mp3", 1.0 + 0.1 * i))
    archive.slow = 0.4  # each body pauses half-way: a kill leaves a partial file
    csv_path = write_csv(tmp_path / "m.csv", rows)
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "agl_fast.cli", "agl1k", "fetch", str(csv_path), "--out",
           str(out), "--base-url", url, "--workers", "1", *FAST]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ledger = out / "fetch.jsonl"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            lines = ledger.read_bytes().count(b"\n") if ledger.exists() else 0
            if lines >= 3 and list(out.glob(".*.part")):
                break
            time.sleep(0.02)
        else:
            pytest.fail("the fetch did not progress")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    done = {k for k, r in read_ledger(out).items() if r.status == "ok"}
    assert 3 <= len(done) < 10
    # killed mid-file (almost always: the body pauses half-way for 0.4 s)
    partial = len(list(out.glob(".*.part")))
    archive.slow = 0.0
    assert fetch(url, csv_path, out) == 0
    for key in data:
        path = f"/{key}/clip{int(key.split('_')[1]) % 3}.mp3"
        # completed files were never asked for again; the others once or twice
        assert archive.requests(path) == 1 if key in done else archive.requests(path) in (1, 2)
    led = read_ledger(out)
    assert sorted(led) == sorted(data)
    for key, blob in data.items():
        assert led[key].status == "ok" and led[key].sha256 == sha(blob)
        assert (out / f"{key}.mp3").read_bytes() == blob
    assert not list(out.glob(".*.part"))
    summary = json.loads((out / "fetch_summary.json").read_text())
    assert summary["kept"] == len(done) and summary["partials_removed"] == partial


def test_rate_and_workers_bound_the_requests(archive: Archive, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{archive.httpd.server_address[1]}"
    blob = make_mp3(tmp_path / "x.mp3", 0.5, 440.0)
    rows = []
    for i in range(9):
        archive.files[f"/k{i}/x.mp3"] = blob
        rows.append((f"k{i}", "x.mp3", 0.5))
    csv_path = write_csv(tmp_path / "m.csv", rows)
    archive.slow = 0.1
    args = ["agl1k", "fetch", str(csv_path), "--base-url", url, "--workers", "2"]
    assert main([*args, "--out", str(tmp_path / "a"), "--rate", "4"]) == 0
    starts = sorted(t for ts in archive.times.values() for t in ts)
    # a bucket of 4 tokens refilled at 4 a second: 9 requests span at least 1.25 s
    assert len(starts) == 9 and starts[-1] - starts[0] >= 1.2
    assert archive.max_inflight == 2


def test_released_csv_rows_and_real_recordings(
    archive: Archive, tmp_path: Path, shared_dir: Path
) -> None:
    """Rows of the released CSV (19-name header, 20 fields) with the two real
    recordings; the two STE001 keys are served the wrong recordings, which
    the duration check catches."""
    agl = shared_dir / "agl1k"
    berlin, essaouira = "aporee_5201_6631", "aporee_26839_30948"
    with (agl / "geoLocalization_schema.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    keep = [r for r in rows[1:] if r[0] in (berlin, essaouira, LONDON, AUSTRIA)]
    assert len(keep) == 4 and all(len(r) == 20 for r in keep) and len(rows[0]) == 19
    csv_path = tmp_path / "released.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([rows[0], *keep])
    real = {
        berlin: (agl / "AmselanDietersFensterJuni2003Edit.mp3").read_bytes(),
        essaouira: (agl / "20020207EssaouiraRempartsMuezzin.mp3").read_bytes(),
    }
    archive.files[f"/{berlin}/AmselanDietersFensterJuni2003Edit.mp3"] = real[berlin]
    archive.files[f"/{essaouira}/20020207EssaouiraRempartsMuezzin.mp3"] = real[essaouira]
    archive.files[f"/{LONDON}/STE001.mp3"] = real[essaouira]
    archive.files[f"/{AUSTRIA}/STE001.mp3"] = real[berlin]
    url = f"http://127.0.0.1:{archive.httpd.server_address[1]}"
    out = tmp_path / "o"
    assert fetch(url, csv_path, out) == 0
    led = read_ledger(out)
    for key in (berlin, essaouira):
        assert led[key].duration_ok is True and led[key].sha256 == sha(real[key])
        assert led[key].seconds == pytest.approx(led[key].mp3seconds, abs=0.01)
    assert led[LONDON].mp3seconds == pytest.approx(105.52163)
    assert led[LONDON].duration_ok is False and led[AUSTRIA].duration_ok is False
    summary = json.loads((out / "fetch_summary.json").read_text())
    assert sorted(summary["duration_mismatch"]) == sorted([LONDON, AUSTRIA])


def test_ledger_skips_a_torn_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from agl_fast.dataset import FetchRecord, Ledger

    with Ledger(tmp_path) as led:
        led.append(FetchRecord(key="k1", mp3name="a.mp3", url="u", status="ok", bytes=3))
    with (tmp_path / "fetch.jsonl").open("a") as fh:
        fh.write('{"key": "k2", "mp3name": "b.mp3", "url": "u", "sta')  # cut by a kill
    with caplog.at_level("WARNING", logger="agl_fast.dataset"), Ledger(tmp_path) as led:
        assert sorted(led.records) == ["k1"] and led.damaged == 1
        led.append(FetchRecord(key="k2", mp3name="b.mp3", url="u", status="failed"))
    assert "1 damaged line(s) skipped" in caplog.text
    # the next line starts on a line of its own: only the torn one is lost
    done = read_ledger(tmp_path)
    assert done["k1"].bytes == 3 and done["k2"].status == "failed"


# --- the one resolution rule --------------------------------------------------


def test_resolve_audio_key_first_then_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / f"{LONDON}.mp3").write_bytes(b"a")
    (tmp_path / "STE001.mp3").write_bytes(b"b")
    keys = [LONDON, AUSTRIA, "k3"]
    names = ["STE001.mp3", "STE001.mp3", None]
    got = manifest.resolve_audio(keys, names, tmp_path)
    assert got == [tmp_path / f"{LONDON}.mp3", tmp_path / "STE001.mp3", None]
    # both by name only: one file for two keys
    (tmp_path / f"{LONDON}.mp3").unlink()
    with caplog.at_level("WARNING", logger="agl_fast.manifest"):
        got = manifest.resolve_audio(keys, names, tmp_path)
    assert got[0] == got[1] == tmp_path / "STE001.mp3"
    assert f"STE001.mp3: {LONDON}, {AUSTRIA}" in caplog.text
    with pytest.raises(ParameterError, match="shared by several keys"):
        manifest.resolve_audio(keys, names, tmp_path, strict=True)
    assert manifest.keyed_audio_name("a/b", "x.mp3") is None
    assert manifest.keyed_audio_name("k", "X.FLAC") == "k.flac"
    assert duration_agrees(100.0, 100.9) is True and duration_agrees(100.0, 101.1) is False


def test_game_catalogue_resolves_by_key(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    from agl_fast.game.clips import load_catalogue

    audio = tmp_path / "audio"
    audio.mkdir()
    a = make_mp3(audio / f"{LONDON}.mp3", 1.0, 440.0)
    b = make_mp3(audio / f"{AUSTRIA}.mp3", 1.5, 660.0)
    csv_path = write_csv(tmp_path / "m.csv", [(LONDON, "STE001.mp3", 1.0),
                                             (AUSTRIA, "STE001.mp3", 1.5)])  # fmt: skip
    cat = load_catalogue(csv_path, audio, strict=True)
    assert cat.clips[LONDON].path.read_bytes() == a
    assert cat.clips[AUSTRIA].path.read_bytes() == b
    # a flat folder by mp3name: one file for two keys
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "STE001.mp3").write_bytes(a)
    assert len(load_catalogue(csv_path, flat).clips) == 2
    with pytest.raises(ParameterError, match="shared by several keys"):
        load_catalogue(csv_path, flat, strict=True)
    # curate follows the same rule
    args = ["curate", "--manifest", str(csv_path), "--out", str(tmp_path / "c")]
    assert main([*args, "--audio-dir", str(flat), "--strict"]) == 2


# --- query sends each key its own audio ----------------------------------------


def test_query_sends_each_key_its_own_audio(
    archive: Archive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    pytest.importorskip("soundfile")
    sys.path.insert(0, str(Path(__file__).parent))
    from _alm_server import FakeALM

    url = f"http://127.0.0.1:{archive.httpd.server_address[1]}"
    data = {
        LONDON: make_mp3(tmp_path / "l.mp3", 1.0, 440.0),
        AUSTRIA: make_mp3(tmp_path / "a.mp3", 1.5, 660.0),
    }
    for key, blob in data.items():
        archive.files[f"/{key}/STE001.mp3"] = blob
    csv_path = write_csv(tmp_path / "m.csv", [(LONDON, "STE001.mp3", 1.0),
                                             (AUSTRIA, "STE001.mp3", 1.5)])  # fmt: skip
    audio = tmp_path / "audio"
    assert fetch(url, csv_path, audio) == 0
    # a flat copy under the shared name, as the reference downloader leaves it
    (audio / "STE001.mp3").write_bytes(data[AUSTRIA])

    api_key = "sk-test-0123456789abcdef0123456789abcdef"
    monkeypatch.setenv("VLLM_API_KEY", api_key)
    monkeypatch.setenv("AGL_FAST_KEYS", str(tmp_path / "no-keys.ini"))
    alm = FakeALM(api_key)
    alm_url = alm.start()
    try:
        out = tmp_path / "q"
        rc = main(["query", "--provider", "vllm", "--model", "m", "--manifest", str(csv_path),
                   "--audio-dir", str(audio), "--out", str(out), "--base-url", alm_url + "/v1",
                   "--protocol", "agl1k", "--no-progress", "--backoff-base", "0.02",
                   "--timeout", "10", "--strict"])  # fmt: skip
        assert rc == 0
        sent = []
        for rec in alm.records:
            for part in rec.body["messages"][0]["content"]:
                if part.get("type") == "input_audio":
                    blob = base64.b64decode(part["input_audio"]["data"].split(",", 1)[-1])
                    sent.append(sha(blob))
    finally:
        alm.stop()
    assert sorted(sent) == sorted(sha(b) for b in data.values())
    table = pq.read_table(out / "m.parquet").to_pandas().set_index("question_id")
    for key, blob in data.items():
        assert table.loc[key, "audio_hash"] == sha(blob)

    # without the keyed files both keys fall back to the one flat file
    for key in data:
        (audio / f"{key}.mp3").unlink()
    args = ["query", "--provider", "vllm", "--model", "m", "--manifest", str(csv_path),
            "--audio-dir", str(audio), "--out", str(tmp_path / "q2"), "--dry-run"]  # fmt: skip
    with caplog.at_level("WARNING"):
        assert main(args) == 0
    assert "shared by several keys" in caplog.text
    assert main([*args, "--strict"]) == 2
