"""GPU check: tagging and SAGE throughput on one GPU, written as JSON.

Measures, on random-weight models built here (no download):

* ``tagging``: EfficientAT mn10 (exported to ONNX) in ONNX Runtime's CUDA
  provider, windows/s at batch 1, 32 and 128 of 10 s windows, the Rust
  mel features (``agl_fast.presets.efficientat``) included
  (``EfficientATTagger.predict_windows``);
* ``sage_train``: SAGE ViT-B (12 x 768) trained with bfloat16 autocast at
  batch 64 on scenes streamed from a BRIR bank
  (:func:`agl_fast.sage.fit.fit`, DataLoader workers making the
  mixtures and ``bat`` features), optimiser steps/s after the first steps,
  and the peak GPU memory; ``model_only_steps_per_s`` is the same step on
  one batch held on the GPU (the bound without the data path);
* ``sage_eval``: :func:`agl_fast.sage.fit.evaluate_stream` clips/s;
* ``owl``: one OWL training step (:class:`agl_fast.owl.model.OwlModel`: the
  SAGE ViT-B above, frozen; the 8-layer Q-Former; LoRA r 8 on a decoder of
  LLaMA-2-7B's shape with random weights, held in bfloat16) under bf16
  autocast at global batch 8 on one GPU, optimiser steps/s and peak GPU
  memory: the step rate that docs/owl.md turns into run times.

``--tiny`` runs the same code on the CPU at a tiny size (a 1 x 32 SAGE,
0.5 s clips, 1 s tagging windows, batches 1/2/4, a 2-layer decoder) in
seconds; a test runs it. ``--only`` runs some sections.
Every section records its error instead of stopping the others; the exit
status is 1 if one failed.

Usage::

    python scripts/gpu_check.py [--out gpu_check.json] [--tiny] [--workers 8]
                                [--only tagging,sage,owl]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

FULL = {"device": "cuda", "tag_window_s": 10.0, "tag_batches": [1, 32, 128], "tag_windows": 256,
        "sage": {"embed_dim": 768, "depth": 12, "num_heads": 12, "target_frame": 1024},
        "batch": 64, "clip_s": 10.0, "train_steps": 30, "warm_steps": 5, "eval_clips": 640,
        "bank_rirs": 64, "rir_len": 64000, "sources": 256,
        "owl": {"llm": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                        "num_attention_heads": 32, "num_key_value_heads": 32,
                        "vocab_size": 32000},
                "batch": 8, "text_tokens": 64, "steps": 10, "warm_steps": 3}}  # fmt: skip
TINY = {"device": "cpu", "tag_window_s": 1.0, "tag_batches": [1, 2, 4], "tag_windows": 8,
        "sage": {"embed_dim": 32, "depth": 1, "num_heads": 2, "target_frame": 64},
        "batch": 8, "clip_s": 0.5, "train_steps": 6, "warm_steps": 2, "eval_clips": 16,
        "bank_rirs": 20, "rir_len": 4000, "sources": 16,
        "owl": {"llm": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256},
                "batch": 2, "text_tokens": 16, "steps": 3, "warm_steps": 1}}  # fmt: skip
SECTIONS = ("tagging", "sage", "owl")


def _tagging(s: dict[str, Any], tmp: Path) -> dict[str, Any]:
    import torch

    from agl_fast.tagging.tagger import EfficientATTagger
    from agl_fast.torch import efficientat as eat

    torch.manual_seed(0)
    path = eat.export_onnx(eat.get_model("mn10_as").eval(), tmp / "mn10.onnx",
                           frames=1 + (round(s["tag_window_s"] * 32000) - 1) // 320)  # fmt: skip
    rng = np.random.default_rng(0)
    win = round(s["tag_window_s"] * 32000)
    windows = (0.1 * rng.standard_normal((s["tag_windows"], win))).astype(np.float32)
    out: dict[str, Any] = {"model": "mn10_as", "window_s": s["tag_window_s"],
                           "features_included": True, "windows_per_s": {}}  # fmt: skip
    for b in s["tag_batches"]:
        cpu = s["device"] == "cpu"
        tagger = EfficientATTagger(path, window_s=s["tag_window_s"], batch_size=b,
                                   device=s["device"], allow_cpu_fallback=cpu)  # fmt: skip
        out["provider"] = tagger.provider
        tagger.predict_windows(windows[:b])  # warm-up
        n = max(b, (len(windows) // b) * b)
        t = time.perf_counter()
        for i in range(0, n, b):
            tagger.predict_windows(windows[i : i + b])
        out["windows_per_s"][str(b)] = n / (time.perf_counter() - t)
    return out


def _bank(s: dict[str, Any], tmp: Path) -> Path:
    from agl_fast.sage.stream import write_rir_bank

    rng = np.random.default_rng(0)
    decay = np.exp(-np.arange(s["rir_len"]) / (0.05 * 32000))
    brirs = [(rng.standard_normal((2, s["rir_len"])) * decay).astype(np.float32)
             for _ in range(s["bank_rirs"])]  # fmt: skip
    labels = [{"azimuth": int(rng.integers(360)), "elevation": int(rng.integers(180)),
               "distance_class": int(rng.integers(21)), "split": "test" if i % 5 == 4 else "train"}
              for i in range(s["bank_rirs"])]  # fmt: skip
    return write_rir_bank(tmp / "bank", brirs, labels, length=s["rir_len"])


def _sage(s: dict[str, Any], tmp: Path, workers: int) -> dict[str, Any]:
    import torch

    from agl_fast.sage.fit import FitConfig, fit
    from agl_fast.sage.model import SageConfig
    from agl_fast.sage.recipes import TrainConfig
    from agl_fast.sage.stream import StreamConfig, SyntheticSources

    bank = _bank(s, tmp)
    dev = s["device"]
    cuda = dev == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times: list[float] = []
    stream = StreamConfig(scenes=s["batch"] * s["train_steps"], batch_size=s["batch"],
                          seconds=s["clip_s"])  # fmt: skip
    loop = FitConfig(precision="bf16", workers=workers, log_every=1, checkpoint_every=10**9,
                     eval_scenes=s["eval_clips"], eval_batch=s["batch"])  # fmt: skip
    model, m = fit(bank, tmp / "run", sources=SyntheticSources(s["sources"], s["clip_s"]),
                   eval_sources=SyntheticSources(16, s["clip_s"], seed=1),
                   model_config=SageConfig(**s["sage"]), config=TrainConfig(warmup=5),
                   stream=stream, loop=loop, device=dev,
                   log=lambda msg: times.append(time.perf_counter()))  # fmt: skip
    w = s["warm_steps"]
    train = {"batch": s["batch"], "precision": "bf16", "clip_s": s["clip_s"],
             "model": s["sage"], "parameters": m["parameters"], "data_workers": workers,
             "steps": m["step"],
             "steps_per_s": (len(times) - w) / (times[-1] - times[w - 1])}  # fmt: skip
    if cuda:
        train["peak_gpu_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
    train["model_only_steps_per_s"] = _model_only(model.to(dev), s, dev)
    ev = m["test"]
    return {"train": train, "eval": {"clips": ev["n"], "clips_per_s": ev["clips_per_s"]}}


def _model_only(model: Any, s: dict[str, Any], dev: str) -> float:
    """Steps/s of the same training step on one batch held on the device."""
    import torch

    from agl_fast.sage.recipes import TrainConfig
    from agl_fast.sage.train import binaural_loss

    frames = 1 + round(s["clip_s"] * 32000) // 320
    x = torch.randn(s["batch"], 4, frames, 128, device=dev)
    tg = {"events": torch.zeros(s["batch"], model.config.num_classes, device=dev),
          **{k: torch.zeros(s["batch"], dtype=torch.long, device=dev)
             for k in ("distance", "azimuth", "elevation")}}  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model.train()
    n = s["train_steps"]
    for i in range(n + s["warm_steps"]):
        if i == s["warm_steps"]:
            if dev == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
        with torch.autocast(torch.device(dev).type, dtype=torch.bfloat16):
            loss = binaural_loss(model(x), tg, TrainConfig())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if dev == "cuda":
        torch.cuda.synchronize()
    return n / (time.perf_counter() - t)


def _owl(s: dict[str, Any]) -> dict[str, Any]:
    """Steps/s of one OWL training step at global batch 8 on one device."""
    import contextlib

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from agl_fast.owl.model import IGNORE_INDEX, OwlConfig, OwlModel
    from agl_fast.sage.model import SageConfig, SageEncoder

    o, dev = s["owl"], s["device"]
    cuda = dev == "cuda"
    torch.manual_seed(0)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    with torch.device(dev):
        encoder = SageEncoder(SageConfig(**s["sage"]))
        torch.set_default_dtype(torch.bfloat16)  # the frozen decoder, as --decoder-dtype
        try:
            llm = LlamaForCausalLM(LlamaConfig(**o["llm"]))
        finally:
            torch.set_default_dtype(torch.float32)
    model = OwlModel(encoder, llm, OwlConfig()).to(dev)  # projector and LoRA in float32
    counts = model.check_trainable()
    b, n = o["batch"], o["text_tokens"]
    frames = 1 + round(s["clip_s"] * 32000) // 320
    feats = torch.randn(b, 4, frames, 128, device=dev)
    ids = torch.randint(3, o["llm"]["vocab_size"], (b, n), device=dev)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[:, : n // 2] = IGNORE_INDEX  # the prompt half carries no loss
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    model.train()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()
    for i in range(o["steps"] + o["warm_steps"]):
        if i == o["warm_steps"]:
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
        with autocast:
            loss = model(feats, ids, mask, labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
    rate = o["steps"] / (time.perf_counter() - t)
    out: dict[str, Any] = {"decoder": o["llm"], "decoder_dtype": "bfloat16",
                           "precision": "bf16" if cuda else "float32", "batch": b,
                           "tokens": model.cfg.n_queries + n, "steps": o["steps"],
                           "steps_per_s": rate, "trainable": counts["trainable"],
                           "total_parameters": counts["total"]}  # fmt: skip
    if cuda:
        out["peak_gpu_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def _run(name: str, fn: Any, report: dict[str, Any]) -> bool:
    t = time.perf_counter()
    try:
        report[name] = fn()
        report[name]["seconds"] = time.perf_counter() - t
        return True
    except Exception as exc:  # recorded, the other sections still run
        report[name] = {"error": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc()[-2000:]}  # fmt: skip
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"), help="JSON report")
    ap.add_argument("--tiny", action="store_true", help="CPU, tiny sizes (seconds)")
    ap.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run, of {','.join(SECTIONS)}",
    )
    ap.add_argument("--workers", type=int, default=None,
                    help="DataLoader workers (default: 0 with --tiny, else CPUs - 2)")  # fmt: skip
    args = ap.parse_args(argv)
    only = [x for x in args.only.split(",") if x]
    if not only or set(only) - set(SECTIONS):
        ap.error(f"--only takes sections of {list(SECTIONS)}, got {args.only!r}")
    import onnxruntime
    import torch

    s = TINY if args.tiny else FULL
    workers = args.workers if args.workers is not None else \
        (0 if args.tiny else max(1, (os.cpu_count() or 4) - 2))  # fmt: skip
    report: dict[str, Any] = {
        "tiny": args.tiny, "device": s["device"], "python": platform.python_version(),
        "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpus": os.cpu_count(),
    }  # fmt: skip
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        steps = {"tagging": lambda: _tagging(s, Path(d)),
                 "sage": lambda: _sage(s, Path(d), workers), "owl": lambda: _owl(s)}  # fmt: skip
        ok = True
        for name in only:
            ok &= _run(name, steps[name], report)
    report["seconds"] = time.perf_counter() - t0
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
