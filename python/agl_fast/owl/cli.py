"""``agl-fast spatial owl train | infer | eval``: OWL on agl-fast's spatial data.

The model and its training live in :mod:`agl_fast.owl.model` and
:mod:`agl_fast.owl.train`; this module gives them the data of a
dataset directory (``qa.jsonl`` and the scenes of :mod:`.dataset`, simulated
or read from a released set by :mod:`.readers`) through
:class:`SpatialQaSource`, or streamed questions over a BRIR bank
(:class:`.owl_stream.StreamingQaSource`, ``owl train --stream``), a
choice of :data:`QA_SOURCES`; and it scores the answers with OWL's metrics
(:func:`.answers.score_qa`) into a report shaped as the paper's Table 3
(:func:`table3_report`).

Outputs of ``owl infer --out OUT``: ``answers.jsonl`` (one row per question:
``scene``, ``type``, ``kind``, ``n_sources``, ``question``, ``reference``,
``model_output``); ``owl eval`` adds ``scores.json`` (all of
:func:`.answers.score_qa`) and ``report.json`` / ``report.md`` (Table 3's
columns, in percent).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import AglError, ParameterError
from ..spatial.dataset import read_qa

__all__ = ["QA_SOURCES", "TABLE3_COLUMNS", "SpatialQaSource", "add_parser", "evaluate_owl",
           "table3_report"]  # fmt: skip

_LOG = logging.getLogger("agl_fast.owl.cli")

#: Table 3's columns: (group, column, key of :func:`.answers.score_qa`).
TABLE3_COLUMNS = (
    ("Type I detection (mAP)", "single", "I_map_single"),
    ("Type I detection (mAP)", "dual", "I_map_dual"),
    ("Type II DoA 12-bin (acc)", "single", "II_doa12_single"),
    ("Type II DoA 12-bin (acc)", "dual", "II_doa12_dual"),
    ("Type II DoA 4-bin (acc)", "single", "II_doa4_single"),
    ("Type II DoA 4-bin (acc)", "dual", "II_doa4_dual"),
    ("Type II distance (DER)", "single", "II_der_single"),
    ("Type II distance (DER)", "dual", "II_der_dual"),
    ("Type III reasoning", "BA", "III_ba"),
    ("Type IV CoT", "detection", "IV_detection"),
    ("Type IV CoT", "direction", "IV_direction"),
    ("Type IV CoT", "BA", "IV_ba"),
)


class SpatialQaSource:
    """QA rows and ``bat`` features of a dataset directory (one split).

    Features ``[4, frames, 128]`` are computed per scene on first use and
    kept for the ``cache_scenes`` most recently used scenes (about 2 MB
    each for 10 s clips).
    """

    def __init__(self, root: str | Path, split: str | None = "train",
                 *, cache_scenes: int = 512) -> None:  # fmt: skip
        self.root = Path(root)
        self.rows = read_qa(self.root, split=split)
        self.cache_scenes = max(1, cache_scenes)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def select(self, types: Sequence[str], n_sources: Sequence[int]) -> list[dict[str, Any]]:
        """Rows of the given types and numbers of sources, in file order."""
        t, n = set(types), {int(x) for x in n_sources}
        return [r for r in self.rows if r.get("type") in t and int(r.get("n_sources", 1)) in n]

    def features(self, rows: list[dict[str, Any]]) -> Any:
        """``bat`` features ``[len(rows), 4, frames, 128]`` (torch float32)."""
        import torch

        from ..presets import bat
        from ..spatial.dataset import load_scenes

        ids = [str(r["scene"]) for r in rows]
        todo = sorted({s for s in ids if s not in self._cache})
        try:
            loaded = load_scenes(self.root, todo) if todo else []
        except KeyError as exc:
            raise ParameterError(f"questions about scenes missing from {self.root}: {exc}") from exc
        for sid, arrays in zip(todo, loaded, strict=True):
            self._cache[sid] = np.asarray(bat(np.asarray(arrays["audio"], dtype=np.float32)),
                                          dtype=np.float32)  # fmt: skip
        for sid in ids:
            self._cache.move_to_end(sid)
        feats = np.stack([self._cache[s] for s in ids])
        while len(self._cache) > self.cache_scenes:
            self._cache.popitem(last=False)
        return torch.from_numpy(feats)


def _dataset_source(args: argparse.Namespace, seed: int) -> Any:
    return SpatialQaSource(args.data, args.split or None)


def _stream_source(args: argparse.Namespace, seed: int) -> Any:
    from ..sage.fit_cli import resolve_bank, stream_sources
    from ..sage.stream import RirBank
    from .stream import StreamingQaSource

    bank = RirBank(resolve_bank(Path(args.data)))
    train, _ = stream_sources(args, seed)
    return StreamingQaSource(bank, train, scenes=args.scenes, seconds=args.clip_seconds,
                             seed=seed, split=args.split or None)  # fmt: skip


def _bidepth_source(args: argparse.Namespace, seed: int) -> Any:
    from ..spatial.bidepth import BidepthQaSource

    outside = getattr(args, "allow_outside_roots", False)
    return BidepthQaSource(args.data, args.split or "train", allow_outside_roots=outside)


#: What ``owl train --qa-source NAME`` trains on: a factory of the parsed
#: arguments and the recipe's seed giving a
#: :class:`~agl_fast.owl.train.QaSource` (``select``, ``features``).
QA_SOURCES: dict[str, Callable[[argparse.Namespace, int], Any]] = {
    "dataset": _dataset_source,  # DATA/qa.jsonl and its stored scenes
    "stream": _stream_source,  # questions built from indices, rendered on the fly
    "bidepth": _bidepth_source,  # a BiDepth copy as released, rendered on the fly
}


def _questions(args: argparse.Namespace) -> tuple[Any, list[dict[str, Any]]]:
    """The source and the questions ``owl infer`` asks: those of a BiDepth
    copy (its ``--split``, ``eval`` when the split is ``test``) or of a
    simulated dataset, of ``--types``, the first ``--limit``."""
    from ..spatial.bidepth import BidepthQaSource, is_bidepth

    types = set(args.types or ("I", "II", "III", "IV"))
    if is_bidepth(Path(args.data)):
        split = "eval" if args.split in ("", "test") else args.split
        source: Any = BidepthQaSource(args.data, split)
        rows = source.select(sorted(types), (1, 2))
    else:
        source = SpatialQaSource(args.data, args.split or None)
        rows = [r for r in source.rows if not args.types or r.get("type") in types]
    rows = rows[: args.limit] if args.limit is not None else rows
    if not rows:
        raise ParameterError(f"no question in {args.data} for split={args.split} "
                             f"types={args.types}")  # fmt: skip
    return source, rows


def table3_report(scores: dict[str, Any], name: str = "OWL") -> tuple[dict[str, Any], str]:
    """Table 3's row of ``scores`` (:func:`.answers.score_qa`) in percent
    (None where the data have no such question) and its Markdown table."""
    row = {}
    for group, col, key in TABLE3_COLUMNS:
        v = scores.get(key)
        row[f"{group} / {col}"] = None if v is None or v != v else round(100.0 * float(v), 2)
    head = "| model | " + " | ".join(f"{g}: {c}" for g, c, _ in TABLE3_COLUMNS) + " |"
    rule = "|---" * (len(TABLE3_COLUMNS) + 1) + "|"
    cells = ["-" if v is None else f"{v:.2f}" for v in row.values()]
    md = "\n".join([head, rule, f"| {name} | " + " | ".join(cells) + " |"]) + "\n"
    return {"model": name, "columns": row, "n": scores.get("n", {})}, md


def _answer_rows(rows: list[dict[str, Any]], answers: list[str]) -> list[dict[str, Any]]:
    keep = ("scene", "type", "kind", "n_sources", "question")
    return [{**{k: r.get(k) for k in keep}, "reference": r.get("answer"), "model_output": a}
            for r, a in zip(rows, answers, strict=True)]  # fmt: skip


def _infer(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str]]:
    from .infer import generate_answers
    from .model import load_owl

    source, rows = _questions(args)
    model, tokenizer = load_owl(args.model, dtype=_dtype(args.decoder_dtype))
    answers = generate_answers(model, tokenizer, source, rows, batch_size=args.batch_size,
                               max_new_tokens=args.max_new_tokens, bf16=args.bf16)  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(x) + "\n" for x in _answer_rows(rows, answers))
    (out / "answers.jsonl").write_text(lines, encoding="utf-8")
    return rows, answers


def evaluate_owl(rows: list[dict[str, Any]], answers: list[str], out: str | Path,
                 name: str = "OWL") -> dict[str, Any]:  # fmt: skip
    """Score answers, write ``scores.json``, ``report.json`` and
    ``report.md`` under ``out``; returns the report."""
    from ..spatial.answers import score_qa

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    scores = score_qa(rows, answers)
    report, md = table3_report(scores, name)
    (out / "scores.json").write_text(json.dumps(scores, indent=1, default=str), encoding="utf-8")
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out / "report.md").write_text(md, encoding="utf-8")
    return report


DTYPES = ("float32", "bfloat16", "float16")


def _dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _run_train(args: argparse.Namespace) -> int:
    from .model import DEFAULT_TARGET_MODULES, OwlConfig, build_owl
    from .train import load_recipe, train_owl

    recipe = load_recipe(args.recipe, args.set or ())
    sizes: dict[str, Any] = {}
    if args.model_config is not None:
        try:
            sizes = json.loads(Path(args.model_config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ParameterError(f"--model-config {args.model_config}: {exc}") from exc
    sizes.update(decoder=str(args.decoder), sage=str(args.sage))
    if args.tokenizer:
        sizes["tokenizer"] = str(args.tokenizer)
    if args.target_modules or "target_modules" not in sizes:
        sizes["target_modules"] = list(args.target_modules or DEFAULT_TARGET_MODULES)
    cfg = OwlConfig.from_dict(sizes)
    source = QA_SOURCES["stream" if args.stream else args.qa_source](args, recipe.seed)
    model, tokenizer = build_owl(cfg, dtype=_dtype(args.decoder_dtype), seed=recipe.seed)
    counts = model.check_trainable()
    print(json.dumps({"trainable_parameters": counts}))
    result = train_owl(model, tokenizer, source, recipe, args.out, resume=args.resume,
                       stop_after=args.stop_after, fsdp=args.fsdp)  # fmt: skip
    if int(os.environ.get("RANK", "0")) != 0:
        return 0  # under torchrun, the first process reports
    last = result["history"][-1] if result["history"] else {}
    print(json.dumps({"steps": len(result["history"]), "last": last,
                      "stopped": result["stopped"], "model": result["model_dir"]}))  # fmt: skip
    return 0


def _run_import(args: argparse.Namespace) -> int:
    from .model import save_owl
    from .slam import load_slam_owl

    sizes = {"qformer_heads": args.qformer_heads} if args.qformer_heads else {}
    model, _ = load_slam_owl(args.checkpoint, decoder=args.decoder, sage=str(args.sage),
                             tokenizer=args.tokenizer or "", **sizes)  # fmt: skip
    out = save_owl(model, args.out)
    print(json.dumps({"model": str(out), "config": model.cfg.to_dict(),
                      "trainable_parameters": model.parameter_counts()}))  # fmt: skip
    return 0


def _run_infer(args: argparse.Namespace) -> int:
    rows, _ = _infer(args)
    print(json.dumps({"answers": len(rows), "out": str(Path(args.out) / "answers.jsonl")}))
    return 0


def _run_eval(args: argparse.Namespace) -> int:
    rows, answers = _infer(args)
    report = evaluate_owl(rows, answers, args.out, name=Path(args.model).name or "OWL")
    print(json.dumps(report))
    return 0


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except AglError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


def _add_query_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True, help="dataset with qa.jsonl")
    p.add_argument("--model", type=Path, required=True, help="an OWL model directory")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--split", default="test", help="split asked about (all: --split '')")
    p.add_argument("--types", nargs="*", default=None, choices=("I", "II", "III", "IV"),
                   help="question types (default: all)")  # fmt: skip
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--batch-size", type=int, default=8, help="questions per generation batch")
    p.add_argument("--max-new-tokens", type=int, default=128, help="answer length limit")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast (CUDA)")
    p.add_argument("--decoder-dtype", choices=DTYPES, default="float32",
                   help="dtype of the frozen decoder weights (bfloat16 on a GPU)")  # fmt: skip


def add_parser(ssub: Any) -> None:
    """Register ``spatial owl`` and its actions (train, infer, eval)."""
    p = ssub.add_parser("owl", help="OWL: train, run and score the spatial audio LLM (torch)")
    osub = p.add_subparsers(dest="owl_command", metavar="ACTION", required=True)
    tr = osub.add_parser("train", help="the three-stage curriculum on a dataset",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # fmt: skip
    tr.add_argument("--data", type=Path, required=True,
                    help="dataset with qa.jsonl; with --stream a BRIR bank or a simulated "
                    "dataset")  # fmt: skip
    tr.add_argument("--out", type=Path, required=True, help="run directory")
    tr.add_argument("--qa-source", choices=sorted(QA_SOURCES), default="dataset",
                    help="where the questions come from (--stream: 'stream')")  # fmt: skip
    tr.add_argument("--decoder", required=True, help="transformers causal LM (name or dir)")
    tr.add_argument("--sage", type=Path, required=True, help="SAGE checkpoint (.pt)")
    tr.add_argument("--tokenizer", default=None, help="tokenizer (default: the decoder's)")
    tr.add_argument("--decoder-dtype", choices=DTYPES, default="float32",
                    help="dtype of the frozen decoder weights (bfloat16 on a GPU; the "
                    "trained weights stay float32)")  # fmt: skip
    tr.add_argument("--recipe", type=Path, default=None,
                    help="recipe TOML (default: the paper's, shipped)")  # fmt: skip
    tr.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="recipe override, repeatable (e.g. max_steps=10, "
                    "stage1_single.warmup_steps=100)")  # fmt: skip
    tr.add_argument("--target-modules", nargs="+", default=None,
                    help="decoder modules with LoRA (default: q_proj v_proj)")  # fmt: skip
    tr.add_argument("--model-config", type=Path, default=None,
                    help="JSON of OwlConfig sizes (default: the paper's)")  # fmt: skip
    tr.add_argument("--split", default="train", help="split trained on (all: --split '')")
    tr.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    tr.add_argument("--stop-after", type=int, default=None,
                    help="stop (with a checkpoint) after this many steps of the run")  # fmt: skip
    tr.add_argument("--fsdp", action="store_true",
                    help="under torchrun, shard the model with FSDP2 instead of DDP")  # fmt: skip
    from ..sage.fit_cli import add_scene_options

    add_scene_options(tr.add_argument_group("streamed questions (--stream)"),
                      scenes_help="questions per curriculum stage")  # fmt: skip
    tr.set_defaults(run=_guard(_run_train))
    im = osub.add_parser("import", help="an OWL model directory from the authors' checkpoint "
                         "(SLAM-LLM model.pt or peft adapter)")  # fmt: skip
    im.add_argument("--checkpoint", type=Path, required=True,
                    help="their model.pt, or a directory with it or a peft adapter")  # fmt: skip
    im.add_argument("--decoder", required=True, help="the decoder it was trained on (name or dir)")
    im.add_argument("--sage", type=Path, required=True, help="SAGE checkpoint (.pt)")
    im.add_argument("--tokenizer", default=None, help="tokenizer (default: the decoder's)")
    im.add_argument("--qformer-heads", type=int, default=None,
                    help="Q-Former attention heads (no shape tells; default 12)")  # fmt: skip
    im.add_argument("--out", type=Path, required=True, help="OWL model directory written")
    im.set_defaults(run=_guard(_run_import))
    inf = osub.add_parser("infer", help="answer a dataset's questions (answers.jsonl)")
    _add_query_options(inf)
    inf.set_defaults(run=_guard(_run_infer))
    ev = osub.add_parser("eval", help="answer and score with OWL's metrics (Table 3 report)")
    _add_query_options(ev)
    ev.set_defaults(run=_guard(_run_eval))
