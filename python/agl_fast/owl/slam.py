"""The authors' OWL checkpoints (SLAM-LLM layout) loaded into :class:`~.owl.OwlModel`.

What the authors' training writes (``save_model_checkpoint_peft`` of their
SLAM-LLM copy): a directory ``{model_name}_epoch_{E}_step_{S}/`` holding one
``model.pt``, a ``torch.save`` of the trainable weights only, named as
their ``slam_model`` names them (the DDP wrapper taken off first):

* ``encoder_projector.query`` ``[1, 64, 768]``, the Q-Former
  ``encoder_projector.qformer.*`` (transformers' ``Blip2QFormerModel``,
  ``Blip2QFormerConfig`` defaults with 8 layers), ``encoder_projector.linear.*``
  and ``encoder_projector.norm.*``;
* the LoRA weights inside the peft-wrapped decoder,
  ``llm.base_model.model.model.layers.{i}.self_attn.{q,v}_proj.lora_{A,B}.default.weight``
  (their default LoRA: r=64, alpha=128, dropout 0.05 on q_proj and v_proj).

Their inference also accepts a peft adapter directory (``peft_ckpt``:
``adapter_config.json`` and ``adapter_model.safetensors`` / ``.bin``, keys
``base_model.model.model.layers.{i}...lora_A.weight``). Both are read here;
:data:`KEY_MAP` is the one table from their names to agl-fast's. agl-fast
uses the same attribute names, so the map mostly checks: it drops the
``module.`` prefix, the text feed-forward of every Q-Former layer
(``intermediate.*`` / ``output.*``, which older transformers created and
the query path never uses) and their frozen SAGE (``encoder.*``; ours is
given), and names the adapter file's LoRA weights as peft's model does.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import torch

from ..exceptions import ModelStateError, ParameterError
from ..torch.checkpoint import read_checkpoint
from .model import OwlConfig, OwlModel, build_owl

__all__ = ["AUTHORS_LORA", "KEY_MAP", "WEIGHTS", "load_slam_owl", "map_slam_keys"]

_LOG = logging.getLogger("agl_fast.owl.slam")

#: The authors' weight file in a checkpoint directory.
WEIGHTS = "model.pt"
#: Their peft adapter files.
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")
#: Their default LoRA (``PeftConfig`` of ``seld_config.py``).
AUTHORS_LORA = {"lora_r": 64, "lora_alpha": 128, "lora_dropout": 0.05}

#: Their key pattern -> agl-fast's (a ``re.sub`` replacement), None: dropped.
#: The first matching row wins.
KEY_MAP: tuple[tuple[str, str | None], ...] = (
    (r"^encoder_projector\.qformer\.encoder\.layer\.\d+\.(intermediate|output)\.", None),
    (r"^encoder_projector\.", r"encoder_projector."),
    (
        r"^llm\.base_model\.model\.(.+\.lora_[AB])\.default\.weight$",
        r"llm.base_model.model.\1.default.weight",
    ),
    (r"^base_model\.model\.(.+\.lora_[AB])\.weight$", r"llm.base_model.model.\1.default.weight"),
    (r"^encoder\.", None),
)


def map_slam_keys(state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Their state dict in agl-fast's names (``module.`` prefixes dropped),
    and the keys dropped by :data:`KEY_MAP`; ModelStateError for a key no
    row matches or a value that is not a tensor."""
    out: dict[str, torch.Tensor] = {}
    dropped, unknown = [], []
    for key, value in state.items():
        k = re.sub(r"^(module\.)+", "", str(key))
        for pattern, repl in KEY_MAP:
            if re.match(pattern, k):
                if repl is None:
                    dropped.append(k)
                else:
                    out[re.sub(pattern, repl, k)] = value
                break
        else:
            unknown.append(k)
    bad = [k for k, v in out.items() if not isinstance(v, torch.Tensor)]
    if unknown or bad:
        raise ModelStateError(f"not an OWL (SLAM-LLM) checkpoint: unknown keys {unknown[:5]}, "
                              f"non-tensors {bad[:5]}")  # fmt: skip
    if dropped:
        _LOG.info("dropped %d keys the model does not use (first: %s)", len(dropped), dropped[0])
    return out, dropped


