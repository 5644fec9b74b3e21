"""Benchmark: the tagging stage on the CPU (same data, same run).

    python benches/bench_tagging.py [--quick] [--model mn10.onnx]

Times, on ten-second windows at 32 kHz:

* the Rust ``efficientat`` mel preset alone;
* the EfficientAT ``mn10`` model alone on ONNX Runtime (random weights; the
  model is exported here with torch unless ``--model`` is given);
* the whole EfficientAT tagger (features in a producer thread overlapping
  inference, time fractions), and its overlap: the share of the serial
  feature + model time that the producer hides;
* the reference: the same model in PyTorch eager mode after the same
  features, one after the other;
* the Silero speech tagger (seconds of audio per second per core).

Rates are per core: a time is multiplied by the threads it used. The last
line compares the tagger with the PyTorch reference (per-core ratio). The
GPU command is in docs/tagging.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from agl_fast.presets import efficientat
from agl_fast.tagging import EfficientATTagger, SpeechTagger

SR = 32000
WIN = 10 * SR


def _best(f, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def _model_path(args, tmp: str, half: bool = False) -> Path | None:
    if args.model and not half:
        return Path(args.model)
    try:
        from agl_fast.torch import efficientat as eat
    except ImportError:
        return None
    import torch

    torch.manual_seed(0)  # the same random weights for both precisions
    net = eat.get_model("mn10_as").eval()
    with torch.no_grad():  # a fresh model's outputs are all 0.5: spread them
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    name = "mn10_fp16.onnx" if half else "mn10.onnx"
    return eat.export_onnx(net, Path(tmp) / name, half=half)


def sweep(args) -> int:
    """The model alone on ``--device`` for each batch size, with and without
    I/O binding: windows per second (the GPU figures of docs/tagging.md)."""
    from agl_fast.tagging import OnnxModel

    tmp = tempfile.TemporaryDirectory()
    precisions = ["fp32", "fp16"] if args.fp16 else ["fp32"]
    paths = {p: _model_path(args, tmp.name, half=p == "fp16") for p in precisions}
    if any(path is None for path in paths.values()):
        print("needs torch (to export mn10) or --model", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sweep.split(",")]
    budget = 1.0 if args.quick else 5.0  # seconds per measurement
    rng = np.random.default_rng(0)
    if args.fp16:  # the price of float16: probabilities against float32's
        x = (rng.standard_normal((8, 1, 128, 1000)) * 2).astype(np.float32)
        p32, p16 = (OnnxModel(paths[p], (1, 128, 1000), device=args.device)(x) for p in precisions)
        print(f"\nfp16 export: max |p16 - p32| = {np.abs(p16 - p32).max():.2e} over "
              f"{p32.size} probabilities (spread {p32.min():.3f}..{p32.max():.3f})")  # fmt: skip
    print(f"\nmn10 alone, device {args.device}, input [b, 1, 128, 1000]\n")
    print("| batch | precision | I/O binding | provider | ms/batch | windows/s |")
    print("|---:|---|---|---|---:|---:|")
    for b in sizes:
        x = rng.standard_normal((b, 1, 128, 1000)).astype(np.float32)
        for prec in precisions:
            for io in (True, False):
                m = OnnxModel(paths[prec], (1, 128, 1000), device=args.device, buckets=(b,),
                              io_binding=io)  # fmt: skip
                m(x)
                n, t0 = 0, time.perf_counter()
                while time.perf_counter() - t0 < budget or n < 3:
                    m(x)
                    n += 1
                dt = (time.perf_counter() - t0) / n
                print(f"| {b} | {prec} | {'yes' if io else 'no'} | {m.provider} | "
                      f"{1e3 * dt:.2f} | {b / dt:.0f} |")  # fmt: skip
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--model", help="exported mn10 ONNX (default: export a random one)")
    ap.add_argument("--threads", type=int, default=None, help="threads (default: all CPUs)")
    ap.add_argument("--sweep", help="model alone over batch sizes, e.g. 1,2,4,...,1024")
    ap.add_argument(
        "--fp16",
        action="store_true",
        help="with --sweep: also the float16 export, and its difference",
    )
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="tagger device")
    args = ap.parse_args()
    if args.sweep:
        return sweep(args)
    threads = args.threads or os.cpu_count() or 1
    n_win = 16 if args.quick else 128
    batch = 8 if args.quick else 32
    repeat = 2 if args.quick else 3
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(n_win * WIN)).astype(np.float32)
    windows = audio.reshape(n_win, WIN)

    tmp = tempfile.TemporaryDirectory()
    torch = None
    try:
        import torch as _torch

        from agl_fast.torch import efficientat as eat

        torch = _torch
        torch.set_num_threads(threads)
        net = eat.get_model("mn10_as").eval()
    except ImportError:
        net = None
    if args.model:
        model_path = Path(args.model)
    elif net is not None:
        model_path = eat.export_onnx(net, Path(tmp.name) / "mn10.onnx")
    else:
        print("needs torch (to export mn10) or --model", file=sys.stderr)
        return 2

    tagger = EfficientATTagger(
        model_path,
        batch_size=batch,
        device=args.device,
        n_threads=threads,
        feature_threads=threads,
        warmup=True,
    )
    mel = efficientat(windows, n_threads=threads)[:, None]
    t_mel = _best(lambda: efficientat(windows, n_threads=threads), repeat)
    t_model = _best(lambda: tagger.model(mel), repeat)
    t_tag = _best(lambda: tagger.tag([audio]), repeat)
    overlap = (t_mel + t_model) / t_tag
    rows = [
        ("efficientat mel preset (Rust)", t_mel),
        ("mn10 on ONNX Runtime", t_model),
        ("EfficientAT tagger (producer + ORT + fractions)", t_tag),
    ]
    t_ref = None
    if torch is not None and net is not None:

        def reference():
            m = efficientat(windows, n_threads=threads)[:, None]
            with torch.inference_mode():
                for i in range(0, n_win, batch):
                    torch.sigmoid(net(torch.from_numpy(m[i : i + batch])))

        t_ref = _best(reference, repeat)
        rows.append(("reference: same features, PyTorch eager mn10, serial", t_ref))

    speech = SpeechTagger(n_threads=1)
    clips = list(audio[: (4 if args.quick else 16) * WIN].reshape(-1, WIN))
    t_sp = _best(lambda: speech.tag(clips), 1)
    sp_rate = len(clips) * 10.0 / t_sp  # single-threaded

    print(f"\n{n_win} ten-second windows, batch {batch}, {threads} thread(s), {tagger.provider}\n")
    print("| stage | s | windows/s | windows/s/core |")
    print("|---|---:|---:|---:|")
    for name, t in rows:
        print(f"| {name} | {t:.3f} | {n_win / t:.1f} | {n_win / t / threads:.2f} |")
    print(
        f"\nserial mel + model time / tagger time: {overlap:.2f} (above 1: the producer overlaps)"
    )
    print(f"speech tagger (Silero, 1 thread): {sp_rate:.0f} s of audio per s per core")
    if t_ref is not None:
        print(f"tagger vs PyTorch reference, per core: {t_ref / t_tag:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
