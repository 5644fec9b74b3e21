"""The batch function and crash isolation in curation, with real failures:
a FIFO that blocks ``open`` (a hang), signals sent to the worker blocked on
it (a crash), a header that aborts the decoder, a memory cap and a file
that needs more."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from agl_fast import presets
from agl_fast.audio import load
from agl_fast.pipeline import (
    BatchConfig,
    Clips,
    CurateConfig,
    Inputs,
    curate,
    discover,
    feature_array,
    process_batch,
    read_manifest,
)
from agl_fast.pipeline.inputs import extra_columns


def _tone(sr: int, seconds: float, ch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(sr * seconds)) / sr
    y = 0.3 * np.sin(2 * np.pi * rng.uniform(200, 2000) * t)[:, None] * np.ones(ch)
    return (y + 0.01 * rng.standard_normal(y.shape)).astype(np.float32)


def _wav_header_rate(path: Path, rate: int) -> None:
    """A PCM16 mono WAV whose header claims ``rate`` Hz (1,000 samples)."""
    data = np.zeros(1000, "<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, rate, (rate * 2) & 0xFFFFFFFF, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)


def _good(d: Path, n: int) -> list[str]:
    names = []
    for i in range(n):
        name = f"good{i}.flac"
        sf.write(d / name, _tone(22050, 1.0, 2, i), 22050, subtype="PCM_16")
        names.append(name)
    return names


def _manifest(d: Path, names: list[str]) -> Path:
    m = d / "manifest.csv"
    m.write_text("key,path,city\n" + "".join(f"{n},{n},c{i}\n" for i, n in enumerate(names)))
    return m


# -- the batch function -------------------------------------------------------


def test_process_batch_is_a_pure_function_of_its_table(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    names = _good(d, 3)
    (d / "junk.mp3").write_bytes(b"<html>not audio</html>" * 40)
    paths = [str(d / n) for n in [names[0], "junk.mp3", names[1], "missing.wav", names[2]]]
    table = pa.table({"path": paths, "city": ["a", "b", "c", "d", "e"]})
    before = sorted(os.listdir(d))
    cfg = BatchConfig(sr=32000, features="bat", threads=1)
    out = process_batch(table, cfg)
    assert sorted(os.listdir(d)) == before  # nothing written
    # One row per input row, in input order, key defaulting to the path.
    assert out.column("key").to_pylist() == paths
    assert out.column("city").to_pylist() == ["a", "b", "c", "d", "e"]
    assert out.column("error_type").to_pylist() == [
        None,
        "AudioDecodeError",
        None,
        "FileNotFound",
        None,
    ]
    for f in out.schema:
        t = f.type
        while pa.types.is_list(t) or pa.types.is_large_list(t):
            t = t.value_type
        assert not pa.types.is_integer(t) or t == pa.int64(), f
    # Deterministic, whatever the thread count.
    assert process_batch(table, BatchConfig(sr=32000, features="bat", threads=2)).equals(out)
    # The features column holds what the preset gives on the decoded clip.
    y, _ = load(paths[2], sr=32000, mono=False)
    ref = presets.bat([np.ascontiguousarray(y)], sr=32000, output="list")[0]
    got = feature_array(out.column("features"), 2)
    assert got is not None and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)
    assert feature_array(out.column("features"), 1) is None
    assert out.column("features_shape").to_pylist()[2] == list(ref.shape)


def test_process_batch_without_path_column_is_refused() -> None:
    from agl_fast.exceptions import ParameterError

    with pytest.raises(ParameterError, match="'path' or 'bytes' column"):
        process_batch(pa.table({"file": ["a.wav"]}), BatchConfig())


def test_extra_columns_use_the_index_built_once() -> None:
    n = 50_000
    keys = [f"k{i}" for i in range(n)]
    inputs = Inputs(keys, [f"{k}.wav" for k in keys], {"latitude": [str(i) for i in range(n)]})
    t0 = time.perf_counter()
    for s in range(0, 4000, 8):  # 500 batches; a rebuilt index costs ~n each
        cols = extra_columns(inputs, keys[s : s + 8])
    assert time.perf_counter() - t0 < 2.0
    assert cols["latitude"].to_pylist() == [float(i) for i in range(3992, 4000)]


# -- crash isolation ----------------------------------------------------------


def _readers(path: Path) -> list[int]:
    """Pids of the processes (other than this one) holding ``path`` open."""
    target = os.path.realpath(path)
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    pids.append(int(pid))
                    break
            except OSError:
                continue
    return pids


class _Killer:
    """Kills, with ``sig``, every process that opens the FIFO ``path``."""

    def __init__(self, path: Path, sig: signal.Signals) -> None:
        self.path, self.sig, self.kills = path, sig, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet (ENXIO)
                time.sleep(0.01)
                continue
            try:
                # The reader's open() returns once this write end exists; its
                # descriptor shows in /proc a moment later (closing the write
                # end before that would hand it an end of file instead).
                pids: list[int] = []
                deadline = time.monotonic() + 10.0
                while not pids and time.monotonic() < deadline:
                    pids = _readers(self.path)
                    if not pids:
                        time.sleep(0.005)
                for pid in pids:
                    os.kill(pid, self.sig)
                    self.kills += 1
                    while pid in _readers(self.path):
                        time.sleep(0.005)
            finally:
                os.close(fd)

    def __enter__(self) -> _Killer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


class _HangOn:
    """A stage that blocks, as a decoder stuck on one file would, when its
    batch holds ``key``: it opens the FIFO ``fifo`` for reading, which
    waits for a writer that never comes (the run's inputs are all regular
    files: its metadata pass refuses a FIFO before any worker sees it)."""

    name = "hang_on"

    def __init__(self, key: str, fifo: Path) -> None:
        self.key, self.fifo = key, str(fifo)

    def __call__(self, clips: Clips) -> dict[str, list[int]]:
        if self.key in clips.keys:
            with open(self.fifo, "rb") as fh:
                fh.read()
        return {"hang_on": [0] * len(clips.keys)}


@pytest.fixture
def fifo_corpus(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    d = tmp_path / "in"
    d.mkdir()
    names = _good(d, 6)
    (d / names[2]).rename(d / "x.wav")
    names[2] = "x.wav"
    os.mkfifo(tmp_path / "hang.fifo")
    yield d, names


def test_hanging_file_is_a_timeout_row(fifo_corpus: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, names = fifo_corpus
    inputs = read_manifest(_manifest(d, names))
    cfg = CurateConfig(sr=16000, workers=1, batch_size=3, file_timeout=1.0)
    t0 = time.monotonic()
    summary = curate(inputs, tmp_path / "o", cfg, stages=[_HangOn("x.wav", d.parent / "hang.fifo")])
    assert time.monotonic() - t0 < 30
    rows = {r["key"]: r for r in pq.read_table(tmp_path / "o" / "curated.parquet").to_pylist()}
    assert sorted(rows) == sorted(names)
    assert rows["x.wav"]["error_type"] == "Timeout"
    assert "x.wav" in rows["x.wav"]["error_message"] and "1 s" in rows["x.wav"]["error_message"]
    assert rows["x.wav"]["city"] == "c2"  # carried columns survive the lost worker
    for n in names:
        if n != "x.wav":
            assert rows[n]["error_type"] is None and rows[n]["duration"] == pytest.approx(1.0)
    assert summary["counts"]["errors_by_type"] == {"Timeout": 1}
    assert summary["this_run"]["workers_lost"] >= 2  # the batch's worker, then the file's
    assert summary["input"] == {
        "kind": "manifest",
        "spec": str(d / "manifest.csv"),
        "audio_dir": str(d),
    }


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_worker_killed_by_a_signal_is_a_crash_row(
    fifo_corpus: tuple[Path, list[str]], tmp_path: Path, sig: signal.Signals
) -> None:
    d, names = fifo_corpus
    inputs = read_manifest(_manifest(d, names))
    cfg = CurateConfig(sr=16000, workers=1, batch_size=6, file_timeout=60.0)
    fifo = d.parent / "hang.fifo"
    with _Killer(fifo, sig) as killer:
        summary = curate(inputs, tmp_path / "o", cfg, stages=[_HangOn("x.wav", fifo)])
    # Killed in its batch of six, then alone.
    assert killer.kills == 2
    rows = {r["key"]: r for r in pq.read_table(tmp_path / "o" / "curated.parquet").to_pylist()}
    assert sorted(rows) == sorted(names)
    assert rows["x.wav"]["error_type"] == "DecoderCrash"
    assert sig.name in rows["x.wav"]["error_message"]
    assert all(rows[n]["error_type"] is None for n in names if n != "x.wav")
    assert summary["counts"]["errors_by_reason"] == {f"DecoderCrash ({sig.name})": 1}
    assert summary["this_run"]["isolated_batches"] == 1


def test_memory_cap_gives_a_resource_limit_row(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    names = _good(d, 2)
    # How much address space a worker needs for the small files.
    probe = curate(discover(str(d)), tmp_path / "probe", CurateConfig(sr=192000, workers=1))
    base = probe["this_run"]["worker_peak_vm_bytes"]
    assert base > 0
    # One hour at 8 kHz (58 MB): 2.8 GB of float32 output at 192 kHz.
    sf.write(d / "big.wav", np.zeros(3600 * 8000, np.int16), 8000, subtype="PCM_16")
    cfg = CurateConfig(
        sr=192000, workers=1, batch_size=3, max_duration=None, memory_limit=base + (512 << 20)
    )
    summary = curate(discover(str(d)), tmp_path / "o", cfg)
    rows = {r["key"]: r for r in pq.read_table(tmp_path / "o" / "curated.parquet").to_pylist()}
    # Under the cap the output buffer cannot be had: the worker dies of it
    # (ResourceLimit) or the decoder refuses the allocation with a typed error.
    big = rows["big.wav"]
    assert big["error_type"] == "ResourceLimit" or "allocate" in big["error_message"], big
    assert all(rows[n]["error_type"] is None for n in names)
    assert summary["counts"]["failed"] == 1


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "agl_fast.cli", "curate", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_directory_of_hostile_files_exits_0_with_a_row_each(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    names = _good(d, 3)
    (d / "empty.wav").write_bytes(b"")
    (d / "junk.mp3").write_bytes(b"<html>404</html>" * 30)
    sf.write(d / "nan.wav", np.full((800, 1), np.nan, np.float32), 8000, subtype="FLOAT")
    # Once aborted the process in the resampler; now a crash row or a typed error.
    _wav_header_rate(d / "huge_rate.wav", 2**31 - 1)
    out = tmp_path / "o"
    res = _cli([str(d), "--out", str(out), "--quiet", "--workers", "2", "--batch-size", "4"])
    assert res.returncode == 0, res.stderr
    rows = {r["key"]: r for r in pq.read_table(out / "curated.parquet").to_pylist()}
    assert sorted(rows) == sorted([*names, "empty.wav", "junk.mp3", "nan.wav", "huge_rate.wav"])
    assert all(rows[n]["error_type"] is None for n in names)
    assert rows["empty.wav"]["error_type"] == "AudioDecodeError"
    assert rows["junk.mp3"]["error_type"] == "AudioDecodeError"
    assert rows["nan.wav"]["error_type"] == "NonFiniteError"
    assert rows["huge_rate.wav"]["error_type"] in (
        "DecoderCrash",
        "ResourceLimit",
        "AudioDecodeError",
    )
    for k in ("empty.wav", "junk.mp3", "nan.wav", "huge_rate.wav"):
        assert k in rows[k]["error_message"] and not rows[k]["passed"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["failed"] == 4 and summary["counts"]["rows"] == 7
    assert summary["input"] == {"kind": "directory", "spec": str(d)}
    assert sum(summary["counts"]["errors_by_reason"].values()) == 4
    # More than half failed: exit 3 with one line on stderr (the table is written).
    strict = _cli([str(d), "--out", str(tmp_path / "s"), "--quiet", "--max-failed-fraction", "0.5"])
    assert strict.returncode == 3
    assert strict.stderr.strip().count("\n") == 0
    assert "4 of 7 files failed" in strict.stderr and "0.5" in strict.stderr
    assert (tmp_path / "s" / "curated.parquet").exists()
    lax = _cli([str(d), "--out", str(tmp_path / "l"), "--quiet", "--max-failed-fraction", "0.6"])
    assert lax.returncode == 0, lax.stderr


def test_resume_skips_a_file_that_lost_a_worker_unless_retry_failed(
    fifo_corpus: tuple[Path, list[str]], tmp_path: Path
) -> None:
    d, names = fifo_corpus
    inputs = read_manifest(_manifest(d, names))
    out = tmp_path / "o"
    cfg = CurateConfig(sr=16000, workers=1, batch_size=2, file_timeout=0.5, part_rows=1)
    hang = [_HangOn("x.wav", d.parent / "hang.fifo")]
    curate(inputs, out, cfg, stages=hang)
    first = pq.read_table(out / "curated.parquet")
    assert first.num_rows == len(names)
    assert first.to_pylist()[2]["error_type"] == "Timeout"
    # Resumed: nothing left to do, the file is not tried again (it would
    # time out again).
    again = curate(inputs, out, replace(cfg, resume=True), stages=hang)
    assert again["this_run"]["files"] == 0
    assert pq.read_table(out / "curated.parquet").equals(first)
    # The file is fixed; --retry-failed runs it (and only it) again.
    os.unlink(d / "x.wav")
    sf.write(d / "x.wav", _tone(16000, 0.5, 1, 3), 16000)
    (d.parent / "hang.fifo").unlink()
    (d.parent / "hang.fifo").write_bytes(b"")  # the stage no longer blocks
    retried = curate(inputs, out, replace(cfg, resume=True, retry_failed=True), stages=hang)
    assert retried["this_run"]["files"] == 1
    rows = pq.read_table(out / "curated.parquet")
    assert rows.column("key").to_pylist() == names  # input order, each key once
    r = {x["key"]: x for x in rows.to_pylist()}
    assert r["x.wav"]["error_type"] is None and r["x.wav"]["duration"] == pytest.approx(0.5)
    assert retried["counts"]["failed"] == 0
    good = first.filter(pa.compute.not_equal(first.column("key"), "x.wav"))
    assert rows.filter(pa.compute.not_equal(rows.column("key"), "x.wav")).equals(good)


def test_bytes_column_equals_paths(tmp_path: Path) -> None:
    """Rows that carry the file's bytes (as ``ray.data.read_binary_files``
    gives them) produce the same rows as the same files read from disk."""
    import soundfile as sf

    from agl_fast.pipeline import BatchConfig, process_batch

    paths = []
    for i, ext in enumerate(("wav", "flac", "ogg")):
        p = tmp_path / f"c{i}.{ext}"
        x = (0.2 * np.sin(np.arange(48000) * (0.01 + i * 0.003))).astype(np.float32)
        sf.write(p, np.stack([x, -x], axis=1), 24000)
        paths.append(str(p))
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF....WAVEjunk")
    paths.append(str(bad))
    cfg = BatchConfig(sr=16000)
    from_disk = process_batch(pa.table({"path": paths}), cfg)
    blobs = [Path(p).read_bytes() for p in paths]
    from_mem = process_batch(pa.table({"path": paths, "bytes": blobs}), cfg)
    assert from_mem.column_names == [c for c in from_disk.column_names if c != "bytes"]
    for name in from_disk.column_names:
        if name == "error_message":
            continue
        assert from_mem.column(name).to_pylist() == from_disk.column(name).to_pylist(), name
    assert from_mem.column("error_type").to_pylist()[-1] == "AudioDecodeError"
    keyed = process_batch(pa.table({"key": ["a", "b", "c", "d"], "bytes": blobs}), cfg)
    assert keyed.column("key").to_pylist() == ["a", "b", "c", "d"]
    assert keyed.column("frames").to_pylist() == from_disk.column("frames").to_pylist()


_MAIN_SCRIPT = """
import os, sys
from pathlib import Path
if __name__ != "__main__":  # run again as __mp_main__ by a worker
    Path(sys.argv[1] + ".reimported").write_text(str(os.getpid()))
