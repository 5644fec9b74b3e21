"""The model registry: the AGL1K paper's 16 models (Table 1), each with its
route and the generation settings the AGL1K reference code used.

A :class:`ModelSpec` names a model once: its registry name (what ``query
--model`` and ``agl-fast models show`` take), its row label in Table 1, the
route that reaches it (a provider of :mod:`agl_fast.alm.providers`: an API
such as ``openrouter`` or ``dashscope``, an OpenAI-compatible ``vllm`` /
SGLang server, or ``transformers``, in-process), the model id at that route
(API id or Hugging Face repository) and its :class:`Generation` settings.

Where the settings come from: the closed models and Qwen3-Omni were called
through their APIs "with default settings" (the paper, section 4.1), so
their entries send no sampling parameter and use the ``agl1k`` protocol (the
original file, as the reference code sent it). The open models were run
in-process by the reference code, each with its own ``generate`` call:
Qwen2.5-Omni 2,048 new tokens greedy with its own system prompt, Phi-4-MM
512 greedy, Gemma-3n 256 greedy with a system prompt, MiniCPM-o sampling at
temperature 0.3 up to 2,048 tokens, Kimi-Audio text temperature 0 (top-k 5)
and audio temperature 0.8 (top-k 10), MiMo-Audio with and without thinking.

A plugin (:mod:`agl_fast.plugins`) adds a model with :func:`register_model`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .._internal.args import flag
from ..exceptions import ParameterError
from ..plugins import load_plugins
from .options import ROUTES

__all__ = [
    "ROUTES",
    "Generation",
    "ModelSpec",
    "get_model",
    "is_registered",
    "model_names",
    "models",
    "register_model",
]

_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")


@dataclass(frozen=True)
class Generation:
    """Generation settings of one model (None: the route's default).

    Attributes
    ----------
    max_tokens : int or None
        New tokens at most (``max_new_tokens`` in-process, ``max_tokens``
        in a request).
    temperature : float or None
        0 is greedy decoding; above 0 samples at that temperature.
    top_p, top_k : float, int or None
        Nucleus and top-k sampling.
    extra : dict
        Further fields, sent or recorded as they are (``enable_thinking``,
        Kimi-Audio's audio sampling, MiMo-Audio's ``thinking``).
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        """The settings as request parameters (unset ones left out)."""
        out: dict[str, Any] = {}
        for k in ("max_tokens", "temperature", "top_p", "top_k"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        out.update(self.extra)
        return out

    def describe(self) -> str:
        """One line: ``2048 new tokens, greedy`` or ``provider defaults``."""
        parts = []
        if self.max_tokens is not None:
            parts.append(f"{self.max_tokens} new tokens")
        if self.temperature is not None:
            parts.append("greedy" if self.temperature == 0 else f"temperature {self.temperature:g}")
        if self.top_p is not None:
            parts.append(f"top-p {self.top_p:g}")
        if self.top_k is not None:
            parts.append(f"top-k {self.top_k}")
        parts += [f"{k}={v}" for k, v in self.extra.items()]
        return ", ".join(parts) if parts else "provider defaults"


@dataclass(frozen=True)
class ModelSpec:
    """One model of the registry.

    Attributes
    ----------
    name : str
        Registry name (lower case, e.g. ``qwen2.5-omni``).
    display : str
        The model's row label in Table 1 of the paper.
    open_weights : bool
        Open-source group of Table 1.
    route : str
        How ``query --model NAME`` reaches it: one of :data:`ROUTES`.
    model_id : str
        The id at that route: API model id or Hugging Face repository.
    generation : Generation
        Settings the reference code used.
    protocol : str
        ``agl1k`` (the original file, no sampling parameter: the API
        models) or ``prepared``.
    system_prompt : str or None
        System message the reference code sent (in-process models).
    needs : str or None
        What runs the model beyond transformers' own classes (its own
        modelling code); None when transformers ships the architecture.
    alternatives : tuple of str
        Other routes that serve the architecture (e.g. ``vllm``).
    notes : str
        Anything a user must know to reproduce the row.
    """

    name: str
    display: str
    open_weights: bool
    route: str
    model_id: str
    generation: Generation = field(default_factory=Generation)
    protocol: str = "prepared"
    system_prompt: str | None = None
    needs: str | None = None
    alternatives: tuple[str, ...] = ()
    notes: str = ""

    def params(self) -> dict[str, Any]:
        """The generation settings as request parameters."""
        return self.generation.params()

    def as_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (``models show --json``)."""
        return {
            "name": self.name,
            "display": self.display,
            "open_weights": self.open_weights,
            "route": self.route,
            "model_id": self.model_id,
            "generation": self.params(),
            "generation_text": self.generation.describe(),
            "protocol": self.protocol,
            "system_prompt": self.system_prompt,
            "needs": self.needs,
            "alternatives": list(self.alternatives),
            "notes": self.notes,
        }


_MODELS: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec, *, replace: bool = False) -> ModelSpec:
    """Add ``spec`` to the registry.

    Raises
    ------
    ParameterError
        The name is taken (unless ``replace``) or malformed, or the route or
        protocol is unknown.
    """
    if not isinstance(spec, ModelSpec):
        raise ParameterError(f"register_model takes a ModelSpec, got {type(spec).__name__}")
    if not _NAME.match(spec.name):
        raise ParameterError(f"a model name is lower case letters, digits, '.', '-': {spec.name!r}")
    for r in (spec.route, *spec.alternatives):
        if r not in ROUTES:
            raise ParameterError(f"model {spec.name!r}: unknown route {r!r}; allowed: {ROUTES}")
    if spec.protocol not in ("agl1k", "prepared"):
        raise ParameterError(f"model {spec.name!r}: protocol must be 'agl1k' or 'prepared'")
    if spec.name in _MODELS and not flag("replace", replace):
        raise ParameterError(f"a model named {spec.name!r} is registered already")
    _MODELS[spec.name] = spec
    return spec


def models() -> list[ModelSpec]:
    """Every registered model, in registration order (Table 1's order)."""
    load_plugins()
    return list(_MODELS.values())


def model_names() -> list[str]:
    """The registered names, in registration order."""
    return [m.name for m in models()]


def is_registered(name: object) -> bool:
    """Whether ``name`` is a registry name (case-insensitive)."""
    load_plugins()
    return isinstance(name, str) and name.lower() in _MODELS


def get_model(name: str) -> ModelSpec:
    """The model called ``name`` (case-insensitive).

    Raises
    ------
    ParameterError
        No such model; the message lists the registered ones.
    """
    load_plugins()
    found = _MODELS.get(name.lower()) if isinstance(name, str) else None
    if found is None:
        raise ParameterError(f"unknown model {name!r}; registered: {', '.join(_MODELS)}")
    return found


# --- the paper's 16 models (Table 1, in its order) ---------------------------

_API_NOTE = (
    "called through OpenRouter by the paper with default settings; the reference code "
    "sends the original MP3 as base64 input_audio"
)
for _name, _display, _id in (
    ("gemini-3-pro", "Gemini 3 Pro", "google/gemini-3-pro-preview"),
    ("gemini-2.5-pro", "Gemini 2.5 Pro", "google/gemini-2.5-pro"),
    ("gemini-2.5-flash", "Gemini 2.5 Flash", "google/gemini-2.5-flash"),
    ("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", "google/gemini-2.5-flash-lite"),
    ("gemini-2.0-flash-thinking", "Gemini 2.0 Flash-Thinking",
     "google/gemini-2.0-flash-thinking-exp:free"),
    ("gemini-2.0-flash", "Gemini 2.0 Flash", "google/gemini-2.0-flash-001"),
    ("gemini-2.0-flash-lite", "Gemini 2.0 Flash-Lite", "google/gemini-2.0-flash-lite-001"),
    ("gpt-4o-audio", "GPT-4o Audio Preview", "openai/gpt-4o-audio-preview"),
):  # fmt: skip
    register_model(
        ModelSpec(_name, _display, False, "openrouter", _id, protocol="agl1k", notes=_API_NOTE)
    )

register_model(
    ModelSpec(
        "qwen3-omni", "Qwen3-Omni", True, "dashscope", "qwen3-omni-flash",
        Generation(extra={"enable_thinking": False}), protocol="agl1k",
        alternatives=("vllm",),
        notes="called through Alibaba Cloud Bailian (DashScope) as qwen3-omni-flash, streamed, "
        "text only, thinking off; the open weights are Qwen/Qwen3-Omni-30B-A3B-Instruct",
    )
)  # fmt: skip
register_model(
    ModelSpec(
        "qwen2.5-omni", "Qwen2.5-Omni", True, "transformers", "Qwen/Qwen2.5-Omni-7B",
        Generation(max_tokens=2048, temperature=0.0),
        system_prompt="You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, "
        "capable of perceiving auditory and visual inputs, as well as generating text and speech.",
        alternatives=("vllm",),
        notes="the thinker generates text only (the reference code disables the talker)",
    )
)  # fmt: skip
register_model(
    ModelSpec(
        "phi-4-mm", "Phi-4-MM1", True, "transformers", "microsoft/Phi-4-multimodal-instruct",
        Generation(max_tokens=512, temperature=0.0), alternatives=("vllm",),
        notes="the reference code ran the hub's remote code with the prompt "
        "<|user|><|audio_1|>PROMPT<|end|><|assistant|>; in-process agl-fast uses transformers' "
        "native Phi4MultimodalForCausalLM, which loads a checkpoint in its own layout",
    )
)  # fmt: skip
register_model(
    ModelSpec(
        "kimi-audio", "Kimi-Audio", True, "transformers", "moonshotai/Kimi-Audio-7B-Instruct",
        Generation(temperature=0.0, top_k=5, extra={
            "audio_temperature": 0.8, "audio_top_k": 10, "text_repetition_penalty": 1.0,
            "text_repetition_window_size": 16, "audio_repetition_penalty": 1.0,
            "audio_repetition_window_size": 64}),
        needs="the kimia_infer package of github.com/MoonshotAI/Kimi-Audio and the "
        "THUDM/glm-4-voice-tokenizer (its own inference code, not a transformers class)",
        notes="text output only; the prompt goes first, then the audio",
    )
)  # fmt: skip
register_model(
    ModelSpec(
        "gemma-3n-e4b-it", "Gemma-3n-E4B-it", True, "transformers", "google/gemma-3n-E4B-it",
        Generation(max_tokens=256, temperature=0.0),
        system_prompt="You are a helpful assistant for geographic audio localization.",
        alternatives=("vllm",),
        notes="audio resampled to the processor's rate, mono",
    )
)  # fmt: skip
register_model(
    ModelSpec(
        "minicpm-o-2.6", "MiniCPM-o-2.6", True, "vllm", "openbmb/MiniCPM-o-2_6",
        Generation(max_tokens=2048, temperature=0.3),
        needs="its own modelling code (trust_remote_code), which agl-fast does not run in-process",
        alternatives=("transformers",),
        notes="sampling at temperature 0.3; serve it with vLLM (--trust-remote-code)",
    )
)  # fmt: skip
for _name, _display, _think in (
    ("mimo-audio", "Mimo-Audio", False),
    ("mimo-audio-think", "Mimo-Audio-Think", True),
):
    register_model(
        ModelSpec(
            _name, _display, True, "transformers", "XiaomiMiMo/MiMo-Audio-7B-Instruct",
            Generation(extra={"thinking": _think}),
            needs="the MiMo-Audio repository's inference code (github.com/XiaomiMiMo/MiMo-Audio, "
            "src/mimo_audio) and XiaomiMiMo/MiMo-Audio-Tokenizer",
            notes="audio_understanding_sft with thinking " + ("on" if _think else "off"),
        )
    )  # fmt: skip
