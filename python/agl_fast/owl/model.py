"""OWL: the spatial audio language model on SAGE (transformers + peft).

Three parts, as in the OWL paper (section 5, appendix C.2):

* ``encoder``: the SAGE encoder (:class:`agl_fast.sage.model.SageEncoder`),
  frozen and kept in eval mode (its batch norms never update); its
  frame-level tokens ``[batch, 3 + patches, C]`` (the output of
  :meth:`~agl_fast.sage.model.SageEncoder.encode`) are the audio features;
* ``encoder_projector``: a Q-Former trained from scratch
  (``Blip2QFormerModel``: 8 BERT-style layers, 64 learnable queries that
  cross-attend over the encoder tokens) followed by a linear projection to
  the decoder's embedding size and a layer norm, ``[batch, 64, d_model]``;
* ``llm``: any causal LM of transformers (LLaMA-2/3, Qwen2.5, ...) with LoRA
  adapters (peft), its own weights frozen.

The audio tokens come first, then the authors' instruction template
(:data:`PROMPT_TEMPLATE`) and, in training, the answer and EOS, tokenized
as the authors' loader does (SLAM-LLM's ``BaseDataset``): the prompt is
``tokenizer(prompt)`` with the tokenizer's own special tokens (BOS for
LLaMA-2 and -3, none for Qwen2), the example ``tokenizer(prompt + answer)``
(the answer appended as it is) plus EOS, and the loss, the causal LM
cross-entropy, is on the example's tokens after the prompt's length only.

The attribute names (``encoder``, ``encoder_projector.{query, qformer,
linear, norm}``, ``llm``) follow the authors' SLAM-LLM models, so a state dict
of their trainable weights maps onto :meth:`OwlModel.load_trainable` by name.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..exceptions import ModelStateError, ParameterError
from ..sage.model import SageConfig, SageEncoder, load_checkpoint
from ..torch.checkpoint import read_checkpoint, write_checkpoint

__all__ = [
    "DEFAULT_TARGET_MODULES",
    "PROMPT_TEMPLATE",
    "OwlConfig",
    "OwlModel",
    "QFormerProjector",
    "build_owl",
    "encode_batch",
    "format_prompt",
    "load_owl",
    "load_sage",
    "paper_parameter_count",
]

_LOG = logging.getLogger("agl_fast.owl.model")

#: The instruction template of the authors' loader (the BAT / SLAM-LLM
#: "no input" prompt); the question replaces ``{instruction}``.
PROMPT_TEMPLATE = (
    "Based on the audio you've heard, refer to the instruction and provide a response.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:"
)
#: LoRA on the attention query and value projections: appendix C.2 names
#: them and its 4.1 M trainable parameters are their count for LLaMA-2-7B
#: (r=8: 32 layers x 2 x 8 x (4096 + 4096) = 4.19 M); C.3's "query, key and
#: value" gives 6.3 M, and neither gives its "~0.8%" (docs/owl.md).
DEFAULT_TARGET_MODULES = ("q_proj", "v_proj")
IGNORE_INDEX = -100
CONFIG_FILE = "owl.json"
WEIGHTS_FILE = "trainable.pt"
_TRAINABLE_PREFIXES = ("encoder_projector.",)


def format_prompt(question: str) -> str:
    """The question in :data:`PROMPT_TEMPLATE`."""
    return PROMPT_TEMPLATE.format(instruction=question)


@dataclass
class OwlConfig:
    """Sizes and sources of an OWL model.

    ``decoder`` is a transformers model name or directory (its tokenizer is
    read from there too); ``sage`` a SAGE checkpoint (``{'model': state,
    'model_config': {...}}`` as ``spatial train`` writes, or a released
    Spatial-AST / SAGE state dict with the ViT-B defaults); ``tokenizer`` a
    tokenizer name or directory when it is not the decoder's. The Q-Former
    sizes are ``Blip2QFormerConfig``'s BERT-base defaults with the paper's 8
    layers and 64 queries; ``cross_attention_frequency=2`` (cross-attention
    in every second layer) is BLIP-2's and SLAM-LLM's setting.
    """

    decoder: str = ""
    sage: str = ""
    tokenizer: str = ""
    n_queries: int = 64
    qformer_layers: int = 8
    qformer_hidden: int = 768
    qformer_heads: int = 12
    qformer_intermediate: int = 3072
    cross_attention_frequency: int = 2
    lora_r: int = 8
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: list[str] = field(default_factory=lambda: list(DEFAULT_TARGET_MODULES))
    max_answer_tokens: int = 256

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validate(self) -> None:
        """ParameterError when a size is out of range."""
        sizes = ("n_queries", "qformer_layers", "qformer_hidden", "qformer_heads",
                 "qformer_intermediate", "cross_attention_frequency", "lora_r",
                 "max_answer_tokens")  # fmt: skip
        bad = [k for k in sizes if not isinstance(getattr(self, k), int) or getattr(self, k) < 1]
        if bad:
            raise ParameterError(f"OWL sizes must be positive integers: {bad}")
        if self.qformer_hidden % self.qformer_heads:
            raise ParameterError(f"qformer_hidden {self.qformer_hidden} is not a multiple of "
                                 f"qformer_heads {self.qformer_heads}")  # fmt: skip
        if not self.target_modules or not 0.0 <= self.lora_dropout < 1.0 or self.lora_alpha <= 0:
            raise ParameterError("LoRA needs target modules, 0 <= dropout < 1 and alpha > 0")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OwlConfig:
        if not isinstance(d, dict):
            raise ParameterError(f"an OWL config is a JSON object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ParameterError(f"unknown OWL config keys {unknown}")
        cfg = cls(**d)
        cfg.validate()
        return cfg


class QFormerProjector(nn.Module):
    """Q-Former over encoder tokens, then linear + layer norm to ``d_model``.

    ``forward(x)`` with ``x`` ``[batch, n, encoder_dim]`` returns
    ``[batch, n_queries, d_model]``.
    """

    def __init__(self, cfg: OwlConfig, encoder_dim: int, d_model: int) -> None:
        super().__init__()
        from transformers import Blip2QFormerConfig, Blip2QFormerModel

        qcfg = Blip2QFormerConfig(
            hidden_size=cfg.qformer_hidden,
            num_hidden_layers=cfg.qformer_layers,
            num_attention_heads=cfg.qformer_heads,
            intermediate_size=cfg.qformer_intermediate,
            encoder_hidden_size=encoder_dim,
            cross_attention_frequency=cfg.cross_attention_frequency,
        )
        self.query = nn.Parameter(torch.zeros(1, cfg.n_queries, cfg.qformer_hidden))
        nn.init.normal_(self.query, std=1.0)  # as the authors' projector (the Q-Former normalises)
        self.qformer = Blip2QFormerModel(qcfg)
        self.linear = nn.Linear(cfg.qformer_hidden, d_model)
        self.norm = nn.LayerNorm(d_model, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(x.shape[:2], dtype=torch.long, device=x.device)
        out = self.qformer(
            query_embeds=self.query.expand(x.shape[0], -1, -1),
            encoder_hidden_states=x,
            encoder_attention_mask=mask,
        )
        return self.norm(self.linear(out.last_hidden_state))


class OwlModel(nn.Module):
    """Frozen SAGE + Q-Former projector + causal LM with LoRA (see module docs).

    Parameters
    ----------
    encoder : SageEncoder
        Frozen here (``requires_grad=False``, always in eval mode).
    llm : transformers PreTrainedModel
        A causal LM; wrapped with LoRA (``cfg.lora_*``, ``cfg.target_modules``).
    cfg : OwlConfig
    """

    def __init__(self, encoder: SageEncoder, llm: Any, cfg: OwlConfig) -> None:
        super().__init__()
        from peft import LoraConfig

        cfg.validate()
        self.cfg = cfg
        self.encoder = encoder
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        d_model = int(llm.get_input_embeddings().weight.shape[1])
        self.encoder_projector = QFormerProjector(cfg, encoder.config.embed_dim, d_model)
        lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                          target_modules=list(cfg.target_modules), bias="none",
                          task_type="CAUSAL_LM")  # fmt: skip
        self.llm = _peft(llm, lora)
        self.encoder.eval()

    def train(self, mode: bool = True) -> OwlModel:
        super().train(mode)
        self.encoder.eval()  # frozen: batch-norm statistics stay as loaded
        return self

    def audio_tokens(self, features: torch.Tensor) -> torch.Tensor:
        """Projected audio tokens ``[batch, n_queries, d_model]`` of the
        ``bat`` features ``[batch, 4, frames, n_mels]``."""
        with torch.no_grad():
            h = self.encoder.encode(features)
        return self.encoder_projector(h)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        emb: torch.Tensor = self.llm.get_input_embeddings()(ids)
        return emb

    def forward(
        self,
        features: torch.Tensor,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> Any:
        """Decoder output on ``[audio tokens, text]``; with ``labels``
        ``[batch, n]`` (IGNORE_INDEX where no loss) ``.loss`` is the mean
        cross-entropy of the labelled next tokens. ``.logits`` is
        ``[batch, n_queries + n, vocab]``."""
        audio = self.audio_tokens(features)
        text = self._embed(input_ids)
        embeds = torch.cat([audio.to(text.dtype), text], dim=1)
        ones = torch.ones(audio.shape[:2], dtype=attention_mask.dtype, device=audio.device)
        mask = torch.cat([ones, attention_mask], dim=1)
        full = None
        if labels is not None:
            ignore = torch.full(audio.shape[:2], IGNORE_INDEX, dtype=labels.dtype,
                                device=labels.device)  # fmt: skip
            full = torch.cat([ignore, labels], dim=1)
        return self.llm(inputs_embeds=embeds, attention_mask=mask, labels=full)

    @torch.no_grad()
    def generate(
        self,
        features: torch.Tensor,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        max_new_tokens: int = 128,
        eos_token_id: int | None = None,
        pad_token_id: int | None = None,
    ) -> torch.Tensor:
        """Greedy continuation ids ``[batch, <= max_new_tokens]`` of left-padded
        prompts (:func:`encode_batch` with ``answers=None``); the padding
        stays in front of the audio tokens."""
        audio = self.audio_tokens(features)
        text = self._embed(input_ids)
        b, q = audio.shape[:2]
        lengths = attention_mask.sum(1)
        n = q + input_ids.shape[1]
        embeds = torch.zeros(b, n, text.shape[2], dtype=text.dtype, device=text.device)
        mask = torch.zeros(b, n, dtype=attention_mask.dtype, device=text.device)
        for i in range(b):
            k = int(lengths[i])
            row = torch.cat([audio[i].to(text.dtype), text[i, input_ids.shape[1] - k :]])
            embeds[i, n - row.shape[0] :] = row
            mask[i, n - row.shape[0] :] = 1
        out: torch.Tensor = self.llm.generate(
            inputs_embeds=embeds, attention_mask=mask, max_new_tokens=max_new_tokens,
            do_sample=False, eos_token_id=eos_token_id, pad_token_id=pad_token_id,
        )  # fmt: skip
        return out

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """The trainable weights (Q-Former, projection, LoRA) by name, whole
        (on CPU) where FSDP shards them: then every process must call it."""
        out = {}
        for n, p in self.named_parameters():
            if p.requires_grad:
                full = p.full_tensor() if hasattr(p, "full_tensor") else p
                out[n] = full.detach().cpu().clone()
        return out

    def load_trainable(self, state: dict[str, torch.Tensor]) -> None:
        """Load :meth:`trainable_state` output (``module.`` prefixes dropped);
        every trainable weight must be present, and nothing else."""
        state = {k.removeprefix("module."): v for k, v in state.items()}
        own = {n for n, p in self.named_parameters() if p.requires_grad}
        missing, unknown = sorted(own - set(state)), sorted(set(state) - own)
        if missing or unknown:
            raise ModelStateError(f"trainable state does not match the model: missing "
                                  f"{missing[:5]}, unexpected {unknown[:5]}")  # fmt: skip
        params = dict(self.named_parameters())
        with torch.no_grad():
            for k, v in state.items():
                if params[k].shape != v.shape:
                    raise ModelStateError(f"{k}: shape {tuple(v.shape)}, model has "
                                          f"{tuple(params[k].shape)}")  # fmt: skip
                params[k].copy_(v)

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters by part and in total, and all parameters."""
        counts = {"projector": 0, "lora": 0, "other": 0}
        for n, p in self.named_parameters():
            if p.requires_grad:
                counts[_part(n)] += p.numel()
        counts["trainable"] = counts["projector"] + counts["lora"] + counts["other"]
        counts["total"] = sum(p.numel() for p in self.parameters())
        return counts

    def check_trainable(self) -> dict[str, int]:
        """:meth:`parameter_counts`, after checking that only the Q-Former,
        projection and LoRA weights are trainable (ModelStateError if not)."""
        bad = [n for n, p in self.named_parameters() if p.requires_grad and _part(n) == "other"]
        if bad:
            raise ModelStateError(
                f"weights outside the projector and LoRA are trainable: {bad[:5]}"
            )
        counts = self.parameter_counts()
        if counts["projector"] == 0 or counts["lora"] == 0:
            raise ModelStateError(f"no trainable projector or LoRA weights: {counts}")
        return counts


