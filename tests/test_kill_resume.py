"""Durable progress of ``agl-fast curate``: a real run of 300 files killed
(``kill -9``) at 25%, 50% and 90%, or stopped by SIGINT / SIGTERM sent to
its whole process group (as a terminal, Slurm or systemd send them), then
resumed, on one machine with default settings and on a local Ray cluster.

Each time: the rows seen on disk before the kill are all kept, the resumed
run redoes at most the batches that were in flight (the count it logs) and
runs only the files without a row, and the final table equals an
uninterrupted run's row for row.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from agl_fast.pipeline import CurateConfig
from agl_fast.pipeline.journal import read_log
from agl_fast.pipeline.run import default_workers

N_FILES = 300
#: What a kill may lose: one batch per worker (default batch size).
BATCH = CurateConfig().batch_size
_REDO = re.compile(r"redoing (\d+) files that were in flight")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 files: hard links to nine generated clips (WAV, MP3, FLAC; 8-96
    kHz; mono and stereo; 4-12 s) and one broken WAV, in turn."""
    root = tmp_path_factory.mktemp("kill")
    clips = root / "clips"
    clips.mkdir()
    rng = np.random.default_rng(30)
    kinds = [
        (44100, 2, 10.0, "WAV"),
        (48000, 1, 8.0, "WAV"),
        (22050, 2, 12.0, "WAV"),
        (16000, 1, 10.0, "WAV"),
        (44100, 2, 8.0, "MP3"),
        (32000, 1, 6.0, "MP3"),
        (44100, 1, 8.0, "FLAC"),
        (8000, 2, 12.0, "WAV"),
        (96000, 2, 4.0, "WAV"),
    ]
    made = []
    for i, (sr, ch, seconds, fmt) in enumerate(kinds):
        t = np.arange(int(sr * seconds)) / sr
        tone = 0.3 * np.sin(2 * np.pi * rng.uniform(200, 2000) * t)[:, None] * np.ones(ch)
        y = (tone + 0.01 * rng.standard_normal(tone.shape)).astype(np.float32)
        path = clips / f"k{i}.{fmt.lower()}"
        sf.write(path, y, sr, format=fmt)
        made.append(path)
    broken = clips / "broken.wav"
    broken.write_bytes(b"RIFF" + bytes(100))
    made.append(broken)
    src = root / "src"
    src.mkdir()
    for i in range(N_FILES):
        clip = made[i % len(made)]
        os.link(clip, src / f"f{i:03d}{clip.suffix}")
    return src


def _command(src: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "agl_fast.cli", "curate", str(src), "--out", str(out), *extra]


def _sorted(path: Path) -> pa.Table:
    return pq.read_table(path).sort_by("key")


def _durable(out: Path) -> set[str]:
    """Keys whose rows are on disk: finished parts and progress logs."""
    keys: set[str] = set()
    for part in (out / "parts").glob("part-*.parquet"):
        keys.update(pq.read_table(part, columns=["key"]).column("key").to_pylist())
    for log in (out / "progress").glob("part-*.log"):
        for table in read_log(log).tables:
            keys.update(table.column("key").to_pylist())
    return keys


def _stop_at(cmd: list[str], out: Path, fraction: float, sig: int, err: Path) -> tuple[int, int]:
    """Start ``cmd``, send ``sig`` to its process group once ``fraction`` of
    the files have rows on disk; return its exit status and how many rows
    were on disk before the signal."""
    with open(err, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        seen = 0
        while seen < fraction * N_FILES:
            assert proc.poll() is None, "the run ended before the signal: " + err.read_text()
            assert time.monotonic() < deadline, "no progress on disk"
            time.sleep(0.01)
            seen = len(_durable(out))
        os.killpg(proc.pid, sig)
        return proc.wait(timeout=120), seen
    finally:
        if proc.poll() is None:  # pragma: no cover - only when an assert fired
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _resume_and_check(
    cmd: list[str], out: Path, reference: pa.Table, kept: int, in_flight: int
) -> int:
    """Resume, check the final table and the work done; return the count of
    files the resumed run redid."""
    res = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    found = _REDO.findall(res.stderr)
    assert len(found) == 1, res.stderr
    redo = int(found[0])
    assert redo <= in_flight
    summary = json.loads((out / "summary.json").read_text())
    # Every row on disk was kept: only the files without one ran again.
    assert summary["this_run"]["files"] == N_FILES - kept
    assert summary["this_run"]["redone_in_flight"] == redo
    got = _sorted(out / "curated.parquet")
    assert got.column_names == reference.column_names
    assert got.num_rows == N_FILES
    for name in reference.column_names:
        assert got.column(name).to_pylist() == reference.column(name).to_pylist(), name
    assert not list((out / "progress").glob("*.log"))
    return redo


# -- one machine, default settings -----------------------------------------


@pytest.fixture(scope="module")
def local_reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    out = tmp_path_factory.mktemp("ref") / "o"
    res = subprocess.run(_command(corpus, out, "--quiet"), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    table = _sorted(out / "curated.parquet")
    errors = table.column("error_type").to_pylist()
    assert errors.count("AudioDecodeError") == N_FILES // 10 and errors.count(None) == 270
    return table


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9])
def test_kill_9_then_resume_redoes_only_the_batches_in_flight(
    corpus: Path, local_reference: pa.Table, tmp_path: Path, fraction: float
) -> None:
    out = tmp_path / "o"
    cmd = _command(corpus, out, "-v")
    status, seen = _stop_at(cmd, out, fraction, signal.SIGKILL, tmp_path / "err")
    assert status == -signal.SIGKILL
    assert not (out / "curated.parquet").exists(), "the kill must land mid-run"
    kept = len(_durable(out))
    assert fraction * N_FILES <= seen <= kept < N_FILES
    _resume_and_check(cmd, out, local_reference, kept, default_workers() * BATCH)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_and_sigterm_flush_then_resume_redoes_only_the_batches_in_flight(
    corpus: Path, local_reference: pa.Table, tmp_path: Path, sig: int, status: int
) -> None:
    out = tmp_path / "o"
    cmd = _command(corpus, out, "-v")
    code, seen = _stop_at(cmd, out, 0.5, sig, tmp_path / "err")
    err = (tmp_path / "err").read_text()
    assert code == status, err
    assert f"interrupted by {signal.Signals(sig).name}" in err and "--resume" in err
    # Flushed and closed: no record cut short, the log holds every row seen.
    logs = list((out / "progress").glob("*.log"))
    assert len(logs) == 1 and not read_log(logs[0]).torn
    kept = len(_durable(out))
    assert seen <= kept < N_FILES
    # The workers got the signal too and ignored it: no file became a crash row.
    assert "DecoderCrash" not in logs[0].read_bytes().decode("latin-1")
    _resume_and_check(cmd, out, local_reference, kept, default_workers() * BATCH)