def _read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The weights of ``path`` (``model.pt``, a directory holding it and / or
    a peft adapter) and the adapter's config ({} without one)."""
    files = [path] if path.is_file() else [path / WEIGHTS] if (path / WEIGHTS).is_file() else []
    adapter: dict[str, Any] = {}
    if path.is_dir() and (path / ADAPTER_CONFIG).is_file():
        try:
            adapter = json.loads((path / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ParameterError(f"unreadable {path / ADAPTER_CONFIG}: {exc}") from exc
        files += [path / f for f in ADAPTER_FILES if (path / f).is_file()][:1]
    if not files:
        raise ParameterError(f"no {WEIGHTS} or peft adapter in {path}")
    state: dict[str, Any] = {}
    for f in files:
        if f.suffix == ".safetensors":
            from safetensors import SafetensorError
            from safetensors.torch import load_file

            try:
                part: Any = load_file(str(f))
            except (SafetensorError, OSError) as exc:
                raise ParameterError(f"unreadable {f}: {exc}") from exc
        else:
            part = read_checkpoint(f, own_format=False)
        if not isinstance(part, dict):
            raise ModelStateError(f"{f} does not hold a state dict")
        state.update(part)
    return state, adapter


def _sizes(state: dict[str, torch.Tensor], adapter: dict[str, Any]) -> dict[str, Any]:
    """OwlConfig sizes read off the weights' shapes (and the adapter config)."""
    try:
        q = state["encoder_projector.query"]
        layers = {
            int(m.group(1))
            for k in state
            if (m := re.match(r"encoder_projector\.qformer\.encoder\.layer\.(\d+)\.", k))
        }
        cross = sorted(
            {
                int(m.group(1))
                for k in state
                if (
                    m := re.match(
                        r"encoder_projector\.qformer\.encoder\.layer\.(\d+)\.crossattention\.", k
                    )
                )
            }
        )
        inter = state["encoder_projector.qformer.encoder.layer.0.intermediate_query.dense.weight"]
        lora_a = next(v for k, v in state.items() if k.endswith(".lora_A.default.weight"))
    except (KeyError, StopIteration) as exc:
        raise ModelStateError(f"the checkpoint lacks the projector or LoRA weights: {exc}") \
            from exc  # fmt: skip
    targets = sorted({m.group(1) for k in state if (m := re.search(r"\.(\w+)\.lora_A\.", k))})
    sizes = {**AUTHORS_LORA, "n_queries": int(q.shape[1]), "qformer_hidden": int(q.shape[2]),
             "qformer_layers": len(layers), "qformer_intermediate": int(inter.shape[0]),
             "cross_attention_frequency": cross[1] - cross[0] if len(cross) > 1
             else max(1, len(layers)),
             "lora_r": int(lora_a.shape[0]), "target_modules": targets}  # fmt: skip
    for ours, theirs in (("lora_alpha", "lora_alpha"), ("lora_dropout", "lora_dropout")):
        if theirs in adapter:
            sizes[ours] = adapter[theirs]
    return sizes


def load_slam_owl(
    path: str | Path, *, decoder: str, sage: str, tokenizer: str = "",
    dtype: torch.dtype | None = None, **sizes: Any,
) -> tuple[OwlModel, Any]:  # fmt: skip
    """An OWL model from the authors' checkpoint (see the module docs) on a
    decoder and a SAGE checkpoint given here, and its tokenizer.

    ``path`` is their ``model.pt`` or a directory with it and / or a peft
    adapter. The Q-Former and LoRA sizes are read off the weights (LoRA
    alpha: the adapter config's, else their default 128); ``sizes``
    (:class:`~.owl.OwlConfig` fields, e.g. ``qformer_heads``, which no shape
    tells) override them. Every trainable weight of the model must be in
    the file (:meth:`~.owl.OwlModel.load_trainable`).
    """
    p = Path(path)
    if not p.exists():
        raise ParameterError(f"no OWL checkpoint at {p}")
    raw, adapter = _read(p)
    state, _ = map_slam_keys(raw)
    cfg = OwlConfig.from_dict({**_sizes(state, adapter), **sizes, "decoder": str(decoder),
                               "sage": str(sage), "tokenizer": str(tokenizer)})  # fmt: skip
    model, tok = build_owl(cfg, dtype=dtype)
    model.load_trainable(state)
    return model.eval(), tok