def _peft(llm: Any, lora: Any) -> Any:
    """``get_peft_model`` without transformers' deprecation notice on
    ``is_gradient_checkpointing`` (raised inside peft, not actionable here)."""
    import warnings

    from peft import get_peft_model

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                category=FutureWarning)  # fmt: skip
        return get_peft_model(llm, lora)


def _part(name: str) -> str:
    if name.startswith(_TRAINABLE_PREFIXES):
        return "projector"
    if ".lora_A." in name or ".lora_B." in name:
        return "lora"
    return "other"


def _token_ids(tokenizer: Any, text: str) -> list[int]:
    """``tokenizer.encode(text)``: with the tokenizer's own special tokens."""
    return list(tokenizer(text)["input_ids"])


def encode_batch(
    tokenizer: Any,
    questions: list[str],
    answers: list[str] | None = None,
    *,
    max_answer_tokens: int = 256,
) -> dict[str, torch.Tensor]:
    """Token ids of prompts (and answers) for :class:`OwlModel`.

    With ``answers``: ``tokenizer(prompt + answer) + EOS`` right-padded,
    with ``labels`` (the ids after the length of ``tokenizer(prompt)``, cut
    to ``max_answer_tokens``, and EOS; IGNORE_INDEX elsewhere), as the
    authors' loader. Without: ``tokenizer(prompt)`` left-padded for
    generation. Returns ``input_ids``, ``attention_mask`` (``[batch, n]``)
    and, with answers, ``labels``.
    """
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ParameterError("the tokenizer has neither a pad nor an EOS token")
    prompts = [_token_ids(tokenizer, format_prompt(q)) for q in questions]
    if answers is None:
        n = max(len(p) for p in prompts)
        ids = [[pad] * (n - len(p)) + p for p in prompts]
        mask = [[0] * (n - len(p)) + [1] * len(p) for p in prompts]
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
    if tokenizer.eos_token_id is None:
        raise ParameterError("training needs a tokenizer with an EOS token")
    seqs, labs = [], []
    for p, q, a in zip(prompts, questions, answers, strict=True):
        full = _token_ids(tokenizer, format_prompt(q) + a)
        ans = [*full[len(p) :][:max_answer_tokens], tokenizer.eos_token_id]
        seqs.append(full[: len(p)] + ans)
        labs.append([IGNORE_INDEX] * len(p) + ans)
    n = max(len(s) for s in seqs)
    return {
        "input_ids": torch.tensor([s + [pad] * (n - len(s)) for s in seqs]),
        "attention_mask": torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in seqs]),
        "labels": torch.tensor([lb + [IGNORE_INDEX] * (n - len(lb)) for lb in labs]),
    }


