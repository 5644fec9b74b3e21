"""SpatialSoundQA / BiDepth readers on small files shaped like the released ones."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from agl_fast.exceptions import ParameterError
from agl_fast.spatial.answers import score_qa
from agl_fast.spatial.dataset import load_scene
from agl_fast.spatial.readers import labels_from_positions, read_slam_qa


def _write(tmp_path):
    rng = np.random.default_rng(0)
    ane, rev = tmp_path / "AudioSet", tmp_path / "reverb"
    (ane / "eval" / "audio").mkdir(parents=True)
    (rev / "binaural" / "q9vSo1VnCiC").mkdir(parents=True)
    dry = {}
    for name, sr in (("YI-HlrcP6Qg4", 16000), ("YjNjUU01quLs", 32000)):
        y = rng.standard_normal(sr // 5) * 0.1
        sf.write(str(ane / "eval" / "audio" / f"{name}.wav"), y, sr, subtype="FLOAT")
        dry[name] = (y, sr)
    rirs = {}
    for k in (0, 31):
        h = (rng.standard_normal((2, 300)) * np.exp(-np.arange(300) / 50)).astype(np.float32)
        np.save(rev / "binaural" / "q9vSo1VnCiC" / f"{k}.npy", h)
        rirs[k] = h
    positions = {"data": [
        {"fname": "q9vSo1VnCiC/0.npy", "sensor_position": "1.0,1.5,2.0",
         "source_position": "1.0,1.5,0.0"},  # 2 m ahead (-z)
        {"fname": "q9vSo1VnCiC/31.npy", "sensor_position": "1.0,1.5,2.0",
         "source_position": "0.0,2.5,2.0"},  # left and 45 degrees up
    ]}  # fmt: skip
    (rev / "binaural.json").write_text(json.dumps(positions))
    qa = tmp_path / "qa" / "perception"
    qa.mkdir(parents=True)
    items = [
        {"audio_id": "eval/audio/YI-HlrcP6Qg4", "reverb_id": "q9vSo1VnCiC/0.npy",
         "audio_id2": None, "reverb_id2": None, "question_id": 0,
         "question_type": "CLASSIFICATION",
         "question": "Enumerate the sound occurrences in the audio clip.",
         "answer": "accelerating, revving, vroom; car; vehicle"},
        {"audio_id": "eval/audio/YI-HlrcP6Qg4", "reverb_id": "q9vSo1VnCiC/0.npy",
         "audio_id2": "eval/audio/YjNjUU01quLs", "reverb_id2": "q9vSo1VnCiC/31.npy",
         "question_id": 58, "question_type": "MIXUP_NONBINARY_DISTANCE",
         "question": "How far away is the sound of the banjo from the sound of the whack, thwack?",
         "answer": "2m"},
    ]  # fmt: skip
    (qa / "eval.jsonl").write_text("\n".join(json.dumps(x) for x in items) + "\n")
    return qa / "eval.jsonl", ane, rev, dry, rirs


def _mix(y, sr, h):
    if sr != 32000:
        y = resample_poly(y, 32000 // 16000, 1) if sr == 16000 else y
    y = y * (10 ** (-14 / 20) / np.sqrt(np.mean(y**2)))
    out = np.zeros((2, 320000))
    for e in range(2):
        w = np.convolve(y, h[e].astype(np.float64))
        out[e, : len(w)] = w
    return out


def test_labels_follow_spatial_ast():
    ahead = labels_from_positions((1, 1.5, 2), (1, 1.5, 0))
    assert (ahead["azimuth"], ahead["elevation"], ahead["distance_class"]) == (90, 90, 4)
    right = labels_from_positions((0, 0, 0), (1, 0, 0))
    assert right["azimuth"] == 0 and right["elevation"] == 90
    up_left = labels_from_positions((0, 0, 0), (-1, 1, 0))
    assert (up_left["azimuth"], up_left["elevation"]) == (180, 135)
    with pytest.raises(ParameterError, match="3 numbers"):
        labels_from_positions((0, 0), (1, 0, 0))


def test_spatialsoundqa_split_into_the_dataset_layout(tmp_path):
    qa_file, ane, rev, dry, rirs = _write(tmp_path)
    out = tmp_path / "ds"
    rows = read_slam_qa(qa_file, ane, rev, out, split="test", positions=rev / "binaural.json",
                        resampler="polyphase")  # the loaders' own resampling  # fmt: skip
    assert [r["id"] for r in rows] == ["000000", "000001"]
    one, two = load_scene(out, "000000"), load_scene(out, "000001")
    assert one["audio"].shape == (2, 320000) and one["audio"].dtype == np.float32
    want = _mix(*dry["YI-HlrcP6Qg4"], rirs[0])
    np.testing.assert_allclose(one["audio"], want, atol=1e-5)
    both = (want + _mix(*dry["YjNjUU01quLs"], rirs[31])) / 2
    np.testing.assert_allclose(two["audio"], both, atol=1e-5)
    np.testing.assert_array_equal(two["brir_1"], rirs[31])
    assert rows[0]["events"] == ["accelerating, revving, vroom", "car", "vehicle"]
    assert [x["azimuth"] for x in rows[1]["labels"]] == [90, 180]
    qa = [json.loads(x) for x in (out / "qa.jsonl").read_text().splitlines()]
    assert [q["type"] for q in qa] == ["I", "MIXUP_NONBINARY_DISTANCE"]
    scores = score_qa(qa, [q["answer"] for q in qa])
    assert scores["I_map_single"] == 1.0 and scores["n"]["other"] == 1
    # The authors' file form: one JSON document, the questions under "data".
    doc = tmp_path / "eval.json"
    doc.write_text(json.dumps({"data": [json.loads(x) for x in qa_file.read_text().splitlines()]}))
    read_slam_qa(doc, ane, rev, tmp_path / "ds2", split="test", positions=rev / "binaural.json")
    assert (tmp_path / "ds2" / "qa.jsonl").read_text() == (out / "qa.jsonl").read_text()
    # The trainer reads it.
    pytest.importorskip("torch")
    from agl_fast.sage.train import load_split

    d = load_split(out, "test", rir_length=256, depth=False)
    assert d["x"].shape[:2] == (2, 4) and d["rir"].shape == (2, 2, 256)
    assert d["azimuth"].tolist() == [90, 90] and d["distance"].tolist() == [4, 4]


def test_bidepth_depth_next_to_the_rirs(tmp_path):
    qa_file, ane, rev, _, _ = _write(tmp_path)
    (rev / "depth" / "q9vSo1VnCiC").mkdir(parents=True)
    pano = np.linspace(1, 5, 16 * 32, dtype=np.float32).reshape(16, 32)
    np.save(rev / "depth" / "q9vSo1VnCiC" / "0.npy", pano)
    out = tmp_path / "bd"
    read_slam_qa(qa_file, ane, rev, out, positions=rev / "binaural.json", limit=1)
    np.testing.assert_array_equal(load_scene(out, "000000")["depth"], pano)


def test_bad_files_are_typed_errors(tmp_path):
    qa_file, ane, rev, _, _ = _write(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"audio_id": "x"}) + "\n")
    with pytest.raises(ParameterError, match="lacks"):
        read_slam_qa(bad, ane, rev, tmp_path / "o")
    np.save(rev / "binaural" / "q9vSo1VnCiC" / "0.npy", np.zeros(10))
    with pytest.raises(ParameterError, match=r"\[2, L\]"):
        read_slam_qa(qa_file, ane, rev, tmp_path / "o2")