def test_a_log_record_cut_short_is_ignored_and_its_files_redone(
    corpus: Path, local_reference: pa.Table, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    cmd = _command(corpus, out, "-v")
    _stop_at(cmd, out, 0.5, signal.SIGKILL, tmp_path / "err")
    (log,) = (out / "progress").glob("*.log")
    whole = len(_durable(out))
    data = log.read_bytes()
    log.write_bytes(data[: len(data) // 2])  # a record cut mid-way, the rest lost
    got = read_log(log)
    assert got.torn
    kept = len(_durable(out))
    assert 0 < kept < whole
    # The files of the lost records run again (this_run.files == N - kept);
    # those whose start survived the cut count as in flight.
    bound = default_workers() * BATCH + whole - kept
    _resume_and_check(cmd, out, local_reference, kept, bound)


def test_existing_progress_without_resume_is_refused(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    cmd = _command(corpus, out, "-v")
    _stop_at(cmd, out, 0.25, signal.SIGKILL, tmp_path / "err")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--resume" in res.stderr
    assert "progress logs" in res.stderr


# -- a local Ray cluster -----------------------------------------------------


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


def _ray_command(src: Path, out: Path, address: str, *extra: str) -> list[str]:
    return _command(src, out, "--engine", "ray", "--ray-address", address, *extra)


@pytest.fixture(scope="module")
def ray_reference(
    corpus: Path, ray_address: str, tmp_path_factory: pytest.TempPathFactory
) -> pa.Table:
    out = tmp_path_factory.mktemp("rayref") / "o"
    res = subprocess.run(
        _ray_command(corpus, out, ray_address, "--quiet"), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return _sorted(out / "curated.parquet")


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9])
def test_ray_driver_kill_9_then_resume_redoes_only_the_batches_in_flight(
    corpus: Path, ray_address: str, ray_reference: pa.Table, tmp_path: Path, fraction: float
) -> None:
    out = tmp_path / "o"
    cmd = _ray_command(corpus, out, ray_address, "-v")
    status, seen = _stop_at(cmd, out, fraction, signal.SIGKILL, tmp_path / "err")
    assert status == -signal.SIGKILL
    assert not (out / "curated.parquet").exists(), "the kill must land mid-run"
    kept = len(_durable(out))
    assert fraction * N_FILES <= seen <= kept < N_FILES
    # Two CPU actors on the two-CPU cluster (the default), one batch each.
    _resume_and_check(cmd, out, ray_reference, kept, 2 * BATCH)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ray_sigint_and_sigterm_flush_then_resume(
    corpus: Path,
    ray_address: str,
    ray_reference: pa.Table,
    tmp_path: Path,
    sig: int,
    status: int,
) -> None:
    out = tmp_path / "o"
    cmd = _ray_command(corpus, out, ray_address, "-v")
    code, seen = _stop_at(cmd, out, 0.5, sig, tmp_path / "err")
    err = (tmp_path / "err").read_text()
    assert code == status, err
    assert f"interrupted by {signal.Signals(sig).name}" in err
    logs = list((out / "progress").glob("*.log"))
    assert len(logs) == 1 and not read_log(logs[0]).torn
    kept = len(_durable(out))
    assert seen <= kept < N_FILES
    _resume_and_check(cmd, out, ray_reference, kept, 2 * BATCH)