def load_sage(path: str | Path) -> SageEncoder:
    """A SAGE encoder from a checkpoint (see :class:`OwlConfig`)."""
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"no SAGE checkpoint at {p}")
    state = read_checkpoint(p, own_format=False)  # also OWL's released SAGE
    try:
        cfg = SageConfig(**state["model_config"]) if "model_config" in state else SageConfig()
    except TypeError as exc:
        raise ModelStateError(f"{p}: bad model_config: {exc}") from exc
    model = SageEncoder(cfg)
    load_checkpoint(model, state)
    return model.eval()


def build_owl(
    cfg: OwlConfig, *, dtype: torch.dtype | None = None, seed: int = 0
) -> tuple[OwlModel, Any]:
    """A new OWL model (decoder and tokenizer from ``cfg.decoder``, SAGE from
    ``cfg.sage``; projector and LoRA initialised from ``seed``) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not cfg.decoder or not cfg.sage:
        raise ParameterError("an OWL model needs a decoder and a SAGE checkpoint")
    encoder = load_sage(cfg.sage)
    try:
        tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer or cfg.decoder)
        llm = AutoModelForCausalLM.from_pretrained(cfg.decoder, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ParameterError(f"cannot load the decoder {cfg.decoder!r}: {exc}") from exc
    torch.manual_seed(seed)
    return OwlModel(encoder, llm, cfg), tokenizer


def save_owl(
    model: OwlModel, out: str | Path, state: dict[str, torch.Tensor] | None = None
) -> Path:
    """Write ``owl.json`` (the config) and ``trainable.pt`` (the trainable
    weights: ``state``, default :meth:`OwlModel.trainable_state`) under
    ``out``; the decoder and SAGE are referenced, not copied."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(json.dumps(model.cfg.to_dict(), indent=1), encoding="utf-8")
    write_checkpoint(model.trainable_state() if state is None else state, out / WEIGHTS_FILE)
    return out


