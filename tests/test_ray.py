"""Curation on a real local Ray cluster (``ray.init(num_cpus=2)``) against
``agl-fast curate`` on one machine, with the same inputs: generated clips,
the bad-file corpus, the two real recordings and a file whose decoder is
killed; a driver killed mid-run and resumed; shards of a Slurm-style array
merged. The Ray tests share one cluster (each start costs seconds)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agl_fast.pipeline import CurateConfig, curate, discover
from agl_fast.pipeline.demo import write_demo_corpus
from agl_fast.pipeline.shard import parse_shard, shard_inputs, shard_of

ray = pytest.importorskip("ray")

from agl_fast.ray import curate_dataset, curate_ray, done_keys, files_dataset  # noqa: E402
from conftest import REAL_MP3  # noqa: E402

#: Columns whose text may name a process or a temporary folder.
_FREE_TEXT = ("error_message",)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight generated stereo clips at three rates, six bad files (empty,
    not audio, truncated, silent, NaN), the two real recordings."""
    d = tmp_path_factory.mktemp("ray") / "corpus"
    write_demo_corpus(d)
    for mp3 in REAL_MP3:
        (d / "real").mkdir(exist_ok=True)
        (d / "real" / mp3.name).symlink_to(mp3)
    return d


def _cli(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "agl_fast.cli", "curate", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)  # type: ignore[call-overload, no-any-return]


def _assert_same_rows(a: pa.Table, b: pa.Table) -> None:
    assert a.column_names == b.column_names
    assert a.column("key").to_pylist() == b.column("key").to_pylist()
    for name in a.column_names:
        if name not in _FREE_TEXT:
            assert a.column(name).to_pylist() == b.column(name).to_pylist(), name


def test_ray_rows_equal_one_machine_with_an_unreadable_input_and_tagging(
    cluster: None, corpus: Path, tmp_path: Path
) -> None:
    # a FIFO would block a decoder for ever: both engines' metadata pass
    # turns it into an error row before any worker or actor sees it
    os.mkfifo(tmp_path / "x.wav")
    cfg = CurateConfig(
        sr=16000, workers=1, batch_size=4, threads=1, max_duration=5.0, tag=("speech",)
    )
    inputs = discover(str(corpus))
    inputs = type(inputs)(
        [*inputs.keys, "x.wav"], [*inputs.paths, str(tmp_path / "x.wav")], source=inputs.source
    )
    one = curate(inputs, tmp_path / "one", cfg)
    on_ray = curate_ray(inputs, tmp_path / "ray", cfg)
    a = pq.read_table(tmp_path / "one" / "curated.parquet")
    b = pq.read_table(tmp_path / "ray" / "curated.parquet")
    _assert_same_rows(a, b)
    assert b.num_rows == len(inputs.keys) == 14 + len(REAL_MP3)
    errors = dict(zip(b.column("key").to_pylist(), b.column("error_type").to_pylist(), strict=True))
    assert errors["x.wav"] == "NotARegularFile"
    assert errors["bad/empty.wav"] == "AudioDecodeError"
    assert errors["bad/nan.wav"] == "NonFiniteError"
    assert sum(e is None for e in errors.values()) == 9 + len(REAL_MP3)
    assert "speech_fraction" in b.column_names  # the tagging actor ran
    assert on_ray["counts"] == one["counts"]
    assert on_ray["counts"]["errors_by_reason"]["NotARegularFile"] == 1
    assert on_ray["skipped"] == one["skipped"]  # what listing left out, on both engines
    # x.wav and the empty file are rows of the metadata pass, never decoded
    assert on_ray["engine"] == "ray" and on_ray["this_run"]["files"] == b.num_rows - 2


