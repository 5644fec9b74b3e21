"""Simulated datasets and BiDepth-style QA."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pyroomacoustics")

from agl_fast.cli import main
from agl_fast.spatial import dataset, qa
from agl_fast.spatial.simulate import bat_labels


def test_clock_directions():
    assert [qa.clock(a) for a in (90, 0, 270, 180, 60, 359)] == [12, 3, 6, 9, 1, 3]


def _label(right, front, up):
    return bat_labels((0, 0, 0), 0.0, (front, -right, up))


def test_relations_follow_geometry():
    a = _label(2.0, 1.0, 0.5)  # right, ahead, above
    b = _label(-1.0, -2.0, -0.5)  # left, behind, below
    assert qa._source_relation("right", a, b) and not qa._source_relation("left", a, b)
    assert qa._source_relation("front", a, b) and qa._source_relation("back", b, a)
    assert qa._source_relation("up", a, b) and not qa._source_relation("down", a, b)
    assert qa.position_answer(_label(2.0, 0.0, 0.0)) == "three o'clock; up; 2.0 m"
    assert qa.position_answer(_label(0.0, 1.0, -1.0)).startswith("twelve o'clock; down")
    rel = qa.relative_label(_label(1.0, 0.0, 0.0), _label(-1.0, 0.0, 0.0))
    assert qa.clock(rel["azimuth"]) == 9 and rel["distance_m"] == pytest.approx(2.0)


def test_generate_qa_types_and_seed():
    labels = [_label(2.0, 1.0, 0.0), _label(-1.0, 0.5, 0.0)]
    rows = qa.generate_qa("s1", ["dog", "siren"], labels, np.random.default_rng(1))
    assert [r["type"] for r in rows] == ["I", "II", "II", "III", "IV"]
    again = qa.generate_qa("s1", ["dog", "siren"], labels, np.random.default_rng(1))
    assert rows == again
    assert rows[3]["answer"] in ("Yes", "No") and rows[3]["label"] == (rows[3]["answer"] == "Yes")
    one = qa.generate_qa("s2", ["dog"], labels[:1], np.random.default_rng(1))
    assert [r["type"] for r in one] == ["I", "II"]


def test_synthetic_events_are_distinct(rng):
    ys = [dataset.synthetic_event(k, rng, 16000, 0.5) for k in dataset.SYNTHETIC_EVENTS]
    for y in ys:
        assert y.shape == (8000,) and np.all(np.isfinite(y)) and np.std(y) > 0
    with pytest.raises(ValueError, match="kind must be"):
        dataset.synthetic_event("bark", rng, 16000, 0.5)


def test_cli_simulate_writes_a_split_dataset(tmp_path, capsys):
    out = tmp_path / "ds"
    args = ["spatial", "simulate", "--scenes", "5", "--out", str(out), "--seconds", "0.5"]
    assert main([*args, "--receiver", "two_mic", "--seed", "7"]) == 0
    assert "5 scenes (1 test)" in capsys.readouterr().out
    rows = [json.loads(x) for x in (out / "scenes.jsonl").read_text().splitlines()]
    assert [r["split"] for r in rows] == ["train"] * 4 + ["test"]
    rooms = {tuple(r["geometry"]["room_dim"]) for r in rows}
    assert len(rooms) == 5  # no room shared between scenes, hence between splits
    for r in rows:
        arr = dataset.load_scene(out, r["id"])
        assert arr["audio"].shape == (2, 16000) and arr["audio"].dtype == np.float32
        assert len(r["labels"]) == len(r["events"]) == sum(k.startswith("brir_") for k in arr)
        assert arr["depth"].shape == (64, 256) and arr["depth_views"].shape == (64, 288)
        assert arr["depth"].min() > 0
        assert r["receiver"] == "two_mic"
    qas = [json.loads(x) for x in (out / "qa.jsonl").read_text().splitlines()]
    assert {q["scene"] for q in qas} == {r["id"] for r in rows}
    # Deterministic whatever the number of workers.
    out2 = tmp_path / "ds2"
    dataset.build_dataset(out2, 5, seed=7, seconds=0.5, receiver="two_mic", workers=2)
    assert (out2 / "qa.jsonl").read_text() == (out / "qa.jsonl").read_text()
    a = dataset.load_scene(out, "000003")["brir_0"]
    b = dataset.load_scene(out2, "000003")["brir_0"]
    assert a.shape == b.shape


def test_parquet_shards_round_trip_equal_to_npz(tmp_path):
    npz, pq = tmp_path / "npz", tmp_path / "pq"
    kw = {"seed": 11, "seconds": 0.25, "receiver": "two_mic"}
    rows_n = dataset.build_dataset(npz, 5, **kw)
    rows_p = dataset.build_dataset(pq, 5, format="parquet", shard_size=2, **kw)
    assert sorted(p.name for p in (pq / "shards").iterdir()) == [
        "00000.parquet", "00001.parquet", "00002.parquet"
    ]  # fmt: skip
    assert not (pq / "scenes").exists()
    assert [r.pop("shard") for r in rows_p] == ["00000.parquet"] * 2 + ["00001.parquet"] * 2 + [
        "00002.parquet"
    ]  # fmt: skip
    assert rows_p == rows_n
    ids = [r["id"] for r in rows_n]
    for a, b in zip(dataset.load_scenes(npz, ids), dataset.load_scenes(pq, ids[::-1])[::-1],
                    strict=True):  # fmt: skip
        assert a.keys() == b.keys()
        for k in a:
            assert a[k].dtype == b[k].dtype == np.float32
            np.testing.assert_array_equal(a[k], b[k])
    assert sum(sum(k.startswith("brir_") for k in s) for s in dataset.load_scenes(pq, ids)) == sum(
        len(r["labels"]) for r in rows_n
    )
    with pytest.raises(KeyError, match="999999"):
        dataset.load_scenes(pq, ["999999"])
    # The trainer reads either layout into the same tensors.
    pytest.importorskip("torch")
    from agl_fast.sage.train import load_split

    a, b = load_split(npz, "train", rir_length=256), load_split(pq, "train", rir_length=256)
    for k in ("x", "rir", "geometry", "azimuth", "distance"):
        assert bool((a[k] == b[k]).all()), k
