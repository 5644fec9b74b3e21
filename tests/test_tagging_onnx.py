"""ONNX Runtime backend, the EfficientAT tagger and the Arrow tagging stage."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pytest

ort = pytest.importorskip("onnxruntime")

from agl_fast.exceptions import ParameterError  # noqa: E402
from agl_fast.presets import efficientat  # noqa: E402
from agl_fast.tagging import (  # noqa: E402
    GROUP_KEYS,
    BackendError,
    EfficientATTagger,
    OnnxModel,
    extract_windows,
    make_session,
    plan_windows,
    result_schema,
    silero_model_path,
    tagging_stage,
    window_views,
)

HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture(scope="module")
def mn_onnx(tmp_path_factory):
    """A small randomly initialised mn model for 1 s windows (100 frames)."""
    torch = pytest.importorskip("torch")
    from agl_fast.torch import efficientat as eat

    torch.manual_seed(0)
    model = eat.get_model("mn01_as").eval()
    # a larger last bias spreads the probabilities over (0, 1)
    with torch.no_grad():
        model.classifier[5].bias.copy_(torch.linspace(-4, 4, 527))
    return eat.export_onnx(model, tmp_path_factory.mktemp("m") / "mn01.onnx", frames=100)


@pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only behaviour")
def test_cuda_required_unless_fallback_allowed():
    path = silero_model_path()
    with pytest.raises(BackendError, match="allow_cpu_fallback=True"):
        make_session(path, device="cuda")
    _, provider = make_session(path, device="cuda", allow_cpu_fallback=True)
    assert provider == "CPUExecutionProvider"


def test_cpu_session_and_bad_device():
    _, provider = make_session(silero_model_path(), device="cpu", n_threads=1)
    assert provider == "CPUExecutionProvider"
    with pytest.raises(ParameterError, match=r"device must be one of \['auto', 'cuda', 'cpu'\]"):
        make_session(silero_model_path(), device="tpu")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="device_id must be an int >= 0"):
        make_session(silero_model_path(), device_id=-1)
    with pytest.raises(ParameterError, match="either device or providers"):
        make_session(silero_model_path(), device="cpu", providers=["CPUExecutionProvider"])


@pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only behaviour")
def test_auto_device_falls_back_to_the_cpu_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="agl_fast.onnx"):
        _, provider = make_session(silero_model_path())
    assert provider == "CPUExecutionProvider"
    assert "no CUDAExecutionProvider" in caplog.text and "running on the CPU" in caplog.text


def test_providers_pass_through(caplog):
    wanted = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    with caplog.at_level(logging.WARNING, logger="agl_fast.onnx"):
        sess, provider = make_session(silero_model_path(), providers=wanted)
    assert provider == sess.get_providers()[0]
    missing = [p for p in wanted if p not in ort.get_available_providers()]
    assert all(p in caplog.text for p in missing)
    with pytest.raises(BackendError, match="none of the providers"):
        make_session(silero_model_path(), providers=["NoSuchExecutionProvider"])


def test_buckets_and_io_binding_match_plain_runs(mn_onnx, rng):
    x = rng.standard_normal((11, 1, 128, 100)).astype(np.float32)
    plain = ort.InferenceSession(str(mn_onnx), providers=["CPUExecutionProvider"])
    ref = np.concatenate([plain.run(None, {"mel": x[i : i + 1]})[0] for i in range(11)])
    for io in (True, False):
        m = OnnxModel(mn_onnx, (1, 128, 100), device="cpu", buckets=(1, 4), io_binding=io)
        assert m.provider == "CPUExecutionProvider"
        got = m(x)  # chunks 4 + 4 + 3 (padded to 4)
        np.testing.assert_allclose(got, ref, atol=1e-5)
        np.testing.assert_allclose(m(x[:1]), ref[:1], atol=1e-5)
    with pytest.raises(ParameterError, match="expected items of shape"):
        m(x[:, :, :64])


def test_tagger_producer_matches_direct_windows(mn_onnx, rng):
    tagger = EfficientATTagger(
        mn_onnx, window_s=1.0, hop_s=0.5, batch_size=4, device="cpu", feature_threads=1
    )
    assert tagger.provider == "CPUExecutionProvider"
    clips = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (8000, 32000, 90000, 50000)]
    frames = list(tagger.clip_frames(clips))
    assert [f.starts.shape[0] for f in frames] == [1, 1, 5, 3]
    for y, fr in zip(clips, frames, strict=True):
        w = extract_windows(y, plan_windows(y.shape[0], 32000, 16000), 32000, "repeat")
        direct = tagger.model(efficientat(w)[:, None])
        np.testing.assert_allclose(fr.probs, direct, atol=1e-5)
    # features: the Rust preset; the window goes through predict_windows too
    np.testing.assert_allclose(tagger.predict_windows(w[:2]), frames[-1].probs[:2], atol=1e-5)


def test_features_of_window_views_equal_those_of_copied_windows(mn_onnx, rng):
    tagger = EfficientATTagger(mn_onnx, window_s=1.0, hop_s=0.3, device="cpu", feature_threads=2)
    y = (0.1 * rng.standard_normal(70000)).astype(np.float32)
    starts = plan_windows(y.shape[0], 32000, 9600)
    views = window_views(y, starts, 32000)  # read in place, as the producer does
    got = tagger.features(views)
    assert got.shape == (len(starts), 1, 128, 1 + 31999 // 320) and got.dtype == np.float32
    np.testing.assert_array_equal(got, tagger.features(extract_windows(y, starts, 32000)))


def test_tagging_stage_table(mn_onnx, rng):
    clips = [
        (0.1 * rng.standard_normal(48000)).astype(np.float32),
        np.zeros(0, np.float32),
        np.array([0.0, np.nan], np.float32),
        (0.1 * rng.standard_normal((2, 100))).astype(np.float32),
        (0.1 * rng.standard_normal(16000)).astype(np.float32),
    ]
    tab = tagging_stage(
        clips,
        tagger="efficientat",
        model=mn_onnx,
        window_s=1.0,
        device="cuda",
        allow_cpu_fallback=True,
        floor=0.0,
        top_k=3,
    )
    assert tab.schema == result_schema()
    assert tab.num_rows == 5
    rows = tab.to_pylist()
    assert [r["error"] is None for r in rows] == [True, False, False, False, True]
    assert "empty" in rows[1]["error"] and "NaN" in rows[2]["error"]
    assert "mono 1-D" in rows[3]["error"]
    good = rows[0]
    assert good["provider"] == ("CUDAExecutionProvider" if HAS_CUDA else "CPUExecutionProvider")
    assert good["n_windows"] == 2 and good["duration_s"] == pytest.approx(1.5)
    assert len(good["classes"]) == 527  # floor 0 keeps every class
    fr = [c["fraction"] for c in good["classes"]]
    assert fr == sorted(fr, reverse=True)
    assert good["top_tags"] == [c["name"] for c in good["classes"][:3]]
    for k in GROUP_KEYS:
        assert 0.0 <= good[f"group_{k}"] <= 1.0
    # a group's fraction is at least that of any of its classes
    assert good["group_sounds_of_things"] >= max(
        c["fraction"] for c in good["classes"] if c["name"] == "Vehicle"
    )


def test_tagging_stage_floor_is_sparse(mn_onnx, rng):
    y = (0.1 * rng.standard_normal(32000)).astype(np.float32)
    tab = tagging_stage([y], tagger="efficientat", model=mn_onnx, window_s=1.0, device="cpu")
    classes = tab.column("classes").to_pylist()[0]
    assert 0 < len(classes) < 527
    assert all(c["fraction"] >= 0.01 for c in classes)
    assert isinstance(tab, pa.Table)


def test_tagging_stage_bad_arguments(mn_onnx):
    with pytest.raises(ParameterError, match="needs model="):
        tagging_stage([np.zeros(10, np.float32)], tagger="efficientat")
    with pytest.raises(ParameterError, match="tagger must be 'speech' or 'efficientat'"):
        tagging_stage([np.zeros(10, np.float32)], tagger="birds")
    with pytest.raises(ParameterError, match="batch_size must be >= 1"):
        EfficientATTagger(mn_onnx, window_s=1.0, batch_size=0, device="cpu")


def test_producer_errors_reach_the_caller_and_closing_does_not_hang(mn_onnx, rng):
    from agl_fast.exceptions import AglError

    tagger = EfficientATTagger(mn_onnx, window_s=1.0, batch_size=1, prefetch=1, device="cpu")
    bad = np.full(32000, np.nan, np.float32)
    with pytest.raises(AglError, match=r"(?i)finite|nan"):
        list(tagger.clip_frames([bad]))
    clips = [(0.1 * rng.standard_normal(32000)).astype(np.float32) for _ in range(8)]
    gen = tagger.clip_frames(clips)
    first = next(gen)
    assert first.probs.shape == (1, 527)
    gen.close()  # the producer, blocked on a full queue, stops