def load_owl(path: str | Path, *, dtype: torch.dtype | None = None) -> tuple[OwlModel, Any]:
    """An OWL model saved by :func:`save_owl` (or a training run's
    directory) and its tokenizer."""
    p = Path(path)
    if (p / "owl").is_dir() and not (p / CONFIG_FILE).is_file():
        p = p / "owl"
    if not (p / CONFIG_FILE).is_file() or not (p / WEIGHTS_FILE).is_file():
        raise ParameterError(f"no OWL model in {p} ({CONFIG_FILE} and {WEIGHTS_FILE} expected)")
    try:
        raw = json.loads((p / CONFIG_FILE).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ParameterError(f"unreadable {p / CONFIG_FILE}: {exc}") from exc
    cfg = OwlConfig.from_dict(raw)
    state = read_checkpoint(p / WEIGHTS_FILE)
    model, tokenizer = build_owl(cfg, dtype=dtype)
    model.load_trainable(state)
    return model.eval(), tokenizer


#: LLaMA-2-7B's sizes (its released config.json).
LLAMA2_7B: dict[str, Any] = {
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
    "max_position_embeddings": 4096,
}  # fmt: skip


def paper_parameter_count(target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES) -> dict:
    """Parameter counts of OWL at the paper's sizes, from meta-device modules
    (no weight is allocated): LLaMA-2-7B with LoRA r=8, alpha=32 on
    ``target_modules``, the Q-Former projector over a ViT-B SAGE (768) and
    the SAGE encoder. Returns ``lora``, ``projector``, ``trainable``,
    ``decoder`` (LLaMA-2-7B without LoRA), ``encoder`` and ``total`` counts."""
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = OwlConfig(target_modules=list(target_modules))
    with torch.device("meta"):
        llm = AutoModelForCausalLM.from_config(LlamaConfig(**LLAMA2_7B))
        n_decoder = sum(p.numel() for p in llm.parameters())
        peft = _peft(llm, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha,
                                              lora_dropout=cfg.lora_dropout,
                                              target_modules=list(target_modules)))  # fmt: skip
        n_lora = sum(p.numel() for n, p in peft.named_parameters() if _part(n) == "lora")
        proj = QFormerProjector(cfg, SageConfig().embed_dim, LLAMA2_7B["hidden_size"])
        n_proj = sum(p.numel() for p in proj.parameters())
        n_enc = sum(p.numel() for p in SageEncoder(SageConfig()).parameters())
    total = n_decoder + n_lora + n_proj + n_enc
    return {"lora": n_lora, "projector": n_proj, "trainable": n_lora + n_proj,
            "decoder": n_decoder, "encoder": n_enc, "total": total}  # fmt: skip