def test_read_binary_files_rows_equal_one_machine(
    cluster: None, corpus: Path, tmp_path: Path
) -> None:
    cfg = CurateConfig(sr=16000, workers=1, batch_size=3, threads=1, max_duration=5.0)
    curate(discover(str(corpus)), tmp_path / "one", cfg)
    a = pq.read_table(tmp_path / "one" / "curated.parquet")
    rows = curate_dataset(files_dataset(str(corpus)), cfg).to_arrow_refs()
    b = pa.concat_tables(ray.get(rows), promote_options="permissive")
    assert sorted(b.column("key").to_pylist()) == sorted(a.column("key").to_pylist())
    b = b.take(pa.compute.sort_indices(b, [("key", "ascending")]))
    a = a.take(pa.compute.sort_indices(a, [("key", "ascending")]))
    # Ray names files by their absolute path; the rows are otherwise the same.
    real = {os.path.abspath(p) for p in a.column("path").to_pylist()}
    assert set(b.column("path").to_pylist()) == real
    for name in a.column_names:
        if name not in (*_FREE_TEXT, "path"):
            assert a.column(name).to_pylist() == b.column(name).to_pylist(), name
    # Keys written already are dropped before any work.
    skip = {"bad/empty.wav", "site0/clip00.wav"}
    rest = curate_dataset(files_dataset(str(corpus)), cfg, skip_keys=skip).to_arrow_refs()
    left = pa.concat_tables(ray.get(rest), promote_options="permissive")
    assert sorted(left.column("key").to_pylist()) == sorted(set(a.column("key").to_pylist()) - skip)


def test_gpu_tagging_on_a_cluster_without_gpu_needs_allow_cpu(cluster: None) -> None:
    from agl_fast.exceptions import ParameterError

    ds = ray.data.from_items([{"path": "a.wav"}])
    cfg = CurateConfig(tag=("efficientat",), tag_model="mn10_as.onnx", workers=1)
    assert ray.cluster_resources().get("GPU", 0) == 0
    with pytest.raises(ParameterError, match="no GPU"):
        curate_dataset(ds, cfg)
    # With allow_cpu the tagging actors ask for no GPU (the plan is built,
    # nothing runs).
    cfg.allow_cpu = True
    assert "TagActor" in str(curate_dataset(ds, cfg))


def test_one_driver_writes_one_summary_form_on_ray_and_on_one_machine(
    cluster: None, corpus: Path, tmp_path: Path
) -> None:
    # a resumed run that retries its failed rows, through the same driver
    inputs = discover(str(corpus / "bad"))
    cfg = CurateConfig(sr=8000, workers=1, threads=1, max_duration=2.0)
    local = curate(inputs, tmp_path / "one", cfg)
    on_ray = curate_ray(inputs, tmp_path / "ray", cfg)
    assert local.keys() == on_ray.keys()
    assert (local["engine"], on_ray["engine"]) == ("local", "ray")
    assert on_ray["stages"] == local["stages"] and on_ray["counts"] == local["counts"]
    assert on_ray["audio_hours"] == pytest.approx(local["audio_hours"])
    ray_only = on_ray["this_run"].keys() - local["this_run"].keys()
    assert ray_only == {"cluster_cpus", "cluster_nodes"}
    assert on_ray["versions"]["ray"] == ray.__version__ and on_ray["parameters"]["isolate"]
    failed = local["counts"]["failed"]
    assert failed > 0
    again = CurateConfig(**{**cfg.__dict__, "resume": True, "retry_failed": True})
    retried = curate_ray(inputs, tmp_path / "ray", again)
    # every failed file again; the empty one is a row of the metadata pass
    assert retried["this_run"]["files"] == failed - 1
    assert retried["counts"] == local["counts"]


