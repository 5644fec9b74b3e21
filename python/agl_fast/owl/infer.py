"""Batched answers of an OWL model to QA rows (:mod:`agl_fast.owl.model`).

Greedy decoding, ``batch_size`` questions at a time, prompts left-padded;
the answers are the decoded continuations without special tokens. The rows
and their features come through :class:`agl_fast.owl.train.QaSource`.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

import torch

from .model import OwlModel, encode_batch
from .train import QaSource

__all__ = ["generate_answers"]

_LOG = logging.getLogger("agl_fast.owl.infer")


def generate_answers(
    model: OwlModel,
    tokenizer: Any,
    source: QaSource,
    rows: list[dict[str, Any]],
    *,
    batch_size: int = 8,
    max_new_tokens: int = 128,
    device: torch.device | None = None,
    bf16: bool = False,
) -> list[str]:
    """One answer (text) per row, in order.

    Parameters
    ----------
    model, tokenizer
        From :func:`agl_fast.owl.model.load_owl` or training.
    source : QaSource
        Gives the rows' ``bat`` features.
    rows : list of dict
        QA rows with ``question``.
    batch_size, max_new_tokens : int
    device : torch.device, optional
        Default: CUDA when present, else the CPU.
    bf16 : bool
        bfloat16 autocast (CUDA only).
    """
    dev = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(dev).eval()
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    answers: list[str] = []
    use_bf16 = bf16 and dev.type == "cuda"
    for start in range(0, len(rows), max(1, batch_size)):
        chunk = rows[start : start + max(1, batch_size)]
        enc = encode_batch(tokenizer, [r["question"] for r in chunk])
        feats = source.features(chunk).to(dev)
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext()
        with autocast:
            ids = model.generate(feats, enc["input_ids"].to(dev), enc["attention_mask"].to(dev),
                                 max_new_tokens=max_new_tokens, eos_token_id=eos,
                                 pad_token_id=pad if pad is not None else eos)  # fmt: skip
        texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
        answers.extend(t.strip() for t in texts)
        _LOG.info("answered %d/%d questions", len(answers), len(rows))
    return answers
