"""BiDepth as released, on a tiny copy written here in the layout OWL's loader
reads: questions ``<qa>/<stage>/<split>.json`` (``{"data": [...]}``), dry
clips ``<anechoic>/<audio_id>.wav|.flac`` at other rates, binaural RIRs
``<reverb>/binaural/<reverb_id>`` (``[2, L]`` .npy), Spatial-AST positions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import fftconvolve, resample_poly

from agl_fast.audio import resample
from agl_fast.exceptions import AglError, ParameterError
from agl_fast.spatial.bidepth import (
    MAX_RIR_SAMPLES,
    BidepthLayout,
    BidepthQaSource,
    is_bidepth,
    iter_qa_rows,
    load_rir,
    map_type,
    render_row,
)

#: (audio id, rate, channels, extension) of the dry clips.
CLIPS = (
    ("train/Yaaa", 16000, 1, ".flac"),
    ("train/Ybbb", 44100, 2, ".flac"),
    ("eval/Yccc", 22050, 1, ".flac"),
    ("eval/Yddd", 32000, 1, ".flac"),
)
RIRS = ("room1/0.npy", "room1/1.npy", "room2/0.npy", "room2/1.npy")
#: Spatial-AST positions (x right, y up, -z ahead) of each RIR's source: the
#: sensor at the origin, so azimuth 90 is ahead, 0 right, 180 left.
POSITIONS = {"room1/0.npy": "0,0,-2", "room1/1.npy": "1,0,0", "room2/0.npy": "-1.5,0,0",
             "room2/1.npy": "0,1,-1"}  # fmt: skip
LABELS = {"room1/0.npy": (90, 90, 4), "room1/1.npy": (0, 90, 2), "room2/0.npy": (180, 90, 3),
          "room2/1.npy": (90, 135, 3)}  # fmt: skip


def _row(a, r, a2=None, r2=None, qtype="detection", q="What sounds are there?", ans="dog", k=0):
    return {"audio_id": a, "reverb_id": r, "audio_id2": a2, "reverb_id2": r2,
            "question": q, "answer": ans, "question_type": qtype, "question_id": k}  # fmt: skip


def write_sample(root: Path, *, seconds: float = 0.4) -> Path:
    """The copy: clips, RIRs, positions, QA of stage ``stage1`` (train and
    eval) and ``bidepth.json``; returns the root."""
    rng = np.random.default_rng(7)
    for name, sr, ch, ext in CLIPS:
        t = np.arange(round(seconds * sr)) / sr
        y = 0.3 * np.sin(2 * np.pi * rng.uniform(200, 3000) * t) + 0.05 * rng.standard_normal(
            len(t)
        )
        y = np.stack([y, -0.5 * y], axis=1) if ch == 2 else y
        (root / "audioset" / name).parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(root / "audioset" / f"{name}{ext}"), y, sr)
    for k, rid in enumerate(RIRS):
        (root / "reverb" / "binaural" / rid).parent.mkdir(parents=True, exist_ok=True)
        h = rng.standard_normal((2, 200 + 50 * k)) * np.exp(-np.arange(200 + 50 * k) / 40)
        np.save(root / "reverb" / "binaural" / rid, h.astype(np.float32))
    pos = [{"fname": r, "sensor_position": "0,0,0", "source_position": p}
           for r, p in POSITIONS.items()]  # fmt: skip
    (root / "reverb" / "positions.json").write_text(json.dumps({"data": pos}))
    train = [
        _row("train/Yaaa", "room1/0.npy", ans="dog; bark", k=0),
        _row("train/Ybbb", "room1/1.npy", ans="car", k=1),
        _row("train/Yaaa", "room1/0.npy", qtype="DoA", q="Where is the dog?",
             ans="12 o'clock; 2.0 m", k=2),
        _row("train/Yaaa", "room1/0.npy", "train/Ybbb", "room2/0.npy", qtype="reasoning",
             q="Is the dog left of the car?", ans="No", k=3),
        _row("train/Yaaa", "room1/1.npy", "train/Ybbb", "room2/1.npy", qtype="CoT",
             q="Is the dog closer than the car?", ans="The dog is 1.0 m away ... Yes", k=4),
        _row("train/Ybbb", "room2/1.npy", qtype="MIXUP_NONBINARY_DISTANCE", ans="2m", k=5),
        _row("train/Yaaa", "room1/1.npy", "train/Ybbb", "room1/0.npy", ans="dog; car", k=6),
    ]  # fmt: skip
    test = [_row("eval/Yccc", "room2/0.npy", ans="speech", k=10),
            _row("eval/Yddd", "room2/1.npy", ans="music", k=11)]  # fmt: skip
    qa = root / "qa" / "stage1"
    qa.mkdir(parents=True)
    (qa / "train.json").write_text(json.dumps({"info": {"data": 1}, "data": train}, indent=1))
    (qa / "eval.json").write_text(json.dumps({"data": test}))
    layout = {"qa_data_root": "qa", "stage": "stage1", "anechoic_data_root": "audioset",
              "reverb_data_root": "reverb", "ext_audio": ".flac",
              "positions": "reverb/positions.json"}  # fmt: skip
    (root / "bidepth.json").write_text(json.dumps(layout))
    return root


@pytest.fixture
def sample(tmp_path):
    return write_sample(tmp_path / "bidepth")


def _hand(root: Path, pairs, polyphase: bool) -> np.ndarray:
    """The loader's recipe written out: first channel, to 32 kHz, -14 dBFS
    RMS, full convolution, the first 10 s (zero-padded), two averaged."""
    ext = {n: e for n, _, _, e in CLIPS}
    outs = []
    for a, r in pairs:
        y, sr = sf.read(str(root / "audioset" / f"{a}{ext[a]}"), always_2d=True)
        y = y[:, 0]
        if sr != 32000:
            y = resample_poly(y, 32000, sr) if polyphase else \
                resample(y, orig_sr=sr, target_sr=32000).astype(np.float64)  # fmt: skip
        y = y * 10 ** ((-14.0 - 20 * np.log10(np.sqrt(np.mean(y**2)))) / 20)
        w = fftconvolve(y[None], np.load(root / "reverb" / "binaural" / r), mode="full")
        out = np.zeros((2, 320000))
        out[:, : min(320000, w.shape[1])] = w[:, :320000]
        outs.append(out)
    return outs[0] if len(outs) == 1 else (outs[0] + outs[1]) / 2


@pytest.mark.parametrize("polyphase", [False, True])
def test_render_equals_the_loaders_recipe(sample, polyphase):
    layout = BidepthLayout.open(sample)  # the default: the loader's own resample_poly
    assert layout.resampler == "polyphase"
    if not polyphase:
        doc = json.loads((sample / "bidepth.json").read_text())
        (sample / "own.json").write_text(json.dumps({**doc, "resampler": "agl-fast"}))
        layout = BidepthLayout.open(sample / "own.json")
    one = [("train/Ybbb", "room1/1.npy")]  # 44.1 kHz stereo: the first channel
    two = [("train/Yaaa", "room1/0.npy"), ("eval/Yddd", "room2/1.npy")]  # 16 kHz + 32 kHz
    for pairs in (one, two):
        got = render_row(layout, pairs)
        assert got.shape == (2, 320000) and got.dtype == np.float32
        want = _hand(sample, pairs, polyphase)
        np.testing.assert_allclose(got, want, atol=2e-6 * np.abs(want).max())
    # agl-fast's resampler against the loader's own call, on these tones and noise
    a = render_row(layout, one)
    b = _hand(sample, one, polyphase=True)
    assert np.sqrt(np.mean((a - b) ** 2)) < 0.05 * np.sqrt(np.mean(b**2))


def test_layout_reading_and_type_names(sample):
    assert is_bidepth(sample) and is_bidepth(sample / "bidepth.json")
    assert not is_bidepth(sample / "qa")
    layout = BidepthLayout.open(sample / "bidepth.json")
    assert layout.qa_file("train") == sample / "qa" / "stage1" / "train.json"
    assert layout.qa_file("test") == sample / "qa" / "stage1" / "eval.json"
    assert layout.rir_path("room1/0.npy") == sample / "reverb" / "binaural" / "room1" / "0.npy"
    rows = list(iter_qa_rows(layout.qa_file("train")))
    assert [r["question_id"] for r in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert [map_type(r["question_type"]) for r in rows] == ["I", "I", "II", "III", "IV", None, "I"]
    assert map_type("MIXUP_NONBINARY_DISTANCE", {"mixup nonbinary distance": "II"}) == "II"
    assert map_type("Type III") == "III" and map_type("CLASSIFICATION") == "I"
    # several stages in curriculum order: OWL's trainer reads every stage's questions
    (sample / "qa" / "stage3").mkdir()
    cot = [r for r in rows if r["question_type"] == "CoT"]
    (sample / "qa" / "stage3" / "train.json").write_text(json.dumps({"data": cot * 2}))
    doc = {**json.loads((sample / "bidepth.json").read_text()), "stage": ["stage1", "stage3"]}
    (sample / "all.json").write_text(json.dumps(doc))
    both = BidepthLayout.open(sample / "all.json")
    assert both.qa_files("train") == [
        sample / "qa" / s / "train.json" for s in ("stage1", "stage3")
    ]
    assert len(BidepthQaSource(both).select(["IV"], [2])) == 3
    assert len(BidepthQaSource(layout).select(["IV"], [2])) == 1
    (sample / "bad.json").write_text(json.dumps({**doc, "stage": ["a,b"]}))
    with pytest.raises(ParameterError, match="stage"):
        BidepthLayout.open(sample / "bad.json")


def test_qa_source_selects_rows_and_renders_their_features(sample):
    from agl_fast.presets import bat

    src = BidepthQaSource(sample, "train", cache_scenes=2)
    ones = src.select(["I", "II"], [1])
    assert [(r["type"], r["question_id"]) for r in ones] == [("I", 0), ("I", 1), ("II", 2)]
    assert ones[0]["events"] == ["dog", "bark"] and ones[0]["target_events"] == ["dog", "bark"]
    assert ones[0]["scene"] == ones[2]["scene"] and ones[0]["scene"] != ones[1]["scene"]
    twos = src.select(["III", "IV"], [2])
    assert [(r["type"], r["n_sources"]) for r in twos] == [("III", 2), ("IV", 2)]
    assert src.counts["other type MIXUP_NONBINARY_DISTANCE"] == 2  # one per select
    x = src.features([twos[0], ones[0], ones[1]])
    assert tuple(x.shape) == (3, 4, 1001, 128) and str(x.dtype) == "torch.float32"
    layout = BidepthLayout.open(sample)
    want = np.asarray(bat(render_row(layout, [("train/Yaaa", "room1/0.npy"),
                                              ("train/Ybbb", "room2/0.npy")])))  # fmt: skip
    np.testing.assert_allclose(x[0].numpy(), want, rtol=1e-5, atol=1e-5)
    assert len(src._cache) == 2  # bounded
    # the OWL trainer's protocol: select rows, features of a batch of them
    from agl_fast.owl.train import QaSource

    def use(source: QaSource) -> int:
        return int(source.features(source.select(["III"], [2])).shape[0])

    assert use(src) == 1


def test_hostile_files_are_typed_or_counted(sample, tmp_path):
    qa = sample / "qa" / "stage1"
    good = json.loads((qa / "train.json").read_text())["data"]
    # Rows that cannot be used are skipped and counted.
    bad_rows = [*good[:1], "not a row", {"audio_id": "x"}, _row("../../etc/passwd", "room1/0.npy"),
                _row("train/Yaaa", "/abs/0.npy"), _row(3, "room1/0.npy"),
                _row("train/Yaaa", "C:/x.npy"), _row("train/Y:a", "room1/0.npy")]  # fmt: skip
    (qa / "train.json").write_text(json.dumps({"data": bad_rows}))
    src = BidepthQaSource(sample, "train")
    assert [r["pairs"][0][0] for r in src.select(["I"], [1])] == ["train/Yaaa", "train/Y:a"]
    assert dict(src.counts) == {"skipped not an object": 1, "skipped missing keys": 1,
                                "skipped bad ids": 4}  # fmt: skip
    # Bad JSON, a truncated file, a row over the size limit, no data list.
    for text, msg in (
        ('{"data": [{"audio_id": }]}', "bad JSON"),
        ('{"data": [' + json.dumps(good[0]), "bad JSON"),
        ("[1, 2]", "expected '\\{'"),
        ('{"rows": []}', "no 'data' list"),
    ):
        (qa / "train.json").write_text(text)
        with pytest.raises(ParameterError, match=msg):
            list(iter_qa_rows(qa / "train.json"))
    (qa / "train.json").write_text(json.dumps({"data": [{**good[0], "question": "x" * 5000}]}))
    with pytest.raises(ParameterError, match="over 1000 characters"):
        list(iter_qa_rows(qa / "train.json", limit=1000))
    with pytest.raises(ParameterError, match="no QA file"):
        list(iter_qa_rows(qa / "missing.json"))
    # RIRs: wrong shape, absurd length, not floats, not an array, missing.
    rdir = sample / "reverb" / "binaural"
    for name, arr in (("flat.npy", np.zeros(10, np.float32)),
                      ("three.npy", np.zeros((3, 10), np.float32)),
                      ("long.npy", np.zeros((2, MAX_RIR_SAMPLES + 1), np.float32)),
                      ("ints.npy", np.zeros((2, 10), np.int32))):  # fmt: skip
        np.save(rdir / name, arr)
        with pytest.raises(ParameterError, match=r"\[2, L\]|floats"):
            load_rir(rdir / name)
    (rdir / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(ParameterError, match="not a NumPy array"):
        load_rir(rdir / "junk.npy")
    layout = BidepthLayout.open(sample)
    with pytest.raises(ParameterError, match="RIR not found"):
        render_row(layout, [("train/Yaaa", "room9/0.npy")])
    with pytest.raises(AglError, match="Ynone"):  # a missing clip names itself
        render_row(layout, [("train/Ynone", "room1/0.npy")])
    # Layout files.
    for doc, msg in (({"stage": "s"}, "missing"), ([1], "JSON object"),
                     ({**json.loads((sample / "bidepth.json").read_text()), "extra": 1}, "unknown"),
                     ({**json.loads((sample / "bidepth.json").read_text()), "resampler": "x"},
                      "resampler")):  # fmt: skip
        (tmp_path / "l.json").write_text(json.dumps(doc))
        with pytest.raises(ParameterError, match=msg):
            BidepthLayout.open(tmp_path / "l.json")
    (tmp_path / "l.json").write_text("{")
    with pytest.raises(ParameterError, match="not a readable BiDepth layout"):
        BidepthLayout.open(tmp_path / "l.json")


# -- SAGE: streamed training on the copy, OWL's released encoder loaded strictly --


def _their_sage(d: int, depth: int, heads: int, n_cls: int, frames: int = 64):
    """A small re-creation of OWL's SAGE module tree (``BinauralEncoder`` on
    its ``VisionTransformer``): the same parameter and buffer names and
    shapes, and its forward from the four feature channels on (batch norm of
    the log-mels, bicubic resize, conv, patches, position table without its
    first row, three tokens, pre-norm blocks; no final norm)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            a = ((q @ k.transpose(-2, -1)) * (c // heads) ** -0.5).softmax(dim=-1)
            return self.proj((a @ v).transpose(1, 2).reshape(b, n, c))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn = nn.LayerNorm(d, eps=1e-6), Attention()
            self.norm2, self.mlp = nn.LayerNorm(d, eps=1e-6), Mlp()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class Sage(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Module()
            self.patch_embed.proj = nn.Conv2d(1, d, 16, stride=16)
            self.pos_embed = nn.Parameter(torch.zeros(1, (frames // 16) * 8 + 1, d),
                                          requires_grad=False)  # fmt: skip
            self.blocks = nn.ModuleList([Block() for _ in range(depth)])
            self.head = nn.Linear(d, n_cls)
            self.cls_tokens = nn.Parameter(torch.zeros(1, 3, d))
            self.spectrogram_extractor = nn.Module()
            self.spectrogram_extractor.conv_real = nn.Conv1d(1, 513, 1024, 320, bias=False)
            self.spectrogram_extractor.conv_imag = nn.Conv1d(1, 513, 1024, 320, bias=False)
            self.logmel_extractor = nn.Module()
            self.logmel_extractor.melW = nn.Parameter(torch.zeros(513, 128))
            self.conv_downsample = nn.Sequential(nn.Conv2d(4, 1, 3, padding=1, bias=False),
                                                 nn.BatchNorm2d(1), nn.GELU())  # fmt: skip
            self.bn = nn.BatchNorm2d(2, affine=False)

        def forward(self, feats):
            x = torch.cat([self.bn(feats[:, :2]), feats[:, 2:]], dim=1)
            if x.shape[2] < frames:
                x = F.interpolate(x, (frames, x.shape[3]), mode="bicubic", align_corners=True)
            x = self.patch_embed.proj(self.conv_downsample(x)).flatten(2).transpose(1, 2)
            x = x + self.pos_embed[:, 1:, :]
            x = torch.cat([self.cls_tokens.expand(x.shape[0], -1, -1), x], dim=1)
            for blk in self.blocks:
                x = blk(x)
            return x

    torch.manual_seed(5)
    net = Sage()
    state = {}
    for k, v in net.state_dict().items():
        if not v.is_floating_point():
            state[k] = v
        elif k.endswith("running_var"):
            state[k] = torch.rand_like(v) + 0.5
        else:
            state[k] = torch.randn_like(v) * (0.2 if v.dim() > 1 else 1.0)
    net.load_state_dict(state)
    return net.eval(), state


def test_owl_sage_checkpoint_loads_strictly_and_agrees():
    torch = pytest.importorskip("torch")
    from agl_fast.exceptions import ModelStateError
    from agl_fast.sage.model import OWL_SAGE_ABSENT, SageConfig, SageEncoder, load_checkpoint

    theirs, state = _their_sage(32, 2, 2, 5)
    cfg = SageConfig(embed_dim=32, depth=2, num_heads=2, target_frame=64, num_classes=5)
    ours = SageEncoder(cfg)
    report = load_checkpoint(ours, {"model": {f"module.{k}": v for k, v in state.items()}})
    assert report["layout"] == "owl-sage" and report["unexpected"] == []
    assert report["kept"] == sorted(k for k in ours.state_dict() if k.startswith(OWL_SAGE_ABSENT))
    assert len(report["dropped"]) == 3  # the STFT and mel weights: agl-fast computes features
    ours.eval()
    x = torch.randn(3, 4, 50, 128)
    with torch.no_grad():
        np.testing.assert_allclose(ours.encode(x).numpy(), theirs(x).numpy(), rtol=1e-4,
                                   atol=1e-4)  # fmt: skip
    torch.testing.assert_close(ours.head.weight, state["head.weight"])
    # strict: an entry of theirs missing, or one unknown, is refused
    for bad in ({k: v for k, v in state.items() if k != "blocks.1.mlp.fc2.bias"},
                {**state, "decoder.weight": torch.zeros(2)}):  # fmt: skip
        with pytest.raises(ModelStateError, match=r"fc2\.bias|decoder\.weight"):
            load_checkpoint(SageEncoder(cfg), {"model": bad})
    # a Spatial-AST state must still carry all its heads
    partial = {**state, "dis_norm.weight": torch.ones(32), "dis_norm.bias": torch.zeros(32)}
    with pytest.raises(ModelStateError, match="azimuth_head"):
        load_checkpoint(SageEncoder(cfg), partial)


def test_bidepth_scene_data_for_sage(sample):
    pytest.importorskip("torch")
    from agl_fast.presets import bat
    from agl_fast.sage.bidepth import BidepthData
    from agl_fast.sage.stream import StreamConfig

    data = BidepthData(sample)
    assert data.vocab == ["bark", "car", "dog", "music", "speech"]
    assert data.counts["two-source rows (not for SAGE)"] == 3 and data.skipped == {}
    idx = data.index("train")
    pairs = {(str(idx["audio"][a]), str(idx["rirs"][r])) for a, r in idx["scenes"]}
    assert pairs == {("train/Yaaa", "room1/0.npy"), ("train/Ybbb", "room1/1.npy"),
                     ("train/Ybbb", "room2/1.npy")}  # fmt: skip
    assert len(data.index("test")["scenes"]) == 2
    cfg = StreamConfig(scenes=4, batch_size=4, seconds=0.5, split="train", seed=1)
    batch = next(iter(data.scenes(data, cfg)))
    for i in range(4):
        a = str(idx["audio"][idx["scenes"][_picked(cfg, i)][0]])
        r = str(idx["rirs"][idx["scenes"][_picked(cfg, i)][1]])
        want = np.asarray(bat(render_row(data.layout, [(a, r)], seconds=0.5)))
        np.testing.assert_allclose(batch["x"][i].numpy(), want, rtol=1e-5, atol=1e-5)
        lab = LABELS[r]
        assert (int(batch["azimuth"][i]), int(batch["elevation"][i]),
                int(batch["distance"][i])) == lab  # fmt: skip
        names = {"train/Yaaa": ["bark", "dog"], "train/Ybbb": ["car"]}[a]
        assert [data.vocab[j] for j in np.flatnonzero(batch["events"][i].numpy())] == names
    with pytest.raises(ParameterError, match="mixup"):
        data.scenes(data, StreamConfig(scenes=4, batch_size=4, mixup=0.5))
    doc = json.loads((sample / "bidepth.json").read_text())
    (sample / "nopos.json").write_text(json.dumps({**doc, "positions": None}))
    with pytest.raises(ParameterError, match="positions"):
        BidepthData(sample / "nopos.json").index("train")


def _picked(cfg, i: int) -> int:
    """Scene index of example ``i`` of batch 0 (epoch 0), drawn as the stream draws it."""
    return int(np.random.default_rng([cfg.seed, 0, 0]).integers(0, 3, cfg.batch_size)[i])


def test_train_stream_and_evaluate_through_the_cli(sample, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from agl_fast.cli import main

    _, state = _their_sage(32, 1, 2, 5)
    torch.save({"model": state}, tmp_path / "sage.pth")
    args = ["spatial", "train", "--data", str(sample / "bidepth.json"), "--stream",
            "--scenes", "4", "--batch-size", "2", "--clip-seconds", "0.5", "--dim", "32",
            "--depth", "1", "--heads", "2", "--target-frame", "64", "--eval-scenes", "4",
            "--eval-batch", "2", "--init", str(tmp_path / "sage.pth")]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "r")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    report = json.loads(lines[-2])["init_report"]
    assert report["layout"] == "owl-sage" and "azimuth_head.weight" in report["kept"]
    metrics = json.loads(lines[-1])
    assert metrics["step"] == 2 and metrics["test"]["n"] == 4
    assert np.isfinite(metrics["test"]["loss"]) and 0 <= metrics["test"]["map"] <= 1
    assert (tmp_path / "r" / "checkpoint.pt").is_file()
    # the folder holding bidepth.json is the same switch; BiDepth takes no --sources
    assert main([*args[:3], str(sample), *args[4:], "--out", str(tmp_path / "s"),
                 "--sources", str(tmp_path / "sage.pth")]) == 2  # fmt: skip
    assert "--sources does not apply to BiDepth" in capsys.readouterr().err


def test_index_memory_does_not_grow_with_the_questions(sample):
    """Ten times the questions over the same scenes: the same peak while
    indexing (the file is read a row at a time, rows are not kept). Each
    count runs in a fresh interpreter (the file written here)."""
    import subprocess
    import sys

    import agl_fast

    pytest.importorskip("torch")
    qa = sample / "qa" / "stage1" / "train.json"
    rows = json.loads(qa.read_text())["data"]
    code = ("import sys, tracemalloc; from agl_fast.sage.bidepth import BidepthData; "
            "tracemalloc.start(); d = BidepthData(sys.argv[1]); "
            "print(tracemalloc.get_traced_memory()[1], d.counts['rows'], "
            "len(d.index('train')['scenes']))")  # fmt: skip
    env = {**__import__("os").environ,
           "PYTHONPATH": str(Path(agl_fast.__file__).resolve().parents[1])}  # fmt: skip
    peaks = []
    for n in (2000, 20000):
        many = [{**rows[k % len(rows)], "question": f"question {k} " + "x" * 200, "question_id": k}
                for k in range(n)]  # fmt: skip
        qa.write_text(json.dumps({"data": many}))
        out = subprocess.run([sys.executable, "-c", code, str(sample)], env=env, check=True,
                             capture_output=True, text=True).stdout.split()  # fmt: skip
        assert [int(out[1]), int(out[2])] == [n + 2, 3]  # (and the two eval rows)
        peaks.append(int(out[0]))
    assert qa.stat().st_size > 4_000_000
    assert peaks[1] < 1.2 * peaks[0] and peaks[1] < 2_000_000, peaks


def test_owl_trainer_reads_bidepth(sample, tmp_path):
    """OWL's curriculum (all four stages) on the copy through
    :class:`BidepthQaSource`, with a tiny decoder and OWL's SAGE layout."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    from agl_fast.owl.model import PROMPT_TEMPLATE, OwlConfig, build_owl
    from agl_fast.owl.train import load_recipe, train_owl

    source = BidepthQaSource(sample, "train", seconds=0.5)
    rows = source.select(["I", "II", "III", "IV"], [1, 2])
    words = set(PROMPT_TEMPLATE.split())
    for r in rows:
        words |= set(r["question"].split()) | set(r["answer"].split())
    specials = ["<unk>", "<pad>", "<s>", "</s>"]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(specials + sorted(words))},
                                    unk_token="<unk>"))  # fmt: skip
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>",
                                  bos_token="<s>", eos_token="</s>")  # fmt: skip
    tok.save_pretrained(tmp_path / "tokenizer")
    torch.manual_seed(0)
    dec = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                      pad_token_id=1, bos_token_id=2, eos_token_id=3)  # fmt: skip
    AutoModelForCausalLM.from_config(dec).save_pretrained(tmp_path / "decoder")
    _, state = _their_sage(32, 1, 2, 5)
    scfg = {"embed_dim": 32, "depth": 1, "num_heads": 2, "target_frame": 64, "num_classes": 5}
    torch.save({"model": state, "model_config": scfg}, tmp_path / "sage.pt")
    cfg = OwlConfig(decoder=str(tmp_path / "decoder"), sage=str(tmp_path / "sage.pt"),
                    tokenizer=str(tmp_path / "tokenizer"), n_queries=4, qformer_layers=1,
                    qformer_hidden=32, qformer_heads=2, qformer_intermediate=64,
                    max_answer_tokens=32)  # fmt: skip
    model, tok = build_owl(cfg)
    torch.testing.assert_close(model.encoder.cls_tokens.detach(), state["cls_tokens"])
    recipe = load_recipe(None, ["max_steps=1", "global_batch_size=2", "micro_batch_size=2",
                                "bf16=false"])  # fmt: skip
    result = train_owl(model, tok, source, recipe, tmp_path / "run")
    stages = [h["stage"] for h in result["history"]]
    assert stages == ["stage1_single", "stage1_dual", "stage2", "stage3"]
    assert all(np.isfinite(h["loss"]) for h in result["history"])
    # the CLI's registered source is this reader; `owl eval` asks the copy's eval split
    import argparse

    from agl_fast.cli import main
    from agl_fast.owl.cli import QA_SOURCES

    made = QA_SOURCES["bidepth"](argparse.Namespace(data=sample, split="train"), 0)
    assert isinstance(made, BidepthQaSource) and made.split == "train"
    assert len(made.select(["I"], [1])) == len(source.select(["I"], [1])) > 0
    out = tmp_path / "eval"
    argv = ["spatial", "owl", "eval", "--data", str(sample), "--model",
            str(tmp_path / "run" / "owl"), "--out", str(out), "--batch-size", "2",
            "--max-new-tokens", "4"]  # fmt: skip
    assert main(argv) == 0
    answered = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]
    questions = json.loads((sample / "qa" / "stage1" / "eval.json").read_text())["data"]
    assert sorted(a["question"] for a in answered) == sorted(q["question"] for q in questions)
    assert (out / "report.md").is_file() and "Type I" in (out / "report.md").read_text()