def test_driver_killed_mid_run_resumes_without_loss_or_duplicates(
    cluster: None, corpus: Path, tmp_path: Path
) -> None:
    address = ray.get_runtime_context().gcs_address
    args = [str(corpus), "--engine", "ray", "--ray-address", address, "--quiet"]
    args += ["--sr", "16000", "--max-duration", "5", "--batch-size", "1", "--part-rows", "1"]
    args += ["--workers", "1", "--threads", "1"]
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "agl_fast.cli", "curate", *args, "--out", str(out)]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((out / "parts").glob("*.parquet"))) < 3:
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    written = sorted((out / "parts").glob("*.parquet"))
    assert 3 <= len(written) < len(discover(str(corpus)).keys)
    assert not (out / "curated.parquet").exists()
    # A log record a killed writer cut short is ignored: its rows are redone.
    # (With one row per part the log is compacted after every batch: the
    # kill may land between a compaction and the next batch's log.)
    logs = sorted((out / "progress").glob("*.log"))
    assert len(logs) <= 1
    for log in logs:
        log.write_bytes(log.read_bytes() + b"AGLJR\x10\x00")
    before = done_keys(out)
    assert len(before) >= 3
    # Without --resume the run is refused with one line.
    refused = _cli([*args, "--out", str(out)])
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = _cli([*args, "--out", str(out), "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((out / "summary.json").read_text())
    n = len(discover(str(corpus)).keys)
    assert summary["this_run"]["files"] == n - len(before)
    got = pq.read_table(out / "curated.parquet")
    cfg = CurateConfig(sr=16000, workers=0, max_duration=5.0, threads=1)
    curate(discover(str(corpus)), tmp_path / "one", cfg)
    _assert_same_rows(pq.read_table(tmp_path / "one" / "curated.parquet"), got)


def test_shards_merged_equal_the_whole_run(corpus: Path, tmp_path: Path) -> None:
    common = [str(corpus), "--quiet", "--workers", "0", "--sr", "8000", "--max-duration", "2"]
    whole = _cli([*common, "--out", str(tmp_path / "whole")])
    assert whole.returncode == 0, whole.stderr
    for i in range(3):
        res = _cli([*common, "--shard", f"{i}/3", "--out", str(tmp_path / f"s{i}")])
        assert res.returncode == 0, res.stderr
    sizes = [pq.read_metadata(tmp_path / f"s{i}" / "curated.parquet").num_rows for i in range(3)]
    keys = discover(str(corpus)).keys
    assert sizes == [sum(shard_of(k, 3) == i for k in keys) for i in range(3)]
    assert all(s > 0 for s in sizes)
    merged = _cli(
        ["merge", *(str(tmp_path / f"s{i}") for i in range(3)), "--out", str(tmp_path / "m")]
    )
    assert merged.returncode == 0, merged.stderr
    a = pq.read_table(tmp_path / "whole" / "curated.parquet")
    a = a.take(pa.compute.sort_indices(a, [("key", "ascending")]))
    _assert_same_rows(a, pq.read_table(tmp_path / "m" / "curated.parquet"))
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert (
        summary["counts"] == json.loads((tmp_path / "whole" / "summary.json").read_text())["counts"]
    )
    # A run merged twice has every key twice: refused, one line, exit 2.
    twice = _cli(
        ["merge", str(tmp_path / "s0"), str(tmp_path / "s0"), "--out", str(tmp_path / "t")]
    )
    assert twice.returncode == 2 and "more than one run" in twice.stderr
    assert twice.stderr.strip().count("\n") == 0
    bad = _cli([*common, "--shard", "3/3", "--out", str(tmp_path / "b")])
    assert bad.returncode == 2 and "0 <= I < N" in bad.stderr


def test_shard_split_is_stable_and_disjoint() -> None:
    from agl_fast.exceptions import ParameterError

    # blake2b of the key, not Python's salted hash: the same in every process.
    code = "from agl_fast.pipeline.shard import shard_of; print(shard_of('a/7.wav', 1000))"
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert int(other.stdout) == shard_of("a/7.wav", 1000)
    digest = hashlib.blake2b(b"a/7.wav", digest_size=8).digest()
    assert shard_of("a/7.wav", 1000) == int.from_bytes(digest, "big") % 1000
    from agl_fast.pipeline import Inputs

    keys = [f"a/{i}.wav" for i in range(50)]
    whole = Inputs(keys, keys)
    parts = [shard_inputs(whole, i, 5) for i in range(5)]
    assert sorted(k for p in parts for k in p.keys) == sorted(keys)
    assert all(p.source["shard"] == f"{i}/5" for i, p in enumerate(parts))
    assert parse_shard(" 2 / 5 ") == (2, 5)
    for text in ("5/5", "1/0", "a/b", "-1/3"):
        with pytest.raises(ParameterError, match="shard"):
            parse_shard(text)


def _processes(marker: str) -> list[int]:
    """Ids of this machine's processes whose command line holds ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _row_keys(rows: Path) -> list[str]:
    return [k for f in sorted(rows.glob("*.parquet")) for k in pq.read_table(f)["key"].to_pylist()]


def test_cpu_actor_killed_mid_run_is_replaced_without_loss_or_duplicates(
    cluster: None, corpus: Path, tmp_path: Path
) -> None:
    address = ray.get_runtime_context().gcs_address
    out = tmp_path / "o"
    args = [str(corpus), "--engine", "ray", "--ray-address", address, "--quiet", "--out", str(out)]
    args += ["--sr", "16000", "--max-duration", "5", "--batch-size", "1", "--part-rows", "1"]
    args += ["--workers", "1", "--threads", "1"]
    cmd = [sys.executable, "-m", "agl_fast.cli", "curate", *args]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    actors: list[int] = []
    while time.monotonic() < deadline and not actors:
        if len(list((out / "parts").glob("*.parquet"))) >= 2:
            actors = _processes("ray::CurateActor")
        time.sleep(0.05)
    assert actors, "no CPU actor found while the run was going"
    for pid in actors:
        os.kill(pid, signal.SIGKILL)
    _, err = driver.communicate(timeout=240)
    assert driver.returncode == 0, err
    keys = discover(str(corpus)).keys
    assert sorted(_row_keys(out / "parts")) == sorted(keys)  # each key written once
    got = pq.read_table(out / "curated.parquet")
    assert got.column("key").to_pylist() == keys


def test_two_node_cluster_equals_one_machine(corpus: Path, tmp_path: Path) -> None:
    """Two raylets on this machine (one CPU each), the driver a separate
    process: the CPU actors spread over both nodes."""
    from ray.cluster_utils import Cluster

    two = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        two.add_node(num_cpus=1)
        two.wait_for_nodes()
        out = tmp_path / "o"
        args = [str(corpus), "--engine", "ray", "--ray-address", two.address, "--quiet"]
        args += ["--sr", "16000", "--max-duration", "5", "--batch-size", "2", "--workers", "2"]
        res = _cli([*args, "--threads", "1", "--out", str(out)])
        assert res.returncode == 0, res.stderr
    finally:
        two.shutdown()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["this_run"]["cluster_nodes"] == 2
    cfg = CurateConfig(sr=16000, workers=0, max_duration=5.0, threads=1)
    one = curate(discover(str(corpus)), tmp_path / "one", cfg)
    _assert_same_rows(
        pq.read_table(tmp_path / "one" / "curated.parquet"), pq.read_table(out / "curated.parquet")
    )
    assert summary["counts"] == one["counts"]


def _children(pid: int) -> list[int]:
    """Ids of the processes whose parent is ``pid``."""
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces, not ")"
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry.name))
    return kids


def _running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
    except OSError:
        return False


def test_decoder_killed_in_a_cpu_actors_child_is_a_crash_row(
    cluster: None, corpus: Path, tmp_path: Path
) -> None:
    """The supervised child of the CPU actor (actor -> fork server ->
    worker) is killed while it decodes: that file's row is a DecoderCrash
    naming the signal, the actor carries on, every other file has its row."""
    address = ray.get_runtime_context().gcs_address
    out = tmp_path / "o"
    args = [str(corpus), "--engine", "ray", "--ray-address", address, "--quiet", "--out", str(out)]
    args += ["--sr", "16000", "--batch-size", "1", "--part-rows", "1", "--workers", "1"]
    cmd = [sys.executable, "-m", "agl_fast.cli", "curate", *args, "--threads", "1"]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    killed = None
    while time.monotonic() < deadline and killed is None and driver.poll() is None:
        for actor in _processes("ray::CurateActor"):
            # its child decoding (running, not waiting for a batch), once
            # it has answered batches (the first part holds the empty
            # file's row, written by the metadata pass)
            busy = [w for s in _children(actor) for w in _children(s) if _running(w)]
            if busy and len(list((out / "parts").glob("*.parquet"))) >= 3:
                os.kill(busy[0], signal.SIGKILL)
                killed = busy[0]
        time.sleep(0.002)
    _, err = driver.communicate(timeout=240)
    assert killed is not None, "no decoding child found while the run was going"
    assert driver.returncode == 0, err
    keys = discover(str(corpus)).keys
    assert sorted(_row_keys(out / "parts")) == sorted(keys)  # each key written once
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["errors_by_reason"].get("DecoderCrash (SIGKILL)") == 1
    rows = pq.read_table(out / "curated.parquet").to_pylist()
    crashed = [r for r in rows if r["error_type"] == "DecoderCrash"]
    assert len(crashed) == 1 and "SIGKILL" in crashed[0]["error_message"]
    # the other files are as an uninterrupted run has them
    cfg = CurateConfig(sr=16000, workers=0, threads=1)
    curate(discover(str(corpus)), tmp_path / "one", cfg)
    one = {r["key"]: r for r in pq.read_table(tmp_path / "one" / "curated.parquet").to_pylist()}
    for r in rows:
        if r["key"] != crashed[0]["key"]:
            assert r["error_type"] == one[r["key"]]["error_type"], r["key"]
            assert r["duration"] == one[r["key"]]["duration"], r["key"]