from agl_fast.pipeline import CurateConfig, curate, discover

class MainStage:
    name = "main_stage"
    def __call__(self, clips):
        return {"main_stage": [7] * len(clips.keys)}

if __name__ == "__main__":
    stages = [MainStage()] if sys.argv[3] == "stage" else []
    cfg = CurateConfig(sr=16000, workers=1, threads=1)
    curate(discover(sys.argv[2]), sys.argv[1], cfg, stages=stages)
"""


def test_workers_run_the_main_script_again_only_when_the_stages_need_it(
    tmp_path: Path,
) -> None:
    """A worker process does not import the parent's main script again
    (in a Ray actor that is Ray's worker script: 0.35 s per worker) unless
    a stage is defined there."""
    d = tmp_path / "in"
    d.mkdir()
    _good(d, 2)
    script = tmp_path / "main_script.py"
    script.write_text(_MAIN_SCRIPT)
    for mode in ("plain", "stage"):
        out = tmp_path / mode
        res = subprocess.run(
            [sys.executable, str(script), str(out), str(d), mode],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        rows = pq.read_table(out / "curated.parquet")
        assert rows.num_rows == 2 and rows.column("error_type").null_count == 2
        reimported = Path(str(out) + ".reimported").exists()
        if mode == "stage":
            assert reimported and rows.column("main_stage").to_pylist() == [7, 7]
        else:
            assert not reimported and "main_stage" not in rows.column_names
