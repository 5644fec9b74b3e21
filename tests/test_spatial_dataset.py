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
    assert qa._relation("right", a, b)[0] and not qa._relation("left", a, b)[0]
    assert qa._relation("front", a, b)[0] and qa._relation("behind", b, a)[0]
    assert qa._relation("above", a, b)[0] and not qa._relation("below", a, b)[0]
    near = _label(0.5, 0.5, 0.0)
    assert qa._relation("nearer", near, a)[0] and qa._relation("farther", a, near)[0]
    assert "3 o'clock" in qa.position_phrase(_label(2.0, 0.0, 0.0))
    assert "above you" in qa.position_phrase(_label(0.0, 1.0, 1.0))


def test_generate_qa_types_and_seed():
    labels = [_label(2.0, 1.0, 0.0), _label(-1.0, 0.5, 0.0)]
    rows = qa.generate_qa("s1", ["dog", "siren"], labels, np.random.default_rng(1))
    assert [r["type"] for r in rows] == list(qa.QUESTION_TYPES)
    again = qa.generate_qa("s1", ["dog", "siren"], labels, np.random.default_rng(1))
    assert rows == again
    for r in rows[2:]:
        yes, _ = qa._relation(
            r["relation"], *(labels if r["question"].index("dog") < r["question"].index("siren")
                             else labels[::-1])
        )  # fmt: skip
        assert r["label"] == yes
        assert r["answer"].endswith(("Yes", "No", "Yes.", "No."))
    assert rows[3]["answer"].startswith("The ")
    one = qa.generate_qa("s2", ["dog"], labels[:1], np.random.default_rng(1))
    assert [r["type"] for r in one] == ["detection", "direction_distance"]


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
        assert len(r["labels"]) == len(r["events"]) == len(arr) - 1
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
    assert sum(len(s) - 1 for s in dataset.load_scenes(pq, ids)) == sum(
        len(r["labels"]) for r in rows_n
    )
    with pytest.raises(KeyError, match="999999"):
        dataset.load_scenes(pq, ["999999"])
    # The trainer reads either layout into the same tensors.
    pytest.importorskip("torch")
    from agl_fast.spatial.train import load_split

    a, b = load_split(npz, "train", rir_length=256), load_split(pq, "train", rir_length=256)
    for k in ("x", "rir", "geometry", "azimuth", "distance"):
        assert bool((a[k] == b[k]).all()), k
