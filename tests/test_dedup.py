"""Duplicate recordings in curation: the fingerprint stage, ``curate --dedup``
and ``agl-fast dedup`` (groups, representatives, the report section), and
hostile fingerprint cells.

The acceptance case curates the demo corpus with duplicates planted by
ffmpeg (an MP3 re-encoding, a trimmed and 6 dB quieter copy, a 16 kHz mono
copy): exactly the planted pairs must be grouped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agl_fast.cli import main
from agl_fast.exceptions import ParameterError
from agl_fast.pipeline.config import BatchConfig
from agl_fast.pipeline.dedup import (
    DEDUP_COLUMNS,
    PAIRS_FILE,
    find_duplicates,
    one_per_group,
    representative_order,
)
from agl_fast.pipeline.demo import write_demo_corpus
from agl_fast.pipeline.stages import FINGERPRINT_COLUMN, requested_stages

FFMPEG = shutil.which("ffmpeg")

#: planted copy -> (its source in the demo corpus, the ffmpeg options that make it)
PLANTED = {
    "planted/clip00_mp3.mp3": ("site0/clip00.wav", ["-c:a", "libmp3lame", "-b:a", "128k"]),
    # the cut falls between two frames of the fingerprint (31.25 x 32 ms)
    "planted/clip04_trim.wav": ("site1/clip04.wav", ["-ss", "1.0", "-af", "volume=-6dB"]),
    "planted/clip06_16k.flac": ("site2/clip06.wav", ["-ar", "16000", "-ac", "1"]),
}


def _plant(corpus: Path) -> None:
    for name, (source, opts) in PLANTED.items():
        dest = corpus / name
        dest.parent.mkdir(exist_ok=True)
        subprocess.run(
            [FFMPEG or "ffmpeg", "-v", "error", "-i", str(corpus / source), *opts, str(dest)],
            check=True,
            timeout=60,
        )


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if FFMPEG is None:
        pytest.skip("ffmpeg is needed to plant re-encoded duplicates")
    root = tmp_path_factory.mktemp("dedup")
    corpus = write_demo_corpus(root / "corpus")
    _plant(corpus)
    out = root / "out"
    code = main(
        ["curate", str(corpus), "--out", str(out), "--dedup", "--workers", "0", "--quiet",
         "--report"]
    )  # fmt: skip
    assert code == 0
    return out


def _rows(out: Path) -> dict[str, dict]:
    t = pq.read_table(out / "curated.parquet")
    return {r["key"]: r for r in t.to_pylist()}


def test_curate_dedup_marks_exactly_the_planted_pairs(planted_run: Path) -> None:
    rows = _rows(planted_run)
    groups: dict[int, set[str]] = {}
    for key, r in rows.items():
        if r["duplicate_group"] is not None:
            groups.setdefault(r["duplicate_group"], set()).add(key)
    expected = {frozenset({copy, src}) for copy, (src, _) in PLANTED.items()}
    assert {frozenset(g) for g in groups.values()} == expected
    for members in groups.values():
        reps = [k for k in members if rows[k]["duplicate_status"] == "representative"]
        assert len(reps) == 1
        for k in members - set(reps):
            assert rows[k]["duplicate_status"] == "duplicate"
            assert rows[k]["duplicate_of"] == reps[0]
            assert rows[k]["duplicate_match"] == reps[0]
        assert rows[reps[0]]["duplicate_of"] is None
    # the trimmed copy is shorter: its 4 s source represents the group, and
    # the overlap starts 1.0 s into the source and at 0 s in the copy
    trim = rows["planted/clip04_trim.wav"]
    assert trim["duplicate_of"] == "site1/clip04.wav"
    assert trim["overlap_start_s"] == pytest.approx(0.0, abs=0.1)
    assert trim["overlap_match_start_s"] == pytest.approx(1.0, abs=0.07)
    assert trim["overlap_s"] == pytest.approx(3.0, abs=0.3)
    assert trim["match_score"] > 0
    src = rows["site1/clip04.wav"]
    assert src["overlap_start_s"] == pytest.approx(1.0, abs=0.07)
    assert src["duplicate_match"] == "planted/clip04_trim.wav"
    # every other decoded clip is unique; the silent one cannot be grouped,
    # the files that failed to decode have no fingerprint
    assert rows["site0/clip01.wav"]["duplicate_status"] == "unique"
    assert rows["bad/silent.wav"]["duplicate_status"] == "unfingerprintable"
    assert rows["bad/silent.wav"]["duplicate_group"] is None
    for bad in ("bad/empty.wav", "bad/not_audio.mp3", "bad/truncated.wav", "bad/nan.wav"):
        assert rows[bad]["error_type"] is not None
        assert rows[bad]["duplicate_status"] == "no_fingerprint"


def test_dedup_counts_pairs_file_and_report(planted_run: Path) -> None:
    summary = json.loads((planted_run / "summary.json").read_text())
    d = summary["dedup"]
    assert (d["groups"], d["grouped"], d["duplicates"]) == (3, 6, 3)
    assert (d["unfingerprintable"], d["no_fingerprint"], d["failed"]) == (1, 4, 0)
    assert "fingerprint" in summary["stages"]
    assert summary["parameters"]["stages"] == ["fingerprint"]
    pairs = pq.read_table(planted_run / PAIRS_FILE).to_pylist()
    assert {frozenset((p["key_a"], p["key_b"])) for p in pairs} == {
        frozenset({copy, src}) for copy, (src, _) in PLANTED.items()
    }
    page = (planted_run / "report.html").read_text()
    assert "<h2 id='duplicates'>Duplicate recordings</h2>" in page
    section = page[page.index("id='duplicate-groups'") :]
    section = section[: section.index("</table>")]
    assert "data-groups='3'" in section
    for copy, (src, _) in PLANTED.items():
        assert f"<td>{copy}</td>" in section and f"<td>{src}</td>" in section
    assert "site0/clip01.wav" not in section


def test_dedup_command_is_repeatable(planted_run: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "again"
    shutil.copytree(planted_run, out)
    before = pq.read_table(out / "curated.parquet")
    capsys.readouterr()
    assert main(["dedup", str(out)]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts["groups"] == 3
    after = pq.read_table(out / "curated.parquet")
    # the columns are replaced, not added twice, and hold the same values
    assert after.column_names == before.column_names
    for c in DEDUP_COLUMNS:
        assert after.column(c).to_pylist() == before.column(c).to_pylist()


def test_representative_rule_by_hand() -> None:
    # duration first, then passed, then the smaller clipped share, then key
    t = pa.table(
        {
            "key": ["e", "d", "c", "b", "a", "f"],
            "duration": [3.0, 5.0, 5.0, 5.0, 5.0, None],
            "passed": [True, False, True, True, True, True],
            "clipped_fraction": [0.0, 0.0, 0.1, 0.0, 0.0, 0.0],
        }
    )
    assert representative_order(t).tolist() == [4, 3, 2, 1, 0, 5]


def _fingerprint_bytes(seconds: float, seed: int) -> bytes:
    from agl_fast.fingerprint import ANALYSIS_SR, fingerprint

    rng = np.random.default_rng(seed)
    n = int(seconds * ANALYSIS_SR)
    t = np.arange(n) / ANALYSIS_SR
    y = 0.05 * rng.standard_normal(n)
    for t0 in rng.uniform(0, seconds - 0.3, int(seconds * 3)):
        m = (t >= t0) & (t < t0 + 0.25)
        tt = t[m] - t0
        y[m] += 0.3 * np.sin(2 * np.pi * (rng.uniform(500, 3000) * tt + 2000 * tt**2))
    return fingerprint(y.astype(np.float32), ANALYSIS_SR).to_bytes()


def _table(cells: list[bytes | None]) -> pa.Table:
    n = len(cells)
    return pa.table(
        {
            "key": [f"k{i}" for i in range(n)],
            "duration": [8.0] * n,
            "passed": [True] * n,
            FINGERPRINT_COLUMN: pa.array(cells, pa.binary()),
        }
    )


def test_hostile_fingerprint_cells_are_rows_not_failures() -> None:
    from agl_fast.fingerprint import ANALYSIS_SR, fingerprint

    a, b = _fingerprint_bytes(8.0, 1), _fingerprint_bytes(8.0, 2)
    silent = fingerprint(np.zeros(8 * ANALYSIS_SR, np.float32), ANALYSIS_SR).to_bytes()
    cells = [a, a, b, None, a[: len(a) // 2 + 3], b"not a fingerprint", silent, b""]
    cols, pairs, counts = find_duplicates(_table(cells))
    rows = cols.to_pylist()
    status = [r["duplicate_status"] for r in rows]
    assert status == [
        "representative", "duplicate", "unique", "no_fingerprint", "failed", "failed",
        "unfingerprintable", "failed",
    ]  # fmt: skip
    assert rows[1]["duplicate_of"] == "k0"
    for r in (rows[4], rows[5], rows[7]):
        assert r["dedup_error"].startswith("unreadable fingerprint: ")
        assert r["duplicate_group"] is None
    assert all(r["dedup_error"] is None for r in rows[:4])
    assert pairs.num_rows == 1
    assert (counts["failed"], counts["unfingerprintable"], counts["no_fingerprint"]) == (3, 1, 1)


def test_table_without_fingerprints_is_a_typed_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(ParameterError, match="--stage fingerprint"):
        find_duplicates(pa.table({"key": ["a"], "duration": [1.0]}))
    with pytest.raises(ParameterError, match="must be binary"):
        find_duplicates(pa.table({"key": ["a"], FINGERPRINT_COLUMN: ["text"]}))
    out = tmp_path / "run"
    out.mkdir()
    pq.write_table(pa.table({"key": ["a"], "duration": [1.0]}), out / "curated.parquet")
    assert main(["dedup", str(out)]) == 2
    assert "--stage fingerprint" in capsys.readouterr().err
    assert main(["dedup", str(tmp_path / "nothing")]) == 2


def test_stage_on_request_only() -> None:
    from agl_fast.pipeline.batch import stage_names

    assert "fingerprint" in requested_stages()
    assert "fingerprint" not in stage_names(BatchConfig())
    assert "fingerprint" in stage_names(BatchConfig(stages=("fingerprint",)))
    with pytest.raises(ParameterError, match="unknown stage"):
        BatchConfig(stages=("nope",)).validate()
    with pytest.raises(ParameterError, match="sequence of names"):
        BatchConfig(stages="fingerprint").validate()  # type: ignore[arg-type]
    with pytest.raises(SystemExit):
        main(["curate", "x", "--out", "y", "--stage", "nope"])
    assert main(["curate", "x", "--out", "y", "--min-score", "5"]) == 2


def test_one_per_group_keeps_the_best_row_of_the_mask() -> None:
    t = pa.table(
        {
            "key": ["a", "b", "c", "d", "e"],
            "duration": [4.0, 5.0, 3.0, 2.0, 9.0],
            "duplicate_group": pa.array([0, 0, 1, 1, None], pa.int64()),
        }
    )
    assert one_per_group(t).tolist() == [False, True, True, False, True]
    # b may not be kept: a stands for group 0
    assert one_per_group(t, [True, False, True, True, True]).tolist() == [
        True, False, True, False, True,
    ]  # fmt: skip
    with pytest.raises(ParameterError, match="agl-fast dedup"):
        one_per_group(t.drop_columns(["duplicate_group"]))
    with pytest.raises(ParameterError, match="mask"):
        one_per_group(t, [True])


def test_corrupt_cell_in_an_output_fails_its_row_only(planted_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "corrupt"
    shutil.copytree(planted_run, out)
    t = pq.read_table(out / "curated.parquet")
    keys = t.column("key").to_pylist()
    cells = t.column(FINGERPRINT_COLUMN).to_pylist()
    at = keys.index("planted/clip06_16k.flac")
    cells[at] = cells[at][:-5]  # cut short
    t = t.set_column(
        t.column_names.index(FINGERPRINT_COLUMN), FINGERPRINT_COLUMN, pa.array(cells, pa.binary())
    )
    pq.write_table(t, out / "curated.parquet")
    assert main(["dedup", str(out), "--quiet"]) == 0
    rows = _rows(out)
    bad = rows["planted/clip06_16k.flac"]
    assert bad["duplicate_status"] == "failed" and bad["duplicate_group"] is None
    assert bad["dedup_error"].startswith("unreadable fingerprint: ")
    # its source has no partner left; the other planted pairs stand
    assert rows["site2/clip06.wav"]["duplicate_status"] == "unique"
    assert rows["planted/clip04_trim.wav"]["duplicate_of"] == "site1/clip04.wav"
    assert json.loads((out / "summary.json").read_text())["dedup"]["failed"] == 1


@pytest.mark.parametrize("start_s", ["0.5", "1.0", "1.013", "1.5"])
def test_trim_between_frames(planted_run: Path, tmp_path: Path, start_s: str) -> None:
    """A 4 s clip trimmed anywhere off the fingerprint's 32 ms frame grid
    is still found, at its offset."""
    from agl_fast.audio import load
    from agl_fast.fingerprint import HOP_S, fingerprint, pair

    src = planted_run.parent / "corpus" / "site1" / "clip04.wav"
    cut = tmp_path / "cut.wav"
    subprocess.run(
        [FFMPEG or "ffmpeg", "-v", "error", "-i", str(src), "-ss", start_s, str(cut)],
        check=True,
        timeout=60,
    )
    fps = [fingerprint(*load(str(p), sr=None, mono=False)) for p in (src, cut)]
    m = pair(fps)
    assert len(m) == 1
    # the offset is the centre of the best window of three frames
    assert abs(float(m.start_a_s[0]) - float(start_s)) <= 2 * HOP_S
    assert float(m.start_b_s[0]) == 0.0


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_sharded_dedup_gives_the_same_groups(
    planted_run: Path, tmp_path: Path, engine: str
) -> None:
    """An index per shard, probed block by block (in this process, or as
    tasks on a real local Ray cluster), gives the pairs and columns of one
    index over the whole table."""
    started = False
    if engine == "ray":
        ray = pytest.importorskip("ray")
        if not ray.is_initialized():
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            started = True
    try:
        _check_sharded(planted_run, tmp_path, engine)
    finally:
        if started:
            ray.shutdown()


def _check_sharded(planted_run: Path, tmp_path: Path, engine: str) -> None:
    out = tmp_path / "out"
    shutil.copytree(planted_run, out)
    args = ["dedup", str(out), "--shards", "3", "--quiet", "--engine", engine]
    assert main(args) == 0
    cols = list(DEDUP_COLUMNS)
    got = pq.read_table(out / "curated.parquet").select(["key", *cols])
    want = pq.read_table(planted_run / "curated.parquet").select(["key", *cols])
    assert got.to_pylist() == want.to_pylist()
    assert pq.read_table(out / PAIRS_FILE).equals(pq.read_table(planted_run / PAIRS_FILE))
    dedup = json.loads((out / "summary.json").read_text())["dedup"]
    assert (dedup["engine"], dedup["shards"], dedup["pairs"]) == (engine, 3, 3)


def test_dedup_engine_options_are_checked(
    planted_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(planted_run, out)
    before = (out / "curated.parquet").read_bytes()
    assert main(["dedup", str(out), "--shards", "0", "--quiet"]) == 2
    assert "shards must be a positive integer" in capsys.readouterr().err
    assert main(["dedup", str(out), "--ray-address", "auto", "--quiet"]) == 2
    assert "address applies to engine='ray'" in capsys.readouterr().err
    assert (out / "curated.parquet").read_bytes() == before
