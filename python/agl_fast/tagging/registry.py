"""The tagger registry: each tagger a name, a factory and what it needs.

``curate --tag NAME``, :func:`agl_fast.tagging.tag_table` by name and the
batch configuration all look taggers up here. A plugin (see
:mod:`agl_fast.plugins`) adds one with :func:`register_tagger`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._internal.args import flag
from ..exceptions import ParameterError
from ..plugins import load_plugins
from .tagger import Tagger

__all__ = ["TaggerSpec", "build_tagger", "get_tagger", "register_tagger", "tagger_names"]


@dataclass(frozen=True)
class TaggerSpec:
    """A registered tagger.

    Attributes
    ----------
    name : str
        Registry key; the pipeline's columns are prefixed with it.
    factory : callable
        ``factory(model, **options) -> Tagger``; ``model`` is the model
        file (``None`` when the tagger ships its own).
    needs_model : bool
        Whether ``model`` must be given (``curate --tag-model``).
    help : str
        One line for ``--help``.
    curate_options : tuple of str
        The options ``curate`` passes on: any of ``"fraction_scheme"``,
        ``"device"``, ``"allow_cpu_fallback"``.
    """

    name: str
    factory: Callable[..., Tagger]
    needs_model: bool
    help: str
    curate_options: tuple[str, ...] = ("fraction_scheme",)


_TAGGERS: dict[str, TaggerSpec] = {}


def register_tagger(spec: TaggerSpec, *, replace: bool = False) -> TaggerSpec:
    """Add ``spec`` to the registry.

    Raises
    ------
    ParameterError
        The name is taken (unless ``replace``) or not an identifier.
    """
    if not isinstance(spec, TaggerSpec):
        raise ParameterError(f"register_tagger takes a TaggerSpec, got {type(spec).__name__}")
    if not spec.name.isidentifier():
        raise ParameterError(f"a tagger name must be an identifier, got {spec.name!r}")
    replace = flag("replace", replace)
    if spec.name in _TAGGERS and not replace:
        raise ParameterError(f"a tagger named {spec.name!r} is registered already")
    _TAGGERS[spec.name] = spec
    return spec


def tagger_names() -> list[str]:
    """Names of the registered taggers (plugins included), in registration order."""
    load_plugins()
    return list(_TAGGERS)


def get_tagger(name: str) -> TaggerSpec:
    """The tagger called ``name``; :class:`ParameterError` listing the
    registered ones when there is none."""
    load_plugins()
    spec = _TAGGERS.get(name) if isinstance(name, str) else None
    if spec is None:
        names = [repr(n) for n in _TAGGERS]
        choices = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise ParameterError(f"tagger must be {choices}, got {name!r}")
    return spec


def build_tagger(name: str, model: str | Path | bytes | None = None, **options: Any) -> Tagger:
    """Build the tagger called ``name`` with ``options`` (its class's
    keyword arguments).

    Raises
    ------
    ParameterError
        Unknown name, or a model-file tagger without ``model``.
    """
    spec = get_tagger(name)
    if spec.needs_model and model is None:
        raise ParameterError(f"tagger={name!r} needs model=<exported .onnx file>")
    return spec.factory(model, **options)


def _speech(model: Any, **options: Any) -> Tagger:
    from .speech import SpeechTagger

    if model is not None:
        options.setdefault("model_path", model)
    return SpeechTagger(**options)


def _efficientat(model: Any, **options: Any) -> Tagger:
    from .tagger import EfficientATTagger

    return EfficientATTagger(model, **options)


register_tagger(TaggerSpec("speech", _speech, False, "Silero VAD speech fraction (any machine)"))
register_tagger(
    TaggerSpec(
        "efficientat", _efficientat, True,
        "AudioSet classes with an exported EfficientAT mn model (--tag-model)",
        ("fraction_scheme", "device", "allow_cpu_fallback"),
    )
)  # fmt: skip
