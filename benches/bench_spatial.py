"""SAGE inference on CPU: Rust features + ONNX Runtime against the PyTorch
reference (the front end inside the model, as Spatial-AST does it).

Same clips (10 s binaural at 32 kHz), same encoder weights, same run:

* ``agl-fast``: :func:`agl_fast.bat` features, then the ONNX model
  (:func:`agl_fast.sage.infer.export_onnx`) in ONNX Runtime on the CPU;
* ``torch``: ``torch.stft`` (periodic Hann 1024, hop 320, centred, reflect),
  the Slaney mel matrix, ``10 log10`` of the magnitude mel, the mel-projected
  cos/sin IPD, then the same :class:`agl_fast.sage.model.SageEncoder` in eager
  PyTorch.

Prints clips per second for the front end alone and end to end, and the
ratios. The default model is a small SAGE (4 layers, 192 wide);
``--full`` uses ViT-B (12 x 768).

Usage::

    python benches/bench_spatial.py [--quick] [--full] [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SR, N_FFT, HOP = 32000, 1024, 320


def _best(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def torch_front_end(torch: Any, y: Any, melw: Any) -> Any:
    """``[B, 2, n]`` -> ``[B, 4, frames, 128]`` in PyTorch."""
    b, c, n = y.shape
    win = torch.hann_window(N_FFT, periodic=True)
    spec = torch.stft(y.reshape(b * c, n), N_FFT, HOP, window=win, center=True,
                      pad_mode="reflect", return_complex=True)  # fmt: skip
    mag = spec.abs().transpose(1, 2)  # [B*2, frames, bins]
    logmel = 10 * torch.log10(torch.clamp(mag @ melw, min=1e-10)).reshape(b, 2, -1, melw.shape[1])
    phase = torch.angle(spec).transpose(1, 2).reshape(b, 2, -1, spec.shape[1])
    ipd = phase[:, 1] - phase[:, 0]
    return torch.cat([logmel, torch.stack([torch.cos(ipd) @ melw, torch.sin(ipd) @ melw], 1)], 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true", help="ViT-B (12 x 768) instead of 4 x 192")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import librosa
    import torch

    from agl_fast import bat
    from agl_fast.sage.infer import SageSession, export_onnx
    from agl_fast.sage.model import SageConfig, SageEncoder

    torch.set_num_threads(args.threads)
    batch = 2 if args.quick else 8
    repeat = 2 if args.quick else 3
    cfg = SageConfig() if args.full else SageConfig(embed_dim=192, depth=4, num_heads=3)
    torch.manual_seed(0)
    model = SageEncoder(cfg).eval()
    rng = np.random.default_rng(0)
    clips = (0.1 * rng.standard_normal((batch, 2, 10 * SR))).astype(np.float32)
    melw = torch.from_numpy(
        librosa.filters.mel(sr=SR, n_fft=N_FFT, n_mels=128, fmin=50, fmax=14000).T.copy()
    ).float()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sage.onnx"
        export_onnx(model, str(path), frames=1 + 10 * SR // HOP)
        sess = SageSession(str(path), allow_cpu=True, n_threads=args.threads)
        clip_list = list(clips)
        xt = torch.from_numpy(clips)

        def ours_fe() -> Any:
            return bat(clips, n_threads=args.threads)

        def ref_fe() -> Any:
            with torch.no_grad():
                return torch_front_end(torch, xt, melw)

        def ours_e2e() -> Any:
            return sess.predict(clip_list, batch_size=batch)

        def ref_e2e() -> Any:
            with torch.no_grad():
                return model(torch_front_end(torch, xt, melw))

        diff = float(np.max(np.abs(np.asarray(ours_fe()) - ref_fe().numpy())))
        rows = []
        for name, a, b in (("front end", ours_fe, ref_fe), ("end to end", ours_e2e, ref_e2e)):
            ta, tb = _best(a, repeat), _best(b, repeat)
            rows.append((name, batch / ta, batch / tb, tb / ta))
    print(f"SAGE {cfg.depth} x {cfg.embed_dim}, {batch} clips of 10 s, {args.threads} thread(s), "
          f"provider {sess.provider}; max |feature diff| {diff:.2e}\n")  # fmt: skip
    print("| stage | agl-fast clips/s | torch clips/s | ratio |")
    print("|---|---|---|---|")
    for name, a, b, r in rows:
        print(f"| {name} | {a:.2f} | {b:.2f} | {r:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
