"""The providers by name: :func:`make_provider` picks the protocol of a
provider of :data:`CAPABILITIES` (:mod:`.protocol`: the base class,
capabilities and errors) and builds it; the protocols are
:mod:`.openai_compat` (chat completions), :mod:`.gemini` (Gemini's REST API)
and :mod:`.hf_backend` (local transformers models).

Each provider turns (model, prompt, optional audio, sampling parameters) into
one HTTP exchange and returns a :class:`~.protocol.Reply`, or raises
:class:`~.protocol.ProviderError` saying whether a retry can help. Keys
travel only in request headers; every error message is scrubbed of the key.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import ParameterError
from .gemini import Gemini
from .openai_compat import OpenAICompatible
from .protocol import CAPABILITIES, PROVIDERS, Provider

__all__ = ["CAPABILITIES", "PROVIDERS", "Gemini", "OpenAICompatible", "make_provider"]


def make_provider(name: str, key: str | None, **kw: Any) -> Provider:
    """The provider object for ``name`` (see :data:`CAPABILITIES`)."""
    if name not in CAPABILITIES:
        raise ParameterError(f"unknown provider {name!r}; allowed: {', '.join(PROVIDERS)}")
    protocol = CAPABILITIES[name].protocol
    if protocol == "transformers":
        from .hf_backend import TransformersProvider

        return TransformersProvider(name, key, **kw)
    cls = Gemini if protocol == "gemini" else OpenAICompatible
    return cls(name, key, **kw)
