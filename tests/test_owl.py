"""OWL (SAGE + Q-Former + causal LM with LoRA): model, curriculum, resume, eval.

Everything is built here from configs: a tiny SAGE, a word-level tokenizer
over the QA vocabulary and tiny random LLaMA- and Qwen2-architecture
decoders; nothing is downloaded.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("pyroomacoustics")

import torch

from agl_fast.cli import main
from agl_fast.exceptions import ParameterError
from agl_fast.owl.cli import TABLE3_COLUMNS, SpatialQaSource
from agl_fast.owl.model import (
    IGNORE_INDEX,
    PROMPT_TEMPLATE,
    OwlConfig,
    build_owl,
    encode_batch,
    load_owl,
    paper_parameter_count,
)
from agl_fast.owl.train import load_recipe, stage_lr, train_owl
from agl_fast.sage.model import SageConfig, SageEncoder
from agl_fast.spatial.answers import score_qa
from agl_fast.spatial.dataset import build_dataset

SPECIALS = ["<unk>", "<pad>", "<s>", "</s>"]
TINY = {"n_queries": 4, "qformer_layers": 2, "qformer_hidden": 32, "qformer_heads": 2,
        "qformer_intermediate": 64, "max_answer_tokens": 64}  # fmt: skip
# A test override of the shipped recipe: a few steps per stage, a short warm-up.
OVERRIDES = ["max_steps=4", "stage1_single.warmup_steps=2", "lr=1e-2", "global_batch_size=4",
             "micro_batch_size=2", "bf16=false"]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only contend
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("owl_ds")
    build_dataset(root, 8, seed=5, seconds=0.5, receiver="two_mic", max_sources=2, test_every=1)
    return root


def _tokenizer(rows):
    """Words split at spaces and around ':' (so ``'Response:' + answer``
    splits as a real tokenizer would), BOS added by the tokenizer as
    LLaMA's does."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    pre = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                   pre_tokenizers.Split(":", "isolated")])  # fmt: skip
    words: set[str] = set()
    for text in [PROMPT_TEMPLATE, *(x for r in rows for x in (r["question"], r["answer"]))]:
        words |= {w for w, _ in pre.pre_tokenize_str(text)}
    vocab = {w: i for i, w in enumerate(SPECIALS + sorted(words))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>")  # fmt: skip


def _decoder(kind, vocab_size):
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    common = {"vocab_size": vocab_size, "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 512, "pad_token_id": 1, "bos_token_id": 2,
              "eos_token_id": 3, "initializer_range": 0.3}  # fmt: skip
    cfg = LlamaConfig(**common) if kind == "llama" else Qwen2Config(**common)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def parts(request, data, tmp_path_factory):
    """Saved tiny decoder + tokenizer and SAGE checkpoint; the OWL config."""
    d = tmp_path_factory.mktemp(f"owl_{request.param}")
    rows = SpatialQaSource(data, None).rows
    tok = _tokenizer(rows)
    tok.save_pretrained(d / "tokenizer")
    _decoder(request.param, len(tok)).save_pretrained(d / "decoder")
    torch.manual_seed(1)
    scfg = SageConfig(embed_dim=32, depth=1, num_heads=2, target_frame=64, num_classes=8)
    torch.save({"model": SageEncoder(scfg).state_dict(), "model_config": scfg.to_dict()},
               d / "sage.pt")  # fmt: skip
    cfg = OwlConfig(decoder=str(d / "decoder"), sage=str(d / "sage.pt"),
                    tokenizer=str(d / "tokenizer"), **TINY)  # fmt: skip
    (d / "owl_config.json").write_text(json.dumps(TINY))
    return {"dir": d, "cfg": cfg, "kind": request.param}


def _mean_loss(model, tok, source, rows):
    model.eval()
    with torch.no_grad():
        enc = encode_batch(tok, [r["question"] for r in rows], [r["answer"] for r in rows])
        return float(model(source.features(rows), **enc).loss)


def test_forward_shapes_and_answer_only_labels(parts, data):
    model, tok = build_owl(parts["cfg"])
    source = SpatialQaSource(data, None)
    rows = source.rows[:3]
    enc = encode_batch(tok, [r["question"] for r in rows], [r["answer"] for r in rows])
    feats = source.features(rows)
    assert tuple(feats.shape[:2]) == (3, 4) and feats.shape[3] == 128
    out = model(feats, **enc)
    n = enc["input_ids"].shape[1]
    assert tuple(out.logits.shape) == (3, 4 + n, len(tok))
    assert tuple(model.audio_tokens(feats).shape) == (3, 4, 32)
    assert math.isfinite(float(out.loss.detach()))
    # Labels: the answer words and EOS, nothing of the prompt or padding.
    for i, r in enumerate(rows):
        lab = enc["labels"][i][enc["labels"][i] != IGNORE_INDEX].tolist()
        assert tok.decode(lab[:-1]) == r["answer"] and lab[-1] == tok.eos_token_id


def test_only_projector_and_lora_receive_gradients(parts, data):
    model, tok = build_owl(parts["cfg"])
    source = SpatialQaSource(data, None)
    rows = source.rows[:2]
    enc = encode_batch(tok, [r["question"] for r in rows], [r["answer"] for r in rows])
    model.train()
    model(source.features(rows), **enc).loss.backward()
    n_lora_b = 0
    for name, p in model.named_parameters():
        trainable = name.startswith("encoder_projector.") or ".lora_" in name
        assert p.requires_grad == trainable, name
        if trainable:
            assert p.grad is not None, name
            if ".lora_B." in name or name.startswith("encoder_projector.qformer.encoder"):
                assert float(p.grad.abs().sum()) > 0, name
            n_lora_b += ".lora_B." in name
        else:
            assert p.grad is None, name
    assert n_lora_b == 2 * 2  # q_proj and v_proj of both layers
    counts = model.check_trainable()
    # LoRA r=8 on q (32 -> 32) and v (32 -> 16, two KV heads of 8) in 2 layers.
    assert counts["lora"] == 2 * (8 * (32 + 32) + 8 * (32 + 16))
    assert counts["trainable"] == counts["lora"] + counts["projector"] < counts["total"]


def test_paper_sizes_trainable_count_on_meta():
    qv = paper_parameter_count(("q_proj", "v_proj"))
    qkv = paper_parameter_count(("q_proj", "k_proj", "v_proj"))
    assert qv["lora"] == 32 * 2 * 8 * (4096 + 4096)  # 4.19 M: the paper's "4.1M"
    assert abs(qv["lora"] / qv["decoder"] - 0.00062) < 0.00001  # its "0.062%"
    assert qkv["lora"] == 32 * 3 * 8 * (4096 + 4096)
    assert 6.7e9 < qv["decoder"] < 6.8e9  # LLaMA-2-7B
    # "~0.8%" matches neither LoRA set, nor LoRA with the projector.
    for c in (qv, qkv):
        assert abs(c["lora"] / c["total"] - 0.008) > 0.005
        assert abs(c["trainable"] / c["total"] - 0.008) > 0.002


def test_shipped_recipe_is_the_papers_curriculum():
    r = load_recipe()
    assert [(s.name, s.types, s.n_sources, s.epochs, s.warmup_steps) for s in r.stages] == [
        ("stage1_single", ["I", "II"], [1], 2, 5000),
        ("stage1_dual", ["I", "II"], [2], 2, 0),
        ("stage2", ["III"], [2], 2, 0),
        ("stage3", ["IV"], [2], 3, 0),
    ]
    assert (r.lr, r.weight_decay, r.grad_clip, r.global_batch_size) == (1e-4, 0.01, 1.0, 8)
    t = load_recipe(None, [*OVERRIDES, "stage3.epochs=1.5"])
    assert [s.max_steps for s in t.stages] == [4] * 4 and t.stages[0].warmup_steps == 2
    assert t.stages[3].epochs == 1.5 and t.lr == 1e-2 and t.bf16 is False
    for bad in (
        "nokey=1",
        "stage9.epochs=1",
        "lr",
        "micro_batch_size=0",
        "stage2.epochs=0",
        "bf16=maybe",
        "lr=fast",
    ):
        with pytest.raises(ParameterError):
            load_recipe(None, [bad])
    # Half-cycle cosine warm-up to the base rate, then cosine decay.
    w = [stage_lr(s, 10, 4, 1.0) for s in range(10)]
    assert w[0] == pytest.approx(0.5 * (1 - math.cos(math.pi / 4))) and w[3] == pytest.approx(1)
    assert all(a < b for a, b in itertools.pairwise(w[:4]))
    assert all(a > b for a, b in itertools.pairwise(w[4:])) and w[4] == pytest.approx(1)


@pytest.fixture(scope="module")
def trained(parts, data):
    out = parts["dir"] / "run"
    argv = ["spatial", "owl", "train", "--data", str(data), "--out", str(out), "--split", "",
            "--decoder", parts["cfg"].decoder, "--sage", parts["cfg"].sage,
            "--tokenizer", parts["cfg"].tokenizer,
            "--model-config", str(parts["dir"] / "owl_config.json")]  # fmt: skip
    for o in OVERRIDES:
        argv += ["--set", o]
    assert main(argv) == 0
    return out


def test_curriculum_runs_all_stages_and_loss_falls(parts, data, trained, capsys):
    hist = [json.loads(x) for x in (trained / "metrics.jsonl").read_text().splitlines()]
    stages = [h["stage"] for h in hist]
    # Steps: epochs x ceil(questions / 4), at most 4: 6 single-source Type I-II
    # questions (2 epochs), 13 dual ones, 4 of Type III (2 epochs), 4 of Type IV (3).
    assert stages == ["stage1_single"] * 4 + ["stage1_dual"] * 4 + ["stage2"] * 2 + ["stage3"] * 3
    assert [h["global_step"] for h in hist] == list(range(13))
    assert hist[0]["lr"] < hist[1]["lr"] == pytest.approx(1e-2)
    source = SpatialQaSource(data, None)
    rows = source.rows  # the fixed tiny QA set
    fresh, tok = build_owl(parts["cfg"])  # the run's initial weights (same seed)
    after, _ = load_owl(trained / "owl")
    assert _mean_loss(after, tok, source, rows) < 0.95 * _mean_loss(fresh, tok, source, rows)


def test_resume_mid_stage_continues_exactly(parts, data, tmp_path):
    source = SpatialQaSource(data, None)
    recipe = load_recipe(None, [*OVERRIDES, "max_steps=2", "checkpoint_every=1000"])
    model, tok = build_owl(parts["cfg"])
    full = train_owl(model, tok, source, recipe, tmp_path / "a")
    model, tok = build_owl(parts["cfg"])
    part = train_owl(model, tok, source, recipe, tmp_path / "b", stop_after=3)
    assert part["stopped"] and len(part["history"]) == 3  # mid stage1_dual
    model, tok = build_owl(parts["cfg"], seed=123)  # other initial weights: all must come back
    rest = train_owl(model, tok, source, recipe, tmp_path / "b", resume=True)
    assert not rest["stopped"]
    assert [h["loss"] for h in rest["history"]] == [h["loss"] for h in full["history"]]
    a = torch.load(tmp_path / "a" / "owl" / "trainable.pt")
    b = torch.load(tmp_path / "b" / "owl" / "trainable.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_owl_eval_writes_the_table3_report(parts, data, trained, tmp_path, capsys):
    out = tmp_path / "eval"
    argv = [
        "spatial",
        "owl",
        "eval",
        "--data",
        str(data),
        "--model",
        str(trained / "owl"),
        "--out",
        str(out),
        "--split",
        "",
        "--batch-size",
        "4",
        "--max-new-tokens",
        "24",
    ]
    assert main(argv) == 0
    rows = SpatialQaSource(data, None).rows
    got = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]
    assert [g["question"] for g in got] == [r["question"] for r in rows]
    report = json.loads((out / "report.json").read_text())
    expected = score_qa(rows, [g["model_output"] for g in got])
    assert len(report["columns"]) == len(TABLE3_COLUMNS) == 12
    for (group, col, key), (name, value) in zip(TABLE3_COLUMNS, report["columns"].items(),
                                                strict=True):  # fmt: skip
        assert name == f"{group} / {col}"
        assert value is not None and 0.0 <= value <= 100.0, name
        assert value == pytest.approx(100 * expected[key], abs=0.01)
    md = (out / "report.md").read_text()
    assert md.count("|") > 24 and "Type IV CoT: BA" in md


def test_owl_errors_are_typed(tmp_path, capsys):
    with pytest.raises(ParameterError):
        load_owl(tmp_path)
    argv = ["spatial", "owl", "eval", "--data", str(tmp_path), "--model", str(tmp_path),
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err
    assert np.isfinite(stage_lr(0, 1, 0, 1.0))


def test_spatial_ask_scores_a_local_owl_model(data, trained, tmp_path, capsys):
    import pyarrow.parquet as pq

    out = tmp_path / "ask"
    argv = ["spatial", "ask", "--data", str(data), "--model", f"owl:{trained / 'owl'}",
            "--out", str(out), "--types", "III", "IV", "--owl-batch-size", "4"]  # fmt: skip
    assert main(argv) == 0
    table = pq.read_table(out / "answers.parquet").to_pylist()
    rows = [r for r in SpatialQaSource(data, "test").rows if r["type"] in ("III", "IV")]
    assert [t["question"] for t in table] == [r["question"] for r in rows]
    scores = json.loads((out / "scores.json").read_text())
    expected = score_qa(rows, [t["model_output"] for t in table])
    assert scores["provider"] == "owl" and scores["n"] == expected["n"]
    for key in ("III_ba", "IV_detection", "IV_direction", "IV_ba"):
        assert scores[key] == pytest.approx(expected[key])
    # Without owl: a provider is still required.
    assert main(["spatial", "ask", "--data", str(data), "--model", "m", "--out", str(out)]) == 2
    assert "--provider is required" in capsys.readouterr().err


# Under torchrun, in the same two processes (one start-up for all): a DDP
# run, an FSDP run, and an FSDP run accumulating two micro-batches per
# process, stopped after 3 steps and resumed; rank 0 of each writes its metrics.
_TWO_RUNS = """
import sys
from agl_fast.cli import main
args, out = sys.argv[1:-1], sys.argv[-1]
assert main([*args, "--out", out + "/ddp"]) == 0
assert main([*args, "--out", out + "/fsdp", "--fsdp"]) == 0
acc = [*args, "--set", "micro_batch_size=1", "--fsdp", "--out", out + "/fsdp_acc"]
assert main([*acc, "--stop-after", "3"]) == 0
assert main([*acc, "--resume"]) == 0
"""


@pytest.mark.slow
def test_torchrun_ddp_fsdp_and_fsdp_resume_give_the_one_process_steps(parts, data, tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    if torchrun is None:
        pytest.skip("torchrun not installed")
    args = ["spatial", "owl", "train", "--data", str(data), "--split", "",
            "--decoder", parts["cfg"].decoder, "--sage", parts["cfg"].sage,
            "--tokenizer", parts["cfg"].tokenizer,
            "--model-config", str(parts["dir"] / "owl_config.json")]  # fmt: skip
    for o in [*OVERRIDES, "max_steps=2"]:
        args += ["--set", o]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # fmt: skip
    script = tmp_path / "two_runs.py"
    script.write_text(_TWO_RUNS)
    port = "29531" if parts["kind"] == "llama" else "29533"
    two = [torchrun, "--nproc_per_node", "2", "--master_port", port, str(script)]
    done = subprocess.run([*two, *args, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    acc = ["--set", "micro_batch_size=1", "--out", str(tmp_path / "one_acc")]
    assert main([*args, *acc]) == 0  # other micro-batches: other dropout, other means

    def losses(run):
        lines = (tmp_path / run / "metrics.jsonl").read_text().splitlines()
        return [json.loads(x)["loss"] for x in lines]

    one = losses("one")
    assert len(one) == 8
    assert losses("ddp") == pytest.approx(one, rel=1e-5)
    assert losses("fsdp") == pytest.approx(one, rel=1e-5)
    assert losses("fsdp_acc") == pytest.approx(losses("one_acc"), rel=1e-5)
    # Whole weights saved (FSDP gathers its shards): DDP's equal the one-process
    # run's; FSDP's within 1e-4 (attention key biases get rounding-level
    # gradients only, softmax ignoring a shift, which Adam scales up to lr steps).
    one_w, ddp_w, fsdp_w = (torch.load(tmp_path / r / "owl" / "trainable.pt")
                            for r in ("one", "ddp", "fsdp"))  # fmt: skip
    assert one_w.keys() == ddp_w.keys() == fsdp_w.keys()
    assert all(torch.allclose(one_w[k], ddp_w[k], rtol=1e-5, atol=1e-7) for k in one_w)
    assert all(torch.allclose(one_w[k], fsdp_w[k], rtol=1e-4, atol=1e-4) for k in one_w)


def test_batched_generation_equals_one_at_a_time(data, trained):
    from agl_fast.owl.infer import generate_answers

    source = SpatialQaSource(data, None)
    rows = source.rows[:6]  # prompts of different lengths: left padding
    assert len({len(r["question"].split()) for r in rows}) > 2
    model, tok = load_owl(trained / "owl")
    batched = generate_answers(model, tok, source, rows, batch_size=6, max_new_tokens=10)
    single = generate_answers(model, tok, source, rows, batch_size=1, max_new_tokens=10)
    # equal clip by clip; not trivially empty (a tiny random decoder may end
    # one answer at once, which batching must reproduce too)
    assert batched == single and sum(bool(a.strip()) for a in batched) >= len(rows) // 2


def test_hostile_files_give_typed_errors(parts, data, tmp_path):
    from agl_fast.exceptions import AglError

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "owl.json").write_text(json.dumps({**TINY, "qformer_heads": 5}))
    (bad / "trainable.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ParameterError, match="multiple"):
        load_owl(bad)
    (bad / "owl.json").write_text(json.dumps({"decoder": "x", "no_such_size": 1}))
    with pytest.raises(ParameterError, match="unknown"):
        load_owl(bad)
    (bad / "owl.json").write_text(json.dumps(parts["cfg"].to_dict()))
    with pytest.raises(ParameterError, match="unreadable"):
        load_owl(bad)
    model, tok = build_owl(parts["cfg"])
    recipe = load_recipe(None, [*OVERRIDES, "max_steps=1"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"\x00" * 64)
    with pytest.raises(ParameterError, match="unreadable checkpoint"):
        train_owl(model, tok, SpatialQaSource(data, None), recipe, run, resume=True)
    source = SpatialQaSource(data, None)
    with pytest.raises(AglError, match="missing"):
        source.features([{"scene": "no-such-scene"}])


def test_bfloat16_decoder_keeps_the_trained_weights_float32(parts, data):
    model, tok = build_owl(parts["cfg"], dtype=torch.bfloat16)
    assert model.llm.get_input_embeddings().weight.dtype == torch.bfloat16
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert {p.dtype for p in trainable} == {torch.float32}
    source = SpatialQaSource(data, None)
    rows = source.rows[:2]
    enc = encode_batch(tok, [r["question"] for r in rows], [r["answer"] for r in rows])
    loss = model(source.features(rows), **enc).loss
    loss.backward()
    assert math.isfinite(float(loss.detach())) and all(p.grad is not None for p in trainable)


# --- streamed questions (a BRIR bank, sources by index) ---------------------


@pytest.fixture(scope="module")
def bank(data, tmp_path_factory):
    from agl_fast.sage.stream import RirBank, bank_from_dataset

    return RirBank(bank_from_dataset(data, tmp_path_factory.mktemp("owl_bank")))


def test_streamed_questions_are_built_from_indices(bank):
    import tracemalloc

    from agl_fast.owl.stream import StreamingQaSource
    from agl_fast.presets import bat
    from agl_fast.sage.stream import SyntheticSources
    from agl_fast.spatial.mix import spatialize
    from agl_fast.spatial.qa import clock

    srcs = SyntheticSources(8, 0.5, seed=3)
    source = StreamingQaSource(bank, srcs, scenes=10**9, seconds=0.5, seed=1, split=None)
    tracemalloc.start()
    rows = source.select(["I", "II"], [1, 2])
    picked = [rows[k] for k in range(12)] + [rows[10**9 - 1], rows[-2]]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(rows) == 10**9 and peak < 2_000_000  # a billion questions, nothing stored
    assert rows[7] == picked[7] and rows[7] != rows[8]
    with pytest.raises(IndexError):
        rows[10**9]
    assert {r["n_sources"] for r in picked} == {1, 2}
    for r in picked:
        assert r["type"] in ("I", "II") and len(r["rirs"]) == len(r["sources"]) == r["n_sources"]
        assert r["events"] == [srcs.vocab[srcs.labels(s)[0]] for s in r["sources"]]
        if r["n_sources"] == 2:  # two BRIRs of one room (one simulated scene)
            assert r["rirs"][0] != r["rirs"][1]
            assert bank.room[r["rirs"][0]] == bank.room[r["rirs"][1]]
        elif r["type"] == "II":
            assert r["clock"] == clock(int(bank.labels["azimuth"][r["rirs"][0]]))
    # Features: the stored-dataset rendering (spatialize) of the same indices.
    feats = source.features(picked[:4])
    for f, r in zip(feats, picked[:4], strict=True):
        audio = spatialize([srcs.load(s) for s in r["sources"]],
                           [np.asarray(bank.brirs[j]) for j in r["rirs"]], seconds=0.5)  # fmt: skip
        np.testing.assert_allclose(f.numpy(), np.asarray(bat(audio[None]))[0], atol=1e-4)
    dual = source.select(["III", "IV"], [2])
    assert {dual[k]["type"] for k in range(6)} <= {"III", "IV"}
    with pytest.raises(ParameterError, match="source"):
        source.select(["III"], [1])
    with pytest.raises(ParameterError, match="out of range"):
        source.features([{**picked[0], "rirs": [10**6]}])


def test_owl_train_streams_questions_from_a_bank(parts, bank, tmp_path):
    out = tmp_path / "run"
    argv = ["spatial", "owl", "train", "--stream", "--data", str(bank.root), "--out", str(out),
            "--split", "", "--scenes", str(10**9), "--clip-seconds", "0.5",
            "--synthetic-sources", "8", "--decoder", parts["cfg"].decoder,
            "--sage", parts["cfg"].sage, "--tokenizer", parts["cfg"].tokenizer,
            "--model-config", str(parts["dir"] / "owl_config.json")]  # fmt: skip
    for o in [*OVERRIDES, "max_steps=1"]:
        argv += ["--set", o]
    assert main(argv) == 0
    hist = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [h["stage"] for h in hist] == ["stage1_single", "stage1_dual", "stage2", "stage3"]
    assert all(math.isfinite(h["loss"]) and h["loss"] > 0 for h in hist)
    model, _ = load_owl(out / "owl")
    assert model.cfg.n_queries == TINY["n_queries"]


# --- the authors' checkpoints (SLAM-LLM model.pt, peft adapter) ------------------


def _authors_state(r=4):
    """Trainable weights named as the authors' training saves them
    (``model.pt``), for the tiny sizes: Q-Former of 2 layers (cross-attention
    in layer 0), 4 queries of 32, SAGE of 32, decoder of 32 (v: 16), LoRA r."""
    g = torch.Generator().manual_seed(7)

    def t(*shape):
        return torch.randn(*shape, generator=g)

    q = "encoder_projector.qformer."
    sd = {"encoder_projector.query": t(1, 4, 32), q + "layernorm.weight": t(32),
          q + "layernorm.bias": t(32)}  # fmt: skip
    for i in range(2):
        layer = f"{q}encoder.layer.{i}."
        for block in ["attention"] + (["crossattention"] if i == 0 else []):
            for n in ("query", "key", "value"):
                sd[f"{layer}{block}.attention.{n}.weight"] = t(32, 32)
                sd[f"{layer}{block}.attention.{n}.bias"] = t(32)
            sd[f"{layer}{block}.output.dense.weight"] = t(32, 32)
            for n in ("output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"):
                sd[f"{layer}{block}.{n}"] = t(32)
        for ffn in ("intermediate", "intermediate_query"):  # the text one: older transformers
            sd[f"{layer}{ffn}.dense.weight"], sd[f"{layer}{ffn}.dense.bias"] = t(64, 32), t(64)
        for ffn in ("output", "output_query"):
            sd[f"{layer}{ffn}.dense.weight"], sd[f"{layer}{ffn}.dense.bias"] = t(32, 64), t(32)
            sd[f"{layer}{ffn}.LayerNorm.weight"] = t(32)
            sd[f"{layer}{ffn}.LayerNorm.bias"] = t(32)
    sd["encoder_projector.linear.weight"], sd["encoder_projector.linear.bias"] = t(32, 32), t(32)
    sd["encoder_projector.norm.weight"], sd["encoder_projector.norm.bias"] = t(32), t(32)
    for i in range(2):
        for proj, n_out in (("q_proj", 32), ("v_proj", 16)):
            key = f"llm.base_model.model.model.layers.{i}.self_attn.{proj}"
            sd[f"{key}.lora_A.default.weight"] = t(r, 32)
            sd[f"{key}.lora_B.default.weight"] = t(n_out, r)
    return sd


def test_authors_checkpoint_loads_by_their_key_names(parts, data, tmp_path, capsys):
    import re

    from safetensors.torch import save_file

    from agl_fast.exceptions import ModelStateError
    from agl_fast.owl.slam import load_slam_owl

    sd = _authors_state()
    ckpt = tmp_path / "OWL_epoch_1_step_100"  # their checkpoint directory name
    ckpt.mkdir()
    torch.save(sd, ckpt / "model.pt")
    where = ["--decoder", parts["cfg"].decoder, "--sage", parts["cfg"].sage,
             "--tokenizer", parts["cfg"].tokenizer, "--qformer-heads", "2"]  # fmt: skip
    argv = ["spatial", "owl", "import", "--checkpoint", str(ckpt), *where]
    assert main([*argv, "--out", str(tmp_path / "owl")]) == 0
    model, tok = load_owl(tmp_path / "owl")
    c = model.cfg
    assert (
        c.lora_r,
        c.lora_alpha,
        c.n_queries,
        c.qformer_layers,
        c.qformer_hidden,
        c.qformer_intermediate,
        c.cross_attention_frequency,
    ) == (4, 128, 4, 2, 32, 64, 2)
    params = dict(model.named_parameters())
    text_ffn = re.compile(r"\.layer\.\d+\.(intermediate|output)\.")
    for k, v in sd.items():
        if text_ffn.search(k):
            assert k not in params, k  # unused by the query path: dropped
        else:
            assert torch.equal(params[k].detach(), v), k
    rows = SpatialQaSource(data, None).rows[:2]
    enc = encode_batch(tok, [r["question"] for r in rows], [r["answer"] for r in rows])
    with torch.no_grad():
        assert math.isfinite(float(model(SpatialQaSource(data, None).features(rows), **enc).loss))
    # Their peft adapter directory: LoRA in adapter_model.safetensors, the rest in model.pt.
    ad = tmp_path / "adapter"
    ad.mkdir()
    torch.save({k: v for k, v in sd.items() if k.startswith("encoder_projector.")},
               ad / "model.pt")  # fmt: skip
    lora = {k.removeprefix("llm.").replace(".default.weight", ".weight"): v.contiguous()
            for k, v in sd.items() if ".lora_" in k}  # fmt: skip
    save_file(lora, str(ad / "adapter_model.safetensors"))
    (ad / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "r": 4,
                "lora_alpha": 16,
                "lora_dropout": 0.1,
                "target_modules": ["q_proj", "v_proj"],
            }
        )
    )
    m2, _ = load_slam_owl(ad, decoder=parts["cfg"].decoder, sage=parts["cfg"].sage,
                          tokenizer=parts["cfg"].tokenizer, qformer_heads=2)  # fmt: skip
    assert (m2.cfg.lora_alpha, m2.cfg.lora_dropout) == (16, 0.1)
    got = m2.trainable_state()
    assert got.keys() == model.trainable_state().keys()
    assert all(torch.equal(got[k], params[k].detach()) for k in got)
    # Hostile checkpoints: a key of no known part, a missing LoRA, not a state dict.
    bad = tmp_path / "bad"
    bad.mkdir()
    torch.save({**sd, "llm.base_model.model.lm_head.weight": torch.zeros(2)}, bad / "model.pt")
    assert main([*argv[:4], str(bad), *where, "--out", str(tmp_path / "o")]) == 2
    assert "unknown keys" in capsys.readouterr().err
    torch.save({k: v for k, v in sd.items() if ".lora_" not in k}, bad / "model.pt")
    with pytest.raises(ModelStateError, match="LoRA"):
        load_slam_owl(bad, decoder=parts["cfg"].decoder, sage=parts["cfg"].sage)
    torch.save([1, 2], bad / "model.pt")
    with pytest.raises(ModelStateError):
        load_slam_owl(bad / "model.pt", decoder=parts["cfg"].decoder, sage=parts["cfg"].sage)


def test_prompt_and_tokens_are_the_authors_loaders(parts, data):
    from transformers import AutoTokenizer

    from agl_fast.owl.model import format_prompt

    # Their format_prompt (no input): the instruction between these lines.
    assert PROMPT_TEMPLATE == (
        "Based on the audio you've heard, refer to the instruction and provide a response."
        "\n\n### Instruction:\n{instruction}\n\n### Response:"
    )
    tok = AutoTokenizer.from_pretrained(parts["cfg"].tokenizer)
    rows = SpatialQaSource(data, None).rows[:3]
    enc = encode_batch(tok, [r["question"] for r in rows], [r["answer"] for r in rows])
    for i, r in enumerate(rows):
        # tokenizer.encode(prompt) (BOS by the tokenizer), then of prompt + answer, EOS
        prompt = tok.encode(format_prompt(r["question"]))
        example = [*tok.encode(format_prompt(r["question"]) + r["answer"]), tok.eos_token_id]
        assert prompt[0] == tok.bos_token_id and example[: len(prompt)] == prompt
        n = len(example)
        assert enc["input_ids"][i][:n].tolist() == example
        assert (
            enc["labels"][i][:n].tolist() == [IGNORE_INDEX] * len(prompt) + example[len(prompt) :]
        )
    gen = encode_batch(tok, [rows[0]["question"]])
    assert gen["input_ids"][0].tolist() == tok.encode(format_prompt(rows[0]["question"]))
