"""librosa's own objects, for the names the compatibility layer does not
accelerate and for the calls it hands over.

Every lookup goes through :func:`librosa_object`, which returns librosa's
original object even while :func:`agl_fast.compat.librosa.install` has
patched the package (so a hand-over never calls back into agl-fast), and
raises :class:`~agl_fast.exceptions.NotAcceleratedError` naming
``pip install librosa`` when librosa is not installed.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping

from ...exceptions import NotAcceleratedError
from ._coverage import ORIGINALS, record_fallback, record_librosa_name

TYPE_CHECKING = False  # typing is not imported at run time (start-up cost)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["handed_over", "librosa_object", "make_submodule"]


#: librosa's public submodules the compatibility layer mirrors.
SUBMODULES = (
    "beat",
    "core",
    "decompose",
    "display",
    "effects",
    "feature",
    "filters",
    "onset",
    "segment",
    "sequence",
    "util",
)


def _module(path: str, qual: str) -> types.ModuleType:
    name = "librosa" + (f".{path}" if path else "")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = exc.name or "librosa"
        if missing.split(".")[0] == "librosa":
            raise NotAcceleratedError(
                f"librosa.{qual} is not accelerated by agl-fast and librosa is not installed "
                "to provide it: pip install librosa"
            ) from exc
        raise


def librosa_object(path: str, name: str, *, count: bool = True) -> Any:
    """librosa's own ``librosa.<path>.<name>``.

    Parameters
    ----------
    path : str
        The submodule (``""`` for the top level, ``"feature"``, ...).
    name : str
        The attribute.
    count : bool
        Count the lookup in :func:`coverage`'s ``librosa_names``.

    Raises
    ------
    AttributeError
        librosa has no such name (as ``librosa`` itself would).
    NotAcceleratedError
        librosa is not installed.
    """
    qual = f"{path}.{name}" if path else name
    if qual in ORIGINALS:
        return ORIGINALS[qual]
    module = _module(path, qual)
    try:
        obj = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None
    if qual in ORIGINALS:  # the lookup imported the module install() just patched
        return ORIGINALS[qual]
    if str(getattr(obj, "__module__", "")).startswith(str(__package__)):
        # install() gave librosa's package agl-fast's function before the
        # module defining librosa's own was imported
        from ._install import librosa_original

        original = librosa_original(qual)
        if original is None:
            raise NotAcceleratedError(f"librosa's own librosa.{qual} could not be found")
        return original
    if count:
        record_librosa_name(qual)
    return obj


def handed_over(name: str, reason: str) -> Callable[..., Any]:
    """librosa's own function ``name`` (``"load"``, ``"feature.mfcc"``) for
    a call the layer does not accelerate, recorded with ``reason``.

    Raises
    ------
    NotAcceleratedError
        librosa is not installed; the message gives ``reason``.
    """
    path, _, attr = name.rpartition(".")
    try:
        fn = librosa_object(path, attr, count=False)
    except NotAcceleratedError as exc:
        raise NotAcceleratedError(
            f"agl_fast.compat.librosa.{name}: {reason}, and librosa is not installed to "
            "handle it: pip install librosa"
        ) from exc
    record_fallback(name, reason)
    return fn  # type: ignore[no-any-return]


def module_getattr(path: str, accelerated: Mapping[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__``: ``accelerated`` names first, then librosa's."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in accelerated:
            return accelerated[name]
        return librosa_object(path, name)

    return __getattr__


def make_submodule(package: str, path: str, accelerated: Mapping[str, str]) -> types.ModuleType:
    """A compatibility submodule ``<package>.<path>`` serving the
    ``accelerated`` names (each mapped to the module of ``package`` that
    defines it, imported on first use) and librosa's ``librosa.<path>`` for
    everything else; registered in :data:`sys.modules` so that ``import
    <package>.<path>`` finds it."""
    mod = types.ModuleType(
        f"{package}.{path}",
        f"``librosa.{path}`` through agl-fast: {sorted(accelerated) or 'no'} accelerated "
        "names, librosa's own objects for the rest.",
    )
    librosa_getattr = module_getattr(path, {})

    def __getattr__(name: str) -> Any:
        home = accelerated.get(name)
        if home is None:
            return librosa_getattr(name)
        value = getattr(importlib.import_module(home, package), name)
        mod.__dict__[name] = value
        return value

    mod.__getattr__ = __getattr__  # type: ignore[method-assign]
    mod.__all__ = sorted(accelerated)  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    return mod
