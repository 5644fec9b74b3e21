"""``agl-fast tagger``: export EfficientAT models to ONNX.

agl-fast tagger export --checkpoint mn10_as_mAP_471.pt --out mn10_as.onnx
agl-fast tagger export --random mn10_as --out mn10_random.onnx   # for speed tests
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tagger", help="audio tagging models (EfficientAT export)")
    tsub = p.add_subparsers(dest="tagger_command", metavar="ACTION")
    ex = tsub.add_parser("export", help="export an EfficientAT mn model to ONNX (needs torch)")
    src = ex.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="released state dict (.pt), e.g. mn10_as_mAP_471.pt")
    src.add_argument("--random", metavar="NAME", help="randomly initialised model, e.g. mn10_as")
    ex.add_argument("--name", help="model name when the file name does not tell (mn10_as, ...)")
    ex.add_argument("--out", required=True, help="output .onnx file")
    ex.add_argument("--frames", type=int, default=1000, help="mel frames per window (10 s: 1000)")
    ex.add_argument("--logits", action="store_true", help="output logits, not probabilities")
    ex.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "tagger_command", None) != "export":
        print("usage: agl-fast tagger export --checkpoint X.pt --out X.onnx", file=sys.stderr)
        return 2
    # Both imports come first, before any work: torch's exporter imports onnx
    # only when it writes the file, and fails there with its own error. An
    # ImportError reaches the command line, which prints the one-line
    # ``pip install 'agl-fast[torch]'`` message.
    import onnx  # noqa: F401

    from ..torch import efficientat as eat

    if args.checkpoint:
        model = eat.load_checkpoint(args.checkpoint, args.name)
    else:
        model = eat.get_model(args.random).eval()
    out = eat.export_onnx(
        model, args.out, frames=args.frames, probabilities=not args.logits, opset=args.opset
    )
    n = eat.count_parameters(model)
    print(f"wrote {out} ({n:,} parameters, input [batch, 1, 128, {args.frames}])")
    return 0
